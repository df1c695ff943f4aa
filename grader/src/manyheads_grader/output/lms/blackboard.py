"""Blackboard: ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>`` downloads (the latest attempt is
graded), the Grade Center CSV keyed on ``Username``, feedback named like the attempt (no bulk upload known)."""

from __future__ import annotations

import re
from pathlib import Path

from manyheads_grader.output.lms.csv_files import Table, Template, find_column, num, require_columns
from manyheads_grader.output.lms.identity import Identity
from manyheads_grader.records import RunFacts

NAME, LABEL = "blackboard", "Blackboard"
SHAPE = "<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>"
EXPORT_HOW = "In Blackboard: Grade Center, Work Offline, Download (delimiter comma or tab)."
DOWNLOAD = re.compile(
    r"^(?P<assignment>.+)_(?P<id>[^_/]+)_attempt_(?P<attempt>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})_(?P<file>[^/]+)$"
)


def read_name(parts: tuple[str, ...]) -> Identity | None:
    m = DOWNLOAD.match(parts[-1])
    if not m:
        return None
    return Identity(m["id"], attempt=m["attempt"], upload=parts[-1][: m.start("file") - 1])


def zip_hint(stem: str) -> bool:
    """Whether a download's own name is Blackboard's ``gradebook_…``."""
    return stem.startswith("gradebook_")


def grades_table(scores: dict, layout, facts: RunFacts, column: str | None) -> tuple[Table, str, list[str]]:
    column = column or f"{facts.assignment} [Total Pts: {facts.maximum:g} Score]"
    return Table([["Username", column]] + [[s, num(scores[s].score)] for s in sorted(scores)]), column, []


def template(header: list[str], assignment: str, column: str | None, path: Path) -> Template:
    require_columns(header, ("Username",), LABEL, path, EXPORT_HOW)
    candidates = [h for h in header if "[Total Pts:" in h or re.search(r"\|\d+$", h)]
    target = find_column(header, candidates, assignment, column, str(path))
    return Template(target, [header.index("Username")], "username")


def row_notes(row: list[str], student: str, name: str, path: Path) -> list[str]:
    return []


def other_row_notes(row: list[str], target: int, max_score: float) -> list[str]:
    return []


def feedback_name(ident: Identity | None, student: str, stem: str) -> str | None:
    """No bulk upload is known: named like the attempt, for attaching by hand."""
    if ident is None or not ident.upload:
        return None
    return f"{ident.upload}_{stem}"
