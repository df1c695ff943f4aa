"""The scored stage: each autograded notebook's points from its worker's gradebook, what its run hit, the own-work
rule's zeros, the messages of its failed tests and its feedback page.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

from manyheads_grader import notebooks
from manyheads_grader.execution.executing import Execution
from manyheads_grader.output import gradebook, report
from manyheads_grader.records import (
    FEEDBACK_DIR,
    Checked,
    Executed,
    Problem,
    ProblemKind,
    Release,
    Run,
    Scored,
    not_graded,
)
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


def _score(checked: Checked, executed: Executed, got: dict, release: Release) -> Scored:
    """A graded notebook's points per test, its run notes, the own-work rule's zeros, its failed tests' messages."""
    tests = {g: got.get(g, (None,))[0] for g in release.test_ids}
    problems = []
    pending = [g for g in release.test_ids if got.get(g, (None, 0, True))[2]]
    if pending:
        problems.append(
            Problem(ProblemKind.MANUAL, f"needs a manual look: no automatic score for {', '.join(pending)}")
        )
    problems += [Problem(ProblemKind.RUN, note) for note in notebooks.run_notes(executed.cells)]
    zeroed, own_work_problems = own_work.findings(
        checked.notebook, executed.graded, release.test_ids, set(release.helpers), release.notebook
    )
    return Scored(
        checked.student_id,
        status="repaired" if checked.repaired else "graded",
        score=float(sum(v or 0.0 for v in tests.values())),
        max_score=float(sum(release.points.values())),
        tests=tests,
        zeroed=zeroed,
        failures=report.failures(executed.graded),
        problems=tuple(problems + own_work_problems),
    )


def _copy_feedback(scored: Scored, worker, run: Run) -> Scored:
    """The student's feedback page, copied to OUT (or a problem saying none was produced)."""
    html = worker.root / "feedback" / scored.student_id / run.assignment / f"{run.assignment}.html"
    if not html.is_file():
        return replace(
            scored, problems=(*scored.problems, Problem(ProblemKind.NO_FEEDBACK, "no feedback file was produced"))
        )
    target = run.out / FEEDBACK_DIR[run.opts.feedback] / scored.student_id / f"{run.assignment}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(html, target)
    return replace(scored, feedback=target)


def score_class(checked: list[Checked], execution: Execution, release: Release, run: Run) -> dict[str, Scored]:
    """Score every student that nbgrader graded; the others fail, saying so (unless the checked or executed stage
    already said why)."""
    scores = _scores(execution, run.assignment)
    scored = {}
    for student in checked:
        sid = student.student_id
        executed = execution.students.get(sid)
        if executed is None or executed.graded is None or sid not in scores:
            said = any(p.kind is ProblemKind.NOT_GRADED for p in executed.problems) if executed else False
            why = () if student.notebook is None or said else (not_graded(),)
            scored[sid] = Scored(sid, problems=why)
            continue
        scored[sid] = _copy_feedback(_score(student, executed, scores[sid], release), execution.where[sid], run)
    return scored
