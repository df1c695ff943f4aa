"""Budget checks (manyheads.analysis.budget_checks; CONTRIBUTING, "Verdicts from training survive a longer budget"):
every committed record is long enough, ships with the package, and is glued by its chapter; a short or missing record
is refused with a clear message."""

from __future__ import annotations

import importlib
import json

import nbformat
import pytest

import manyheads as mh
from manyheads.course.layout import REPO

RECORDS = REPO.root / "src" / "manyheads" / "data" / "budget_checks"
RESULTS = REPO.root / "benchmarks" / "results" / "budget_checks"


def _good(**changes) -> dict:
    record = {
        "id": "ch0-planted",
        "chapter": "00_planted",
        "verdict": "no planted run learns it",
        "criterion": "no seed reaches 99 %",
        "chapter_steps": 200,
        "steps": 1000,
        "seeds": [0, 1, 2],
        "holds": True,
        "shows": "0 of 3 seeds reach 99 % at 1,000 steps.",
        "numbers": {"seed 0": [0.5, 0.4]},
    }
    return {**record, **changes}


def test_every_committed_record_has_five_times_the_steps_and_three_seeds():
    ids = mh.budget_check_ids()
    assert ids, "no budget-check records are committed (benchmarks/budget_check_*.py writes them)"
    for check_id in ids:
        check = mh.budget_check(check_id)  # refuses a record that breaks the rule
        assert check.steps >= 5 * check.chapter_steps and len(set(check.seeds)) >= 3, check_id
        assert check.id == check_id and check.numbers, check_id


def test_the_package_ships_the_same_records_as_the_benchmarks_committed():
    shipped = {p.name: p.read_text(encoding="utf-8") for p in RECORDS.glob("*.json")}
    committed = {p.name: p.read_text(encoding="utf-8") for p in RESULTS.glob("*.json")}
    assert shipped == committed, "copy benchmarks/results/budget_checks/ into src/manyheads/data/budget_checks/"


def test_every_record_is_glued_by_its_chapter_and_every_chapter_record_exists():
    """A record nobody quotes is a verdict the chapter dropped; a chapter quoting an unknown record cannot run."""
    quoted = {}
    for chapter in REPO.chapters():
        source = "\n".join(c.source for c in nbformat.read(chapter, as_version=4).cells if c.cell_type == "code")
        for check_id in mh.budget_check_ids():
            if f'"{check_id}"' in source:
                quoted.setdefault(check_id, []).append(chapter.stem)
    for check_id in mh.budget_check_ids():
        assert quoted.get(check_id) == [mh.budget_check(check_id).chapter], (check_id, quoted.get(check_id))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 999}, "less than 5x the chapter's 200"),
        ({"seeds": [0, 1]}, "2 seed(s) [0, 1]: a check needs at least 3"),
        ({"seeds": [0, 0, 1]}, "2 seed(s)"),
        ({"numbers": {}}, "no numbers"),
        ({"shows": " "}, "must all be filled in"),
    ],
    ids=["4.995x-the-steps", "two-seeds", "a-repeated-seed", "no-numbers", "nothing-shown"],
)
def test_a_record_that_breaks_the_rule_is_refused(changes, message):
    with pytest.raises(mh.BudgetCheckError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        mh.BudgetCheck.from_dict(_good(**changes))


def test_a_missing_or_corrupt_record_says_what_to_run(tmp_path, monkeypatch):
    with pytest.raises(mh.BudgetCheckError, match=r"no budget-check record 'ch9-nope'.*benchmarks/budget_check_"):
        mh.budget_check("ch9-nope")
    from manyheads.analysis import budget_checks

    (tmp_path / "ch0-broken.json").write_text('{"id": "ch0-broken", ', encoding="utf-8")
    monkeypatch.setattr(budget_checks, "_records", lambda: tmp_path)
    with pytest.raises(mh.BudgetCheckError, match="not valid JSON.*rerun its benchmark"):
        mh.budget_check("ch0-broken")
    (tmp_path / "ch0-short.json").write_text(json.dumps(_good(id="ch0-short", steps=400)), encoding="utf-8")
    with pytest.raises(mh.BudgetCheckError, match="400 steps is less than 5x"):
        mh.budget_check("ch0-short")


def test_the_sentence_states_the_budget_and_what_the_longer_run_shows():
    holds = mh.BudgetCheck.from_dict(_good())
    assert holds.sentence() == (
        "No planted run learns it in 200 training steps, and a check at 1,000 steps over 3 seeds confirms it: "
        "0 of 3 seeds reach 99 % at 1,000 steps."
    )
    fails = mh.BudgetCheck.from_dict(_good(holds=False, shows="seed 2 reaches 0.85 at 1,000 steps."))
    assert fails.sentence().startswith("No planted run learns it in 200 training steps, but a check at 1,000")
    assert fails.sentence().endswith("does not bear it out: seed 2 reaches 0.85 at 1,000 steps.")


def test_glue_verdict_glues_the_sentence_and_the_record_beside_it(monkeypatch):
    glued = {}
    glue_module = importlib.import_module("manyheads.viz.glue")  # the module (mh.viz.glue is the function)
    monkeypatch.setattr(glue_module, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    check = mh.BudgetCheck.from_dict(_good())
    assert mh.glue_verdict("verdict_planted", check) == check.sentence()
    assert glued == {
        "verdict_planted": check.sentence(),
        "verdict_planted_record": "ch0-planted",
        "verdict_planted_steps": 200,
        "verdict_planted_check_steps": 1000,
        "verdict_planted_check_seeds": 3,
        "verdict_planted_outcome": "holds",
    }
    with pytest.raises(ValueError, match="starts with 'verdict_'"):
        mh.glue_verdict("single_head", check)
    with pytest.raises(TypeError, match="needs a BudgetCheck"):
        mh.glue_verdict("verdict_planted", "ch0-planted")


def test_write_budget_check_refuses_a_nan(tmp_path):
    check = mh.BudgetCheck.from_dict(_good(numbers={"seed 0": [float("nan")]}))
    with pytest.raises(mh.BudgetCheckError, match="NaN or infinite"):
        mh.write_budget_check(check, tmp_path)
    paths = mh.write_budget_check(mh.BudgetCheck.from_dict(_good()), tmp_path)
    assert [p.read_text() for p in paths] == [paths[0].read_text()] * 2
