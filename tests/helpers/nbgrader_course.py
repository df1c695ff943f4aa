"""A throw-away nbgrader course for the tests: the repository's config and solutions/, real nbgrader commands.

Nothing here writes into the repository: each course lives in its own temporary folder, with its own gradebook.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
import torch

from manyheads.course import release

ROOT = Path(__file__).resolve().parents[2]


def start_nbgrader(course: Path, *args: str) -> subprocess.Popen:
    """Start one nbgrader command in ``course`` (which holds a copy of the course's nbgrader_config.py).

    nbgrader creates a gradebook by running the ``alembic`` executable from PATH, so the venv's bin/ goes first
    there even when the tests run without an activated venv.
    """
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    return subprocess.Popen(
        release.nbgrader_command(*args, root=course), cwd=course, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    """Wait for a started nbgrader command: (exit status, its output)."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        return -9, output
    return process.returncode, output


def run_nbgrader(course: Path, *args: str, timeout: float = 600) -> tuple[int, str]:
    """Run one nbgrader command in ``course`` to the end: (exit status, its output)."""
    return finish(start_nbgrader(course, *args), timeout)


def new_course(course: Path, assignment: str) -> Path:
    """A course folder with the config and one assignment's source, released *with* a gradebook (autograde needs it)."""
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / release.CONFIG_FILE, course / release.CONFIG_FILE)
    shutil.copytree(ROOT / release.SOURCE_DIR / assignment, course / release.SOURCE_DIR / assignment)
    status, output = run_nbgrader(course, "generate_assignment", assignment, "--force")
    assert status == 0, output
    assert (course / "gradebook.db").is_file()
    return course


def submit(course: Path, student: str, assignment: str, nb: nbformat.NotebookNode) -> None:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")


def with_answers(nb: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cells (by nbgrader grade_id) hold the given sources, as a student would type."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    found = set()
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id].strip("\n")
            found.add(grade_id)
    assert found == set(answers), f"no answer cells for {set(answers) - found}"
    return nb


def grades(course: Path, assignment: str) -> dict[str, dict[str, tuple]]:
    """{student: {grade_id: (auto_score, max_score, needs_manual_grade)}} from the course's gradebook."""
    from nbgrader.api import Gradebook

    result: dict[str, dict[str, tuple]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "manyheads") as gb:
        for submission in gb.assignment_submissions(assignment):
            [notebook] = submission.notebooks
            result[submission.student_id] = {
                g.name: (g.auto_score, g.max_score, g.needs_manual_grade) for g in notebook.grades
            }
    return result


def errors(course: Path, student: str, assignment: str) -> list[tuple[str, str]]:
    """(cell grade_id or index, exception name) for every error output in a student's autograded notebook."""
    nb = nbformat.read(course / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4)
    return [
        (cell.metadata.get("nbgrader", {}).get("grade_id", str(i)), out.ename)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]


def once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, compute: Callable[[], dict]) -> dict:
    """Compute a JSON-able result once per pytest run, even when xdist spreads the tests over several workers.

    Workers share the run's base temporary folder: the first one to take the lock computes and stores the result,
    the others read it (the pattern from pytest-xdist's documentation, with a stdlib lock).
    """
    if worker_id == "master":
        return compute()
    shared = tmp_path_factory.getbasetemp().parent
    stored = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stored.is_file():
            stored.write_text(json.dumps(compute()), encoding="utf-8")
        return json.loads(stored.read_text(encoding="utf-8"))


def autograde_submissions(base: Path, assignment: str, answers: dict[str, dict[str, str]], copies: int = 2) -> dict:
    """Release ``assignment`` with a gradebook, submit the solution, the blank release and one notebook per student
    (the release with the solution's answer cells, then ``answers[student]`` replacing some of them, by grade_id),
    autograde them all with real nbgrader, and collect what it decided.

    The submissions are spread over ``copies`` copies of the course autograded at the same time (nbgrader grades one
    submission after the other). Returns a JSON-able dict: returncode, log, grades {student: {grade_id: (auto,
    max, needs_manual)}}, errors {student: [(cell, exception name)]}.
    """
    course = new_course(base / "course-0", assignment)
    exercise = nbformat.read(course / release.RELEASE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    solution = nbformat.read(course / release.SOURCE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    reference = {
        c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    }
    submissions = {"solution": solution, "blank": exercise}
    for student, replaced in answers.items():
        submissions[student] = with_answers(exercise, {**reference, **replaced})
    courses = [course] + [base / f"course-{i}" for i in range(1, copies)]
    for other in courses[1:]:
        shutil.copytree(course, other)
    for i, (student, nb) in enumerate(submissions.items()):
        submit(courses[i % copies], student, assignment, nb)
    finished = [finish(p) for p in [start_nbgrader(c, "autograde", assignment, "--force") for c in courses]]
    found: dict = {"returncode": max(status for status, _ in finished), "log": "".join(out for _, out in finished),
                   "grades": {}, "errors": {}}
    for c in courses:
        found["grades"].update(grades(c, assignment))
    for i, student in enumerate(submissions):
        found["errors"][student] = errors(courses[i % copies], student, assignment)
    return found


# nbgrader's own log records look like "[AutogradeApp | ERROR] Timeout waiting for execute reply".
_NBGRADER_ERROR = re.compile(r"^\[\w+ \| (ERROR|CRITICAL)\]", re.MULTILINE)


def nbgrader_errors(log: str) -> list[str]:
    """The ERROR and CRITICAL records nbgrader itself logged (timeouts, dead kernels, failed submissions).

    Not every line with "ERROR" in it: ipykernel 6.31 sometimes prints "ERROR:tornado.general:Uncaught exception in
    ZMQStream callback ... Socket operation on non-socket" from a kernel that is shutting down after the notebook was
    graded and written (a race fixed in ipykernel 7.3, ipython/ipykernel#1518; 7.x itself is not used, see
    requirements.txt). That noise changes no grade, and the grades are checked separately.
    """
    return [line for line in log.splitlines() if _NBGRADER_ERROR.match(line)]


def auto_scores(autograded: dict, student: str) -> dict[str, float]:
    """Points each autograded test cell (grade_id ``test_*``) gave ``student``, from :func:`autograde_submissions`."""
    return {g: s[0] for g, s in autograded["grades"][student].items() if g.startswith("test_")}


def assert_autograde_ran_cleanly(autograded: dict, students) -> None:
    """nbgrader exited 0, logged no error of its own and graded the solution, the blank release and every student."""
    assert autograded["returncode"] == 0, autograded["log"]
    assert nbgrader_errors(autograded["log"]) == [], autograded["log"]
    assert set(autograded["grades"]) == {"solution", "blank", *students}


def assert_solution_gets_full_marks_and_written_answer_waits(autograded: dict, full: dict[str, float],
                                                            written: str, points: float = 2.0) -> None:
    """Full automatic marks and no error for the solution; its written answer ``written`` waits for a person."""
    assert auto_scores(autograded, "solution") == full
    assert autograded["errors"]["solution"] == []
    _, max_score, needs_manual = autograded["grades"]["solution"][written]
    assert needs_manual and max_score == points


def assert_blank_gets_zero_with_only_not_implemented_errors(autograded: dict, full: dict[str, float]) -> None:
    """The untouched release scores 0 on every test, and only because its answers raise NotImplementedError."""
    assert auto_scores(autograded, "blank") == dict.fromkeys(full, 0.0)
    found = autograded["errors"]["blank"]
    assert found and {name for _, name in found} == {"NotImplementedError"}, found


def hidden_tests(assignment: str, grade_id: str) -> str:
    """The hidden-test block of test cell ``grade_id`` in the assignment's source notebook (solutions/)."""
    nb = nbformat.read(ROOT / release.SOURCE_DIR / assignment / f"{assignment}.ipynb", as_version=4)
    [source] = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    return source.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]


def run_hidden_tests(assignment: str, grade_id: str, answer: str) -> None:
    """Define ``answer`` (source code) beside torch and math, then run the hidden tests of ``grade_id`` on it, in
    this process and without the visible check the graded notebook runs first: a wrong answer must fail them alone."""
    namespace = {"torch": torch, "math": math}
    exec(compile(answer, "answer", "exec"), namespace)
    exec(compile(hidden_tests(assignment, grade_id), grade_id, "exec"), namespace)
