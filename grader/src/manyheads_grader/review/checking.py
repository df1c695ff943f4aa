"""The first stages: each student's files, collected from the download (found), and the notebook to grade, checked
and repaired against the release (checked). One :class:`~manyheads_grader.records.Row` per student comes out, with
the notebook to grade or none, and what was found and repaired as its problems.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.records import Problem, ProblemKind, Row
from manyheads_grader.review import flags as review_flags
from manyheads_grader.review import repair, versions
from manyheads_grader.submissions import collect as collect_submissions

__all__ = ["check_submissions"]


def check_submissions(
    submissions: Path, release: nbformat.NotebookNode, assignment: str, pattern: str | None, lms: str = "auto"
) -> tuple[list[Row], list[str]]:
    """Collect and check every student's files: one Row each (with the notebook to grade, or failed)."""
    subs, skipped = collect_submissions(submissions, pattern, lms)
    rows = []
    for sub in subs:
        row = Row(sub.student_id, problems=[Problem(ProblemKind.COLLECTED, p) for p in sub.problems], name=sub.name)
        checked = {name: (repair.check(data, release, assignment), mtime) for name, (data, mtime) in sub.files.items()}
        pick, repairs, notes = repair.choose(checked) if checked else (None, [], [])
        row.problems += [Problem(ProblemKind.NOTE, n) for n in notes] + [
            Problem(ProblemKind.REPAIRED, r) for r in repairs
        ]
        row.repaired = bool(repairs)
        if pick is None:
            fatal = [f"{n}: {c.fatal}" for n, (c, _) in sorted(checked.items())] or ["no readable notebook"]
            row.problems = [Problem(ProblemKind.UNREADABLE, f) for f in fatal] + row.problems
        else:
            chosen = checked[pick][0]
            row.notebook = chosen.notebook
            row.submitted = review_flags.stored(sub.files[pick][0])
            row.version = versions.written_for(notebooks.read_submitted(sub.files[pick][0])[0])  # before the repairs
            prefix = f"{pick}: " if len(checked) > 1 else ""  # which of the student's files it is about
            row.problems += [Problem(ProblemKind.NOTE, prefix + p) for p in chosen.notes]
            row.problems += [Problem(ProblemKind.REPAIRED, prefix + p) for p in chosen.repairs]
            row.repaired = row.repaired or bool(chosen.repairs)
        rows.append(row)
    return rows, skipped
