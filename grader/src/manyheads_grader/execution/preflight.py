"""The preflight of ``manyheads grade``: before the first student, grade the release's own reference answers and one
blank release through exactly the sandbox, worker and kernels the class will use (issue 26, item 1).

The reference answers (the release with every answer cell holding the source's solution) must get every automatic
point, the blank release none, and both must run to the end. When they do not, the cause is the environment or the
course, not a student: grading stops before anyone is graded, with the kernel's own words (its stderr, e.g.
``ModuleNotFoundError: No module named 'torch'``, or the error the reference answers raised), what that means and
what to do. ``manyheads grade --check`` runs only this. The two notebooks are removed from the worker's gradebook
and folders afterwards, so nothing of them reaches ``OUT``; the worker's template process stays up for the class.
"""

from __future__ import annotations

import copy
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from manyheads_grader.nbgrader.command import alembic_on_path
from manyheads_grader.output import gradebook
from manyheads_grader.records import Checked, GradingError

REFERENCE, BLANK = "manyheads-preflight-reference", "manyheads-preflight-blank"
# The lines of a kernel's stderr (or a notebook's error) that name a cause, most telling first.
_CAUSES = (
    (
        re.compile(r"(ModuleNotFoundError|ImportError): .*"),
        "the grading environment lacks a Python module (or cannot import it), so every student's kernel would fail "
        "the same way",
        "install the course's requirements into the environment that runs `manyheads grade` ({python}), e.g. "
        "`make env` in the course's clone or `pip install -e .`, then run `manyheads grade --check ASSIGNMENT`",
    ),
    (
        re.compile(r"(FileNotFoundError|NotADirectoryError|PermissionError|OSError): .*|.*No such file or directory.*"),
        "a path the sandbox needs (the interpreter, the environment, the course package or the runtime folder) is "
        "missing or unreadable inside it",
        "check that the environment and the course are readable by other users or lie where the sandbox binds them "
        "(see instructors/grading.md, 'Where the course sits'), or report it with `--keep-work`'s logs",
    ),
    (
        re.compile(r"bwrap: .*|setpriv: .*|prlimit: .*|unshare: .*"),
        "the sandbox could not be set up for the kernel",
        "see instructors/grading.md ('The sandbox'); `--no-sandbox` grades without it (trusted code only)",
    ),
)
_GENERIC = (
    "the reference answers do not score as they should in the grader's sandbox",
    "run the solution notebook in this environment (`make test` does), and grade with `--keep-work` to read "
    "nbgrader's and the kernels' logs in OUT/.work",
)


class PreflightError(GradingError):
    """The reference answers or the blank release did not score as expected: nobody is graded."""


@dataclass
class PreflightResult:
    ok: bool
    seconds: float
    reference: tuple[float | None, float] = (None, 0.0)  # (score, out of)
    blank: float | None = None
    forked: int = 0  # kernels the template forked for the preflight (not counted in the report's total)
    problems: list[str] = field(default_factory=list)
    cause: str = ""
    meaning: str = ""
    todo: str = ""
    known: bool = False  # the cause is one the preflight recognises (a missing module, a path), not a guess
    retried: str = ""  # why the first try failed, when a second one was needed
    ungraded: int = 0  # how many of the problems are "could not be graded" (no graded notebook at all)

    def message(self, assignment: str) -> str:
        score, top = self.reference
        lines = [
            "preflight failed, so no student was graded: "
            + "; ".join(self.problems or ["the reference answers and the blank release did not score as expected"]),
            f"  cause: {self.cause or '(no error message: see the logs with --keep-work)'}",
            f"  what it means: {self.meaning}",
            f"  what to do: {self.todo.replace('ASSIGNMENT', assignment)}",
        ]
        return "\n".join(lines)

    def summary(self) -> str:
        score, top = self.reference
        again = f" (on a second try: first, {self.retried})" if self.retried else ""
        return (
            f"preflight passed in {self.seconds:.0f} s: the reference answers scored {score:g}/{top:g} and the blank "
            f"release {self.blank:g}/{top:g} in the sandbox the class uses{again}"
        )


def reference_answers(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release with every autograded answer cell holding the source's solution (delimiters removed), as a
    student who wrote the reference answer would hand it in."""
    solutions = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in source.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
    }
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution") and gid in solutions:
            cell.source = "\n".join(
                line
                for line in solutions[gid].splitlines()
                if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
            )
    return nb


def cause_of(texts: list[str]) -> tuple[str, str, str]:
    """(the line that names the cause, what it means, what to do) from kernel logs and error messages."""
    for pattern, meaning, todo in _CAUSES:
        for text in texts:
            found = [m.group(0).strip() for m in pattern.finditer(text)]
            if found:
                return found[-1][:300], meaning, todo
    last = next((line.strip() for text in texts for line in reversed(text.splitlines()) if line.strip()), "")
    return last[:300], *_GENERIC


def _notebook_errors(path: Path) -> list[str]:
    """``ename: evalue`` of every error a graded notebook shows, in order."""
    if not path.is_file():
        return []
    nb = nbformat.read(path, as_version=4)
    return [
        f"{o.get('ename', '')}: {o.get('evalue', '')}"
        for c in nb.cells
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def _tail(path: Path, since: int = 0, chars: int = 6000) -> str:
    if not path.is_file():
        return ""
    return path.read_text(encoding="utf-8", errors="replace")[since:][-chars:]


def _kernel_logs(worker) -> list[Path]:
    """Where the worker's kernels write their stderr: the template's log, the plain sandboxed launcher's log."""
    return [worker.root / "template.log", worker.root / "sandbox" / "kernel.log"]


def run(worker, release, source, assignment: str, points: dict[str, float], python: str) -> PreflightResult:
    """Grade the reference answers and the blank release on ``worker``; remove every trace of them after.

    When a notebook could not be graded at all (no kernel ran it) and no known cause shows in the logs, the
    preflight runs once more before it blames the environment: a kernel that did not start once on a machine busy
    with something else is not an environment problem; one that fails twice is (CI saw it under load)."""
    first = _run_once(worker, release, source, assignment, points, python)
    unexplained = first.problems and first.ungraded == len(first.problems) and not first.known
    if first.ok or not unexplained:
        return first
    second = _run_once(worker, release, source, assignment, points, python)
    second.seconds += first.seconds
    second.retried = first.problems[0]
    return second


def _run_once(worker, release, source, assignment: str, points: dict[str, float], python: str) -> PreflightResult:
    started = time.monotonic()
    logs = {p: p.stat().st_size if p.is_file() else 0 for p in _kernel_logs(worker)}
    forked_before = worker.kernels_from_template()
    log_before = len(worker.log)
    rows = [
        Checked(REFERENCE, notebook=reference_answers(release, source)),
        Checked(BLANK, notebook=copy.deepcopy(release)),
    ]
    failed = worker.autograde(rows)
    folder = worker.root / f"submitted-{worker.chunks}"
    scores = gradebook.scores(worker.db, assignment, [REFERENCE, BLANK])
    top = float(sum(points.values()))
    result = PreflightResult(ok=True, seconds=0.0, forked=worker.kernels_from_template() - forked_before)

    def total(student: str) -> float | None:
        got = scores.get(student)
        return None if got is None else float(sum(got.get(g, (None,))[0] or 0.0 for g in points))

    result.reference, result.blank = (total(REFERENCE), top), total(BLANK)
    texts: list[str] = []
    for row, want in ((rows[0], top), (rows[1], 0.0)):
        what = "the reference answers" if row is rows[0] else "the blank release"
        graded = worker.autograded(row)
        errors = _notebook_errors(graded)
        if not graded.is_file() or row.student_id not in scores:
            problem = failed.get(row.student_id)
            why = (problem.detail or problem.text) if problem else "not graded"
            result.problems.append(f"{what} could not be graded ({why})")
            result.ungraded += 1
        elif total(row.student_id) != want:
            result.problems.append(f"{what} scored {total(row.student_id):g}/{top:g}, not {want:g}")
            if row is rows[1]:  # points without an answer: the course's tests, not the environment
                texts.append(f"the blank release got points: a test passes without an answer in {assignment}")
        else:
            continue
        texts += errors
    if result.problems:
        result.ok = False
        kernel_text = [_tail(p, logs[p]) for p in _kernel_logs(worker)] + worker.log[log_before:]
        result.cause, result.meaning, result.todo = cause_of(kernel_text + texts)
        result.known = (result.meaning, result.todo) != _GENERIC
        if not result.cause and texts:
            result.cause = texts[0]
        result.todo = result.todo.replace("{python}", python)
    _forget(worker, assignment, [REFERENCE, BLANK], folder)
    result.seconds = time.monotonic() - started
    return result


def _forget(worker, assignment: str, students: list[str], folder: Path) -> None:
    """Remove the preflight's submissions from the worker's gradebook and folders (nothing reaches OUT)."""
    from nbgrader.api import Gradebook, MissingEntry

    with alembic_on_path(), Gradebook(worker.db, "manyheads") as gb:
        for student in students:
            try:
                gb.remove_submission(assignment, student)
            except MissingEntry:
                pass
            try:
                gb.remove_student(student)
            except MissingEntry:
                pass
    for student in students:
        for step in ("autograded", "feedback"):
            shutil.rmtree(worker.root / step / student, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
