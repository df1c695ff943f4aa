"""The chapters' run times: the committed benchmark (benchmarks/results/chapters_solo.json) covers every chapter and
meets the budget, and the landing page's times come from it (_ext/chapter_times.py), never typed."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from manyheads.course.layout import REPO

_spec = importlib.util.spec_from_file_location("chapter_times", REPO.root / "_ext" / "chapter_times.py")
times = sys.modules.setdefault("chapter_times", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(times)

TIMINGS = REPO.root / "benchmarks" / "results" / "chapters_solo.json"
# The course's budget for one chapter executed alone on 2 cores (issue 24): the first four are lighter.
BUDGET_S = {"01": 90, "02": 90, "03": 90, "04": 90}


def _write(root, rows, chapters):
    (root / "chapters").mkdir()
    for stem in chapters:
        (root / "chapters" / f"{stem}.ipynb").write_text("{}")
    path = root / "benchmarks" / "results" / "chapters_solo.json"
    path.parent.mkdir(parents=True)
    meta = {"cpu": "AMD EPYC", "cpu_threads": 2, "when": "2026-11-27T02:00:00+00:00"}
    path.write_text(json.dumps({"benchmark": "chapters_solo", "meta": meta, "rows": rows}))


def test_the_substitutions_come_from_the_timings(tmp_path):
    rows = [
        {"chapter": "01_a", "solo_s": 28.4, "solo_runs": [28.1, 28.4, 30.0]},
        {"chapter": "02_b", "solo_s": 101.6, "solo_runs": [99.0, 101.6, 104.2]},
    ]
    _write(tmp_path, rows, ["01_a", "02_b"])
    got = times.chapter_times(tmp_path)
    assert got["chapter_time_max"] == "102 s" and got["chapter_time_min"] == "28 s"
    assert got["chapter_time_total"] == "2 min" and got["chapter_time_slowest"] == "02_b"
    assert "median of 3 runs" in got["chapter_time_where"] and "2026-11-27" in got["chapter_time_where"]


def test_a_chapter_without_a_timing_leaves_the_page_without_times(tmp_path):
    _write(tmp_path, [{"chapter": "01_a", "solo_s": 28.4, "solo_runs": [28.4]}], ["01_a", "02_new"])
    assert times.chapter_times(tmp_path) == {}  # the -W build then fails on the undefined substitution
    assert times.chapter_times(tmp_path / "nowhere") == {}


@pytest.mark.xfail(
    strict=True,
    reason="issue 35 left chapters 5 and 6 over their 120 s budget: 157 s and 142 s alone (benchmarks/chapters.py "
    "--solo 1 on 2026-11-29, one run each, so also short of the 3-run median; 155 s and 138 s in a second run): "
    "cut them, re-measure with --solo 3, and remove this mark",
)
def test_the_committed_timings_cover_every_chapter_within_its_budget():
    data = json.loads(TIMINGS.read_text(encoding="utf-8"))
    assert {"cpu", "cpu_threads", "when"} <= data["meta"].keys()
    rows = {row["chapter"]: row for row in data["rows"]}
    over = []
    for chapter in REPO.chapters():
        row = rows.get(chapter.stem)
        assert row is not None, f"{chapter.stem} has no solo timing: run benchmarks/chapters.py --solo"
        assert len(row["solo_runs"]) >= 3, f"{chapter.stem}: the budget is read from the median of 3 runs"
        budget = BUDGET_S.get(chapter.stem[:2], 120)
        if row["solo_s"] > budget:
            over.append(f"{chapter.stem}: {row['solo_s']} s > {budget} s")
    assert over == []


@pytest.mark.parametrize("name", ["chapter_time_max", "chapter_time_min", "chapter_time_total", "chapter_time_where"])
def test_the_landing_page_uses_the_measured_times(name):
    assert "{{ " + name + " }}" in (REPO.root / "intro.md").read_text(encoding="utf-8")


def test_no_substitution_on_the_landing_page_sits_in_a_code_literal():
    # MyST does not fill in {{ name }} inside backticks: the page showed the raw template (review finding I1).
    import re

    text = (REPO.root / "intro.md").read_text(encoding="utf-8")
    assert re.findall(r"`[^`\n]*\{\{[^`\n]*`", text) == []
