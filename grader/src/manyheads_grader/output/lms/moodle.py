"""Moodle: a folder per student ``<Full Name>_<participant id>_assignsubmission_file[_]/<file>`` (Moodle 3.1 on; 4.1
drops the last ``_``) or the old flat names; the grading worksheet keyed on ``Identifier`` or a gradebook export
matched on full names; feedback named for "Upload multiple feedback files in a zip"."""

from __future__ import annotations

import re
import time
from pathlib import Path

from manyheads_grader.output.lms.csv_files import Table, Template, find_column, num, require_columns
from manyheads_grader.output.lms.identity import Identity, LmsError
from manyheads_grader.records import RunFacts

NAME, LABEL = "moodle", "Moodle"
SHAPE = "<Full Name>_<participant id>_assignsubmission_file_/<file>"
EXPORT_HOW = (
    "In Moodle: the assignment's View all submissions, Grading action, Download grading worksheet "
    "(needs 'Offline grading worksheet' on in the assignment's feedback types)."
)
DOWNLOAD = re.compile(r"^(?P<name>[^_/]*)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?P<rest>_[^/]*)?$")
BLIND = "Participant"  # the name Moodle writes with blind marking


def read_name(parts: tuple[str, ...]) -> Identity | None:
    for i, part in enumerate(parts):
        m = DOWNLOAD.match(part)
        if not m or m["plugin"] != "file":
            continue
        name = "" if m["name"] == BLIND else m["name"]
        if i == len(parts) - 1:  # the old flat names: the file's own name follows the prefix
            if not m["rest"] or len(m["rest"]) < 2:
                return None
            return Identity(m["id"], name=name, upload=part[: len(part) - len(m["rest"]) + 1])
        if m["rest"] in (None, "_"):
            return Identity(m["id"], name=name, upload=part, folder=True)
    return None


def zip_hint(stem: str) -> bool:
    return False  # Moodle's download is named after the course and assignment, nothing to recognise


def grades_table(scores: dict, layout, facts: RunFacts, column: str | None) -> tuple[Table, str, list[str]]:
    """The assignment's grading worksheet, keyed by participant."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")  # not older than the grade in Moodle, so the import takes it
    rows = [["Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)"]]
    rows += [
        [f"Participant {s}", layout.name(s), num(scores[s].score), num(facts.max_score), stamp] for s in sorted(scores)
    ]
    return Table(rows), "Grade", []


def template(header: list[str], assignment: str, column: str | None, path: Path) -> Template:
    if "Identifier" in header:  # Moodle's grading worksheet, keyed by participant id
        require_columns(header, ("Grade",), LABEL, path, EXPORT_HOW)
        if column and column not in header:
            raise LmsError(f"--column {column!r}: no such column in {path} ({', '.join(header)})")
        return Template(header.index(column or "Grade"), [header.index("Identifier")], "id")
    # A Moodle gradebook export: no participant ids, so rows are matched on the full name.
    last = "Last name" if "Last name" in header else "Surname"
    how = EXPORT_HOW + " Or the course gradebook's CSV export."
    require_columns(header, ("First name", last), LABEL, path, how)
    candidates = [h for h in header if h.startswith("Assignment:")]
    target = find_column(header, candidates, assignment, column, str(path))
    return Template(target, [header.index("First name"), header.index(last)], "name")


def row_notes(row: list[str], student: str, name: str, path: Path) -> list[str]:
    return []


def other_row_notes(row: list[str], target: int, max_score: float) -> list[str]:
    return []


def feedback_name(ident: Identity | None, student: str, stem: str) -> str | None:
    """Moodle's "Upload multiple feedback files in a zip" reads ``<name>_<participant id>_<plugin>`` from each folder
    or file name (``assignfeedback_file_zip_importer``), so the download's folder (or flat prefix) is kept."""
    if ident is None or not ident.upload:
        return None
    return f"{ident.upload}/{stem}" if ident.folder else f"{ident.upload}{stem}"
