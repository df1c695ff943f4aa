"""The scored stage: each autograded notebook's points from its worker's gradebook, what its run hit, the own-work
rule's zeros, the messages of its failed tests and its feedback page.
"""

from __future__ import annotations

import shutil

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.execution.executing import Execution
from manyheads_grader.output import gradebook, report
from manyheads_grader.records import FEEDBACK_DIR, Problem, ProblemKind, Release, Row, Run, not_graded
from manyheads_grader.review import own_work

__all__ = ["score_class"]


def _scores(execution: Execution, assignment: str) -> dict[str, dict]:
    """{student: {test id: (points, max, needs a manual score)}} from every worker's gradebook."""
    by_worker: dict[int, list[str]] = {}
    for student, worker in execution.where.items():
        by_worker.setdefault(id(worker), []).append(student)
    scores: dict[str, dict] = {}
    for worker in execution.workers:
        scores.update(gradebook.scores(worker.db, assignment, by_worker.get(id(worker), [])))
    return scores


def _score_row(row: Row, graded: nbformat.NotebookNode, got: dict, release: Release) -> None:
    row.tests = {g: got.get(g, (None,))[0] for g in release.test_ids}
    pending = [g for g in release.test_ids if got.get(g, (None, 0, True))[2]]
    if pending:
        row.problems.append(
            Problem(ProblemKind.MANUAL, f"needs a manual look: no automatic score for {', '.join(pending)}")
        )
    row.problems += [Problem(ProblemKind.RUN, note) for note in notebooks.run_notes(graded)]
    own_work.apply_rule(row, graded, release.test_ids, set(release.helpers), release.notebook)
    row.failures = report.failures(graded)
    row.score = float(sum(v or 0.0 for v in row.tests.values()))
    row.max_score = float(sum(release.points.values()))
    row.status = "repaired" if row.repaired else "graded"


def _copy_feedback(row: Row, worker, run: Run) -> None:
    html = worker.root / "feedback" / row.student_id / run.assignment / f"{run.assignment}.html"
    if html.is_file():
        row.feedback = run.out / FEEDBACK_DIR[run.opts.feedback] / row.student_id / f"{run.assignment}.html"
        row.feedback.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(html, row.feedback)
    else:
        row.problems.append(Problem(ProblemKind.NO_FEEDBACK, "no feedback file was produced"))


def score_class(rows: list[Row], execution: Execution, release: Release, run: Run) -> dict[str, nbformat.NotebookNode]:
    """Score every row that nbgrader graded (the others fail, saying so); returns the graded notebooks by student,
    read once, for the review."""
    scores = _scores(execution, run.assignment)
    graded_notebooks = {}
    for row in rows:
        worker = execution.where.get(row.student_id)
        if worker is None or not worker.autograded(row).is_file() or row.student_id not in scores:
            row.status = "failed"
            if row.notebook is not None and not any(p.kind is ProblemKind.NOT_GRADED for p in row.problems):
                row.problems.append(not_graded())
            continue
        graded = nbformat.read(worker.autograded(row), as_version=4)  # once: the checks only read it
        _score_row(row, graded, scores[row.student_id], release)
        graded_notebooks[row.student_id] = graded
        _copy_feedback(row, worker, run)
    return graded_notebooks
