"""A term, simulated as an instructor lives it (issue 37, "Done when"): two assignments, a class of 8; one late
submission, one extension, one appeal graded again alone, hand-graded points for the written answers (one given in
the formgrader's gradebook, the rest in the CSV), one changed point value followed by a class re-grade. The final LMS
CSVs must equal tables written here by hand from the course's rules."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers.grading_corpus import EX1, run_grade

from manyheads_grader.output import report

pytestmark = pytest.mark.slow
CAPSTONE = "08_capstone"
DUE = "2026-11-30T23:59:00-05:00"  # a Monday


def _run(*args: str) -> None:
    done = run_grade(*args, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


def _rescore(out: Path, *more: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "manyheads_grader", "rescore", *more, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _lms(out: Path) -> dict[str, tuple[str, str]]:
    return {s: (r["score"], r["max_score"]) for s, r in report.read_csv(out / "generic-grades.csv").items()}


def test_a_term_of_two_assignments_ends_in_the_lms_tables_written_by_hand(tmp_path):
    # Assignment 1: s000..s007 (full, partial, blank marks in turn); s007 hands in late, after the first run.
    week, late, out = tmp_path / "week1", tmp_path / "late", tmp_path / "ex1"
    corpus.build_plain(week, 8)
    (late / "s007").mkdir(parents=True)
    shutil.move(week / "s007" / f"{EX1}.ipynb", late / "s007" / f"{EX1}.ipynb")
    (week / "s007").rmdir()
    times = tmp_path / "times.csv"  # as exported from the LMS: s003 and s005 one and a half days late, s007 too
    on_time, late_at = "2026-11-30T20:00:00-05:00", "2026-12-02T11:59:00-05:00"
    stamps = {f"s{i:03d}": late_at if i in (3, 5, 7) else on_time for i in range(8)}
    times.write_text("student_id,submitted_at\n" + "".join(f"{s},{t}\n" for s, t in stamps.items()))
    policy = ["--due", DUE, "--late-penalty", "10", "--times", str(times)]
    _run(EX1, str(week), "--out", str(out), *policy)
    _run(EX1, str(late), "--out", str(out), "--reason", "late work")  # the policy is kept from the first run
    extensions = tmp_path / "extensions.csv"
    extensions.write_text("student_id,due\ns005,2026-12-03T23:59:00-05:00\n")
    _rescore(out, EX1, "--extensions", str(extensions))
    appeal = tmp_path / "appeal" / "s001"
    appeal.mkdir(parents=True)
    shutil.copy2(week / "s001" / f"{EX1}.ipynb", appeal)
    _run(EX1, str(appeal.parent), "--out", str(out), "--reason", "appeal")
    # the written answer (one_head_two_targets, 2 points): s000 in the formgrader's gradebook, the rest in the CSV
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'course' / 'gradebook.db'}", "manyheads") as gb:
        grade = gb.find_grade(corpus.WRITTEN, EX1, EX1, "s000")
        grade.manual_score = 2.0
        gb.db.commit()
    points = {"s001": 1, "s002": 0, "s003": 2, "s004": 2, "s005": 1, "s006": 2, "s007": 2}
    (out / "manual-grades.csv").write_text(
        "student_id,item,points,comment\n" + "".join(f"{s},{corpus.WRITTEN},{p},\n" for s, p in points.items())
    )
    _rescore(out, EX1)
    # test_softmax now worth 3 (automatic 9, assignment 11): the class graded again under it
    course = corpus.course_with_points(tmp_path, "test_softmax", 3)
    everyone = tmp_path / "everyone"
    shutil.copytree(week, everyone)
    shutil.copytree(late / "s007", everyone / "s007")
    _run(EX1, str(everyone), "--out", str(out), "--course", str(course), "--reason", "softmax worth 3")

    # By hand: full 9, partial (no 1/sqrt(d_k)) 3 + 2 = 5, blank 0; plus the written answer; late: 1.5 days, 2 started,
    # 20 % of 11 = 2.2 off; s005's extension covers its time.
    assert _lms(out) == {
        "s000": ("11", "11"),  # 9 + 2 (formgrader, kept through the class re-grade)
        "s001": ("6", "11"),  # 5 + 1
        "s002": ("0", "11"),  # 0 + 0
        "s003": ("8.8", "11"),  # 9 + 2 - 2.2
        "s004": ("7", "11"),  # 5 + 2
        "s005": ("1", "11"),  # 0 + 1, on time by its extension
        "s006": ("11", "11"),  # 9 + 2
        "s007": ("4.8", "11"),  # 5 + 2 - 2.2, handed in late after the first run
    }
    history = sorted(p.name.split("-")[1] for p in (out / "history").glob("*.json"))
    assert history.count("s001") == 2 and len(history) == 8 + 1  # the appeal, then the whole class

    # Assignment 2, the capstone: written answers only (13 points), all in the CSV; nobody late.
    subs, out2 = tmp_path / "capstone", tmp_path / "ex2"
    release = nbformat.read(corpus.ROOT / "exercises" / CAPSTONE / f"{CAPSTONE}.ipynb", as_version=4)
    for i in range(8):
        (subs / f"s{i:03d}").mkdir(parents=True)
        nbformat.write(release, subs / f"s{i:03d}" / f"{CAPSTONE}.ipynb")
    _run(CAPSTONE, str(subs), "--out", str(out2), "--due", DUE)
    given = {"hypothesis": 2, "design": 3, "pilot": 1, "predictions": 2, "threats": 0}
    lines = [f"s{i:03d},{item},{p if i % 2 == 0 else 1},\n" for i in range(8) for item, p in given.items()]
    (out2 / "manual-grades.csv").write_text("student_id,item,points,comment\n" + "".join(lines))
    _rescore(out2, CAPSTONE)
    assert _lms(out2) == {f"s{i:03d}": ("8" if i % 2 == 0 else "5", "13") for i in range(8)}
