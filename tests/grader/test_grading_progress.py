"""Progress while grading (progress.py, issue 26 item 4): one line per student as their notebook is graded (id, name,
score, seconds, flags) with the time left; ``--quiet`` prints none. The real command's lines are checked in
``test_grading_budget.py`` (with progress) and ``test_instructor_report.py`` (``--quiet``)."""

from __future__ import annotations

import io
import re

import nbformat
import pytest
from helpers import grading_corpus as corpus

from manyheads_grader.output import progress
from manyheads_grader.records import Row

LINE = re.compile(r"^\[\s*(\d+)/(\d+)\] (\S+)(?: \(([^)]*)\))?: (.*?) in (\d+\.\d) s(?: \((.*)\))?(?:; (.*))?$")


def test_one_line_per_student_with_name_score_seconds_flags_and_time_left():
    out = io.StringIO()
    tracker = progress.Progress(3, stream=out)
    tracker.started -= 30  # 30 s so far
    tracker.finished(Row("s1", name="Ann Lee"), 10.0, "8/8", [])
    tracker.finished(Row("s2", repaired=True), 10.0, "4/8", ["repaired", "time limit"])
    tracker.finished(Row("s3"), 10.0, "not graded", ["the kernel died"])
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    first = LINE.match(lines[0]).groups()
    assert first[:6] == ("1", "3", "s1", "Ann Lee", "8/8", "10.0") and first[7].startswith("about 1 min")
    assert LINE.match(lines[1]).group(7) == "repaired, time limit"
    assert lines[2].endswith("(the kernel died); done")


def test_quiet_prints_nothing():
    out = io.StringIO()
    tracker = progress.Progress(1, stream=out, quiet=True)
    tracker.finished(Row("s1"), 1.0, "8/8", [])
    assert out.getvalue() == "" and tracker.done == 1


def test_the_score_is_read_as_nbgrader_scores_the_graded_notebook(tmp_path):
    nb = corpus.answered()
    test_ids = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("points")}
    test_ids = {t for t in test_ids if t.startswith("test_")}
    i = corpus.cell_index(nb, "test_softmax")
    nb.cells[i].outputs = [nbformat.v4.new_output("error", ename="TimeoutError", evalue="x", traceback=[])]
    with pytest.raises(ValueError, match="not run yet"):  # sanitized, not yet run
        nbformat.write(nb, tmp_path / "graded.ipynb")
        progress.notebook_score(tmp_path / "graded.ipynb", test_ids)
    nb.cells[0].execution_count = 1
    nbformat.write(nb, tmp_path / "graded.ipynb")
    score, top, hit = progress.notebook_score(tmp_path / "graded.ipynb", test_ids)
    assert (score, top, hit) == (corpus.FULL - 2, corpus.FULL, ["time limit"])
