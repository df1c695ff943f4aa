"""A term of grading into one OUT, with real nbgrader (issue 37, items 1-3): a class of 6 graded once (the module's
fixture), then, each in a copy of that OUT, what the weeks after bring: one student graded again, an undo, another
assignment into the same OUT, a rescore, and runs that crash or are killed part-way."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers.grading_corpus import EX1, run_grade

from manyheads_grader import store
from manyheads_grader.output import report
from manyheads_grader.records import answer_code
from manyheads_grader.review import flags
from manyheads_grader.term import generations

pytestmark = pytest.mark.slow
CLASS = [f"s{i:03d}" for i in range(6)]


def outputs(out: Path) -> dict[str, str]:
    """What an instructor sees in OUT, file by file (through the links), as digests: every output but the
    generations' own folders and the lock."""
    found = {}
    for top in sorted(out.iterdir()):
        if top.name in (generations.GENERATIONS, generations.CURRENT, ".lock"):
            continue
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            found[str(path.relative_to(out))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def gradebook_scores(out: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'course' / 'gradebook.db'}", "manyheads") as gb:
        return {s.student_id: s.score for s in gb.assignment_submissions(EX1)}


def identical(out: Path) -> tuple[dict[str, list[str]], list[dict]]:
    """The identical-answer flags of each student and the groups, as the class kept in OUT has them."""
    rows, facts = store.read_class(generations.current(out))
    return {r.student_id: r.copied for r in rows}, facts.identical


def expected_identical(folders: dict[str, Path], out: Path) -> tuple[dict[str, list[str]], list[dict]]:
    """The identical answers of the class whose notebooks lie in ``folders`` (student -> submissions folder), found
    by the detector on the whole class at once: what the kept class must say after any number of runs."""
    code = {s: answer_code(nbformat.read(folder / s / f"{EX1}.ipynb", as_version=4)) for s, folder in folders.items()}
    copied, groups = flags.in_class(code, store.read_answer_key(generations.current(out)))
    return {s: copied.get(s, []) for s in folders}, [dataclasses.asdict(g) for g in groups]


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    base = tmp_path_factory.mktemp("term")
    corpus.build_plain(base / "week1", 6)  # s000 full marks, s001 4/8, s002 blank, in turn
    done = run_grade(EX1, str(base / "week1"), "--out", str(base / "out"), "--jobs", "2", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    late = base / "late" / "s001"  # s001 hands in a corrected notebook
    late.mkdir(parents=True)
    (late / f"{EX1}.ipynb").write_bytes(corpus.dump(corpus.answered()))
    return base


def _copy(term: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out with space"
    shutil.copytree(term / "out", out, symlinks=True)  # the links are relative: the copy is a whole OUT
    return out


def test_the_first_run_writes_one_current_generation(term):
    out = term / "out"
    assert generations.current(out) is not None and (out / "grades.csv").is_symlink()
    assert sorted(report.read_csv(out / "grades.csv")) == CLASS
    assert sorted(p.name for p in (out / generations.GENERATIONS).iterdir()) == [generations.current(out).name]


def test_grading_one_student_again_keeps_the_class_and_undo_restores_them(term, tmp_path):
    out = _copy(term, tmp_path)
    before = outputs(out)
    done = run_grade(EX1, str(term / "late"), "--out", str(out), "--quiet", "--reason", "late work")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report.read_csv(out / "grades.csv")
    assert sorted(rows) == CLASS and rows["s001"]["score"] == "8" and rows["s004"]["score"] == "4"
    lms_rows = report.read_csv(out / "generic-grades.csv")
    assert sorted(lms_rows) == CLASS and lms_rows["s001"]["score"] == "8"
    assert sorted(p.name for p in (out / "feedback").iterdir()) == CLASS
    assert gradebook_scores(out) == {"s000": 8, "s001": 8, "s002": 0, "s003": 8, "s004": 4, "s005": 0}
    assert sorted(p.name for p in (out / "course" / "autograded").iterdir()) == CLASS
    assert len(list((out / "lms-feedback").iterdir())) == 6
    for student in ("s000", "s002", "s003", "s004", "s005"):  # untouched: the same bytes
        for name in (f"feedback/{student}/{EX1}.html", f"lms-feedback/{student}__{EX1}.html"):
            if name in before:
                assert outputs(out)[name] == before[name], name
    [entry] = list((out / "history").glob("*.json"))
    assert "s001" in entry.name and '"reason": "late work"' in entry.read_text()
    assert (
        "this run graded 1 of the 6 students; the other 5 keep their earlier results" in (out / "report.md").read_text()
    )
    # identical answers are the class's, not the run's: compared again with s001's new answers, so no flag names
    # s001 for the code they no longer hand in, and the reference groups count them
    first, now = identical(term / "out"), identical(out)
    assert first == expected_identical({s: term / "week1" for s in CLASS}, term / "out")
    assert now == expected_identical({**{s: term / "week1" for s in CLASS}, "s001": term / "late"}, out)
    assert any("s001" in f for f in first[0]["s004"]) and not any("s001" in f for f in now[0]["s004"]), (first, now)
    assert "handed in by 3 students: s000, s001, s003" in (out / "report.md").read_text()

    undone = run_grade(EX1, "--out", str(out), "--undo", "s001")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert identical(out) == first  # the class as it was, flags and groups
    assert report.read_csv(out / "grades.csv")["s001"]["score"] == "4"
    assert gradebook_scores(out)["s001"] == 4
    assert (out / f"feedback/s001/{EX1}.html").read_bytes() == (term / "out" / f"feedback/s001/{EX1}.html").read_bytes()
    [entry] = list((out / "history").glob("*.json"))
    assert '"reason": "undone"' in entry.read_text()


def test_another_assignment_into_the_same_out_is_refused_before_anything_is_written(term, tmp_path):
    out = _copy(term, tmp_path)
    before = outputs(out), sorted(os.listdir(out / generations.GENERATIONS))
    done = run_grade("02_multi_head_split", str(term / "late"), "--out", str(out), "--quiet")
    assert done.returncode == 2
    assert f"holds the grades of {EX1}, not 02_multi_head_split" in done.stderr
    assert (outputs(out), sorted(os.listdir(out / generations.GENERATIONS))) == before


def rescore(out: Path, *more: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "manyheads_grader", "rescore", EX1, "--out", str(out), *more],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_a_rescore_runs_nothing_and_makes_the_same_outputs(term, tmp_path):
    out = _copy(term, tmp_path)
    before = outputs(out)
    done = rescore(out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        "6 student(s) still have hand-graded answers to grade, leaving out 12"
    )
    after = outputs(out)
    assert after.keys() == before.keys()
    changed = {name for name in after if after[name] != before[name]}
    # the report says it was a rescore; the feedback pages carry the totals; nothing else differs
    assert all(n in ("report.md", "report.html") or n.startswith(("feedback/", "lms-feedback")) for n in changed)
    assert (out / "grades.csv").read_text() == (term / "out" / "grades.csv").read_text()


@pytest.mark.parametrize("point", ["grades.csv", "lms", "report.html"])
def test_a_rescore_that_crashes_after_any_output_leaves_every_output_as_before(term, tmp_path, point):
    out = _copy(term, tmp_path)
    before = outputs(out)
    crashed = rescore(out, "--due", "2026-11-01T00:00:00+00:00", env={generations.CRASH_AFTER: point})
    assert crashed.returncode == 70, crashed.stderr
    assert outputs(out) == before
    done = rescore(out)
    assert done.returncode == 0 and "took over the lock of process" in (out / "report.md").read_text()


def test_a_re_grade_that_crashes_after_its_records_leaves_every_output_as_before(term, tmp_path):
    out = _copy(term, tmp_path)
    before = outputs(out)
    crashed = run_grade(EX1, str(term / "late"), "--out", str(out), "--quiet", env={generations.CRASH_AFTER: "records"})
    assert crashed.returncode == 70, crashed.stderr
    assert outputs(out) == before and store.read_class(out)[0][1].score == 4.0


def test_runs_killed_at_several_points_leave_readable_outputs_and_the_next_run_succeeds(term, tmp_path):
    out = _copy(term, tmp_path)
    before = outputs(out)
    command = [sys.executable, "-m", "manyheads_grader", "grade", EX1, str(term / "week1"), "--out", str(out)]
    for after in (1.0, 4.0, 8.0):  # starting, grading, writing: wherever it is, SIGKILL
        run = subprocess.Popen([*command, "--jobs", "2", "--quiet"], cwd=corpus.ROOT, start_new_session=True)
        time.sleep(after)
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        if run.returncode == 0:  # it finished first: nothing to check at this point
            break
        assert outputs(out) == before, f"killed after {after} s"
        rows, _ = store.read_class(out)
        assert [r.student_id for r in rows] == CLASS
    done = run_grade(EX1, str(term / "late"), "--out", str(out), "--quiet")  # the next run: one student, enough
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(report.read_csv(out / "grades.csv")) == CLASS and len(list((out / "history").glob("*.json"))) == 1
    assert report.read_csv(out / "grades.csv")["s001"]["score"] == "8"


def test_a_changed_point_value_lists_who_was_graded_before_and_a_class_re_grade_applies_it(term, tmp_path):
    out, course = _copy(term, tmp_path), corpus.course_with_points(tmp_path, "test_softmax", 3)
    done = run_grade(EX1, str(term / "late"), "--out", str(out), "--course", str(course), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report.read_csv(out / "grades.csv")
    # s001's notebook came from the earlier release (2 points): recognised, not blamed as an edited test
    assert rows["s001"]["status"] == "graded" and rows["s001"]["score"] == "9" and rows["s001"]["max_score"] == "11"
    assert "edited" not in rows["s001"]["problems"] and "written for an earlier release" in rows["s001"]["problems"]
    earlier = sorted(s for s, r in rows.items() if "graded under an earlier release" in r["problems"])
    assert earlier == ["s000", "s002", "s003", "s004", "s005"]
    assert "5 student(s) graded under an earlier release" in (out / "report.md").read_text()
    again = run_grade(EX1, str(term / "week1"), "--out", str(out), "--course", str(course), "--quiet")
    assert again.returncode == 0, again.stdout + again.stderr
    rows = report.read_csv(out / "grades.csv")
    assert {s: r["score"] for s, r in rows.items()} == {
        "s000": "9",
        "s001": "5",
        "s002": "0",
        "s003": "9",
        "s004": "5",
        "s005": "0",
    }
    for row in rows.values():  # every notebook was written for the earlier release: said, not blamed
        assert "graded under an earlier release" not in row["problems"] and "edited" not in row["problems"], row
        assert "written for an earlier release" in row["problems"] and row["status"] == "graded", row
