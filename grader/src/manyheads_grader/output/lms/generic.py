"""The generic layout: ``<student id>/<any>.ipynb`` or ``<student id>__<any>.ipynb``; a CSV with a column per graded
part; feedback as ``<student id>/<assignment>_feedback.html``."""

from __future__ import annotations

from pathlib import Path

from manyheads_grader.output.lms.csv_files import Table, Template, num
from manyheads_grader.output.lms.identity import Identity, LmsError
from manyheads_grader.records import RunFacts

NAME, LABEL = "generic", "the generic"
SHAPE = "<student id>/<file> or <student id>__<file>"
EXPORT_HOW = ""


def read_name(parts: tuple[str, ...]) -> Identity | None:
    if len(parts) >= 2:
        return Identity(parts[0], upload=parts[0])
    if "__" in parts[-1]:
        student = parts[-1].split("__", 1)[0]
        return Identity(student, upload=student)
    return None


def zip_hint(stem: str) -> bool:
    return False


def grades_table(scores: dict, layout, facts: RunFacts, column: str | None) -> tuple[Table, str, list[str]]:
    parts = [*facts.test_ids, *facts.manual]  # the hand-graded ones too (term.totals puts them in the row)
    rows = [["student_id", "name", "score", "max_score", "status", *parts]]
    for student in sorted(scores):
        r = scores[student]
        tests = [num(r.tests.get(t)) for t in parts]
        rows.append([student, layout.name(student), num(r.score), num(r.max_score), r.status, *tests])
    return Table(rows, newline="\n"), "", []


def template(header: list[str], assignment: str, column: str | None, path: Path) -> Template:
    raise LmsError("--gradebook needs --lms canvas, moodle or blackboard (the generic CSV has no template)")


def row_notes(row: list[str], student: str, name: str, path: Path) -> list[str]:
    return []


def other_row_notes(row: list[str], target: int, max_score: float) -> list[str]:
    return []


def feedback_name(ident: Identity | None, student: str, stem: str) -> str | None:
    return f"{student}/{stem}"
