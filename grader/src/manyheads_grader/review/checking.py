"""The first stages: each student's files, collected from the download (found), and the notebook to grade, checked
and repaired against the release (checked). One frozen :class:`~manyheads_grader.records.Checked` per student comes
out, with the notebook to grade or none, and what was found and repaired as its problems.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.records import Checked, Problem, ProblemKind
from manyheads_grader.review import flags as review_flags
from manyheads_grader.review import repair, versions
from manyheads_grader.submissions import collect as collect_submissions

__all__ = ["check_submissions"]


def _check_one(sub, release: nbformat.NotebookNode, assignment: str, earlier: frozenset) -> Checked:
    """One student's files checked against the release: the one to grade (repaired), or none, and why."""
    problems = [Problem(ProblemKind.COLLECTED, p) for p in sub.problems]
    checked = {
        name: (repair.check(data, release, assignment, earlier), mtime) for name, (data, mtime) in sub.files.items()
    }
    pick, repairs, notes = repair.choose(checked) if checked else (None, [], [])
    problems += [Problem(ProblemKind.NOTE, n) for n in notes] + [Problem(ProblemKind.REPAIRED, r) for r in repairs]
    if pick is None:
        fatal = [f"{n}: {c.fatal}" for n, (c, _) in sorted(checked.items())] or ["no readable notebook"]
        problems = [Problem(ProblemKind.UNREADABLE, f) for f in fatal] + problems
        return Checked(sub.student_id, name=sub.name, repaired=bool(repairs), problems=tuple(problems))
    chosen = checked[pick][0]
    prefix = f"{pick}: " if len(checked) > 1 else ""  # which of the student's files it is about
    problems += [Problem(ProblemKind.NOTE, prefix + p) for p in chosen.notes]
    problems += [Problem(ProblemKind.REPAIRED, prefix + p) for p in chosen.repairs]
    return Checked(
        sub.student_id,
        name=sub.name,
        notebook=chosen.notebook,
        submitted=review_flags.stored(sub.files[pick][0]),
        version=versions.written_for(notebooks.read_submitted(sub.files[pick][0])[0]),  # before the repairs
        repaired=bool(repairs) or bool(chosen.repairs),
        problems=tuple(problems),
    )


def check_submissions(
    submissions: Path,
    release: nbformat.NotebookNode,
    assignment: str,
    pattern: str | None,
    lms: str = "auto",
    earlier: frozenset = frozenset(),
) -> tuple[list[Checked], list[str]]:
    """Collect (found) and check (checked) every student's files: one Checked each, with the notebook to grade or
    none; the files that belong to no student. ``earlier``: the cells of earlier releases graded into the same OUT
    (``repair.check``)."""
    subs, skipped = collect_submissions(submissions, pattern, lms)
    return [_check_one(sub, release, assignment, earlier) for sub in subs], skipped
