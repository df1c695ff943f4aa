"""The class's result kept under OUT (issue 36, item 1): written as JSON, read back into the same rows and facts, so
that the outputs made from what was read are the outputs of the run; and a missing, damaged or other-format file is
refused with what to do."""

from __future__ import annotations

import json

import pytest

from manyheads_grader import store
from manyheads_grader.output import report
from manyheads_grader.records import CellEvidence, Problem, ProblemKind, Row, RunFacts, VersionFacts, not_graded

POINTS = {"test_softmax": 2.0, "test_attention": 3.0}


def _class(out):
    page = out / "feedback" / "ann" / "01_single_head_bottleneck.html"
    page.parent.mkdir(parents=True)
    page.write_text("<p>feedback</p>")
    ann = Row("ann", status="graded", score=5.0, max_score=5.0, tests=dict(POINTS), name="Ann Lee", feedback=page)
    ann.flags = ["out of order: cell 3"]
    ann.evidence = [CellEvidence("extra cell 3", 41, "print('scale', scale)\n", ("scale 0.125",), ("NameError",))]
    ann.copied = ["identical answer: answer cell softmax has the same code as bob (…)"]
    ann.code = {"softmax": "def softmax(x):\n    return x"}
    ann.version = "0.7.0"
    bob = Row("bob", status="repaired", score=2.0, max_score=5.0, tests={"test_softmax": 2.0, "test_attention": None})
    bob.zeroed, bob.failures = {"test_attention": "OwnWorkError: x"}, {"test_attention": "OwnWorkError: x"}
    bob.problems = [
        Problem(ProblemKind.REPAIRED, "test cell test_softmax deleted: restored"),
        Problem(ProblemKind.OWN_WORK, "own work: test_attention got no points: OwnWorkError: x"),
    ]
    bob.repaired = True
    cy = Row("cy", status="failed", problems=[not_graded("the kernel died")])
    facts = RunFacts(
        "01_single_head_bottleneck",
        dict(POINTS),
        jobs=2,
        seconds=12.5,
        skipped=["notes.txt"],
        identical=[
            {
                "part": "softmax",
                "students": ["ann", "bob"],
                "starts": "def softmax(x):",
                "reference": False,
                "common": False,
            }
        ],
        versions=VersionFacts("0.7.0", "0.7.0", "0.7.0", None, {"bob": "0.6.2"}, ["cy"]),
        phases={"nbgrader": 3.0},
        preflight="reference 5/5, blank 0",
    )
    return [ann, bob, cy], facts


def test_the_stored_class_reads_back_as_the_same_rows_and_facts(tmp_path):
    rows, facts = _class(tmp_path)
    store.write_class(tmp_path, rows, facts)
    back, back_facts = store.read_class(tmp_path)
    assert back_facts == facts
    fields = ("student_id", "name", "status", "score", "max_score", "tests", "zeroed", "failures", "flags")
    fields += ("evidence", "copied", "code")
    for before, after in zip(rows, back):
        assert {f: getattr(after, f) for f in fields} == {f: getattr(before, f) for f in fields}
        assert after.problems == before.problems and after.repaired == before.repaired
        assert after.version == before.version and after.feedback == before.feedback
    assert back[2].problems[0].kind is ProblemKind.NOT_GRADED and back[2].problems[0].detail == "the kernel died"


def test_the_outputs_made_from_the_stored_class_are_the_runs(tmp_path):
    rows, facts = _class(tmp_path)
    store.write_class(tmp_path, rows, facts)
    back, back_facts = store.read_class(tmp_path)
    for name, (r, f) in {"direct": (rows, facts), "stored": (back, back_facts)}.items():
        report.write_csv(tmp_path / f"{name}.csv", r, f.test_ids)
        report.write_report(tmp_path / f"{name}.md", r, f)
    assert (tmp_path / "stored.csv").read_text() == (tmp_path / "direct.csv").read_text()
    assert (tmp_path / "stored.md").read_text() == (tmp_path / "direct.md").read_text()


def test_a_missing_damaged_or_other_format_file_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(store.RecordsError, match="does not exist: grade the class"):
        store.read_class(tmp_path)
    rows, facts = _class(tmp_path)
    path = store.write_class(tmp_path, rows, facts)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "format": store.FORMAT + 1}))
    with pytest.raises(store.RecordsError, match=f"record format {store.FORMAT + 1}; this grader reads format"):
        store.read_class(tmp_path)
    path.write_text(path.read_text()[:100])  # cut short
    with pytest.raises(store.RecordsError, match="cannot be read"):
        store.read_class(tmp_path)
    del data["students"][0]["tests"]
    path.write_text(json.dumps(data))
    with pytest.raises(store.RecordsError, match="is damaged"):
        store.read_class(tmp_path)


def test_a_run_stopped_while_writing_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    rows, facts = _class(tmp_path)
    store.write_class(tmp_path, rows, facts)
    before = (tmp_path / store.RECORDS).read_text()

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(tmp_path), "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write_class(tmp_path, rows[:1], facts)
    monkeypatch.undo()
    assert (tmp_path / store.RECORDS).read_text() == before
