"""Canvas: ``<name>[_LATE]_<user id>_<attachment id>_<file>`` downloads (``anon_<id>`` and no name with anonymous
grading), the gradebook CSV keyed on ``ID`` (the Canvas user id), feedback named for "Re-Upload Submissions"."""

from __future__ import annotations

import re
from pathlib import Path

from manyheads_grader.output.lms.csv_files import Table, Template, column_id, find_column, num, require_columns
from manyheads_grader.output.lms.identity import Identity
from manyheads_grader.records import RunFacts

NAME, LABEL = "canvas", "Canvas"
SHAPE = "<name>[_LATE]_<user id>_<attachment id>_<file>"
EXPORT_HOW = "In Canvas: Grades, Export, Export Entire Gradebook; pass the CSV unchanged."
DOWNLOAD = re.compile(
    r"^(?:(?P<name>[^/]+?)_)??(?:(?P<late>LATE)_)?(?P<id>\d+|anon_[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>[^/]+)$"
)


def read_name(parts: tuple[str, ...]) -> Identity | None:
    m = DOWNLOAD.match(parts[-1])
    if not m:
        return None
    anonymous = m["id"].startswith("anon_")
    return Identity(
        m["id"],
        name="" if anonymous else (m["name"] or ""),
        late=bool(m["late"]),
        upload=parts[-1][: m.start("file") - 1],
    )


def zip_hint(stem: str) -> bool:
    """Whether a download's own name (lower case, no suffix) is Canvas's: ``…_submissions``, ``submissions (2)``."""
    return bool(re.search(r"(^|[_-])submissions( \(\d+\))?$", stem))


def grades_table(scores: dict, layout, facts: RunFacts, column: str | None) -> tuple[Table, str, list[str]]:
    """The gradebook CSV Canvas imports: one assignment column, a "Points Possible" row; anonymous students left out
    (Canvas keys the CSV by user id), with a note saying so."""
    notes = []
    column = column or facts.assignment
    anonymous = sorted(s for s in scores if s.startswith("anon_"))
    if anonymous:
        notes.append(
            f"anonymous grading: Canvas's CSV is keyed by user id, so {len(anonymous)} anonymous students "
            f"({', '.join(anonymous)}) are not in it: enter their scores in SpeedGrader"
        )
    rows = [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column],
        ["Points Possible", "", "", "", "", num(facts.maximum)],
    ]
    rows += [[layout.name(s), s, "", "", "", num(scores[s].score)] for s in sorted(scores) if s not in anonymous]
    if not column_id(column):
        notes.append(
            f"the column {column!r} has no Canvas assignment id '(123456)': Canvas may create a new "
            "assignment; pass --gradebook with an export from Canvas, or --column 'Title (id)'"
        )
    return Table(rows), column, notes


def template(header: list[str], assignment: str, column: str | None, path: Path) -> Template:
    require_columns(header, ("Student", "ID"), LABEL, path, EXPORT_HOW)
    candidates = [h for h in header if re.search(r"\(\d+\)$", h)]
    return Template(find_column(header, candidates, assignment, column, str(path)), [header.index("ID")], "id")


def squash(sortable: str) -> str:
    """A gradebook's "Last, First" as Canvas writes it into download names (``sanitize_user_name``)."""
    return re.sub(r"[^\w]", "", re.sub(r"_(\d+)_", r"\1", sortable.strip()).lower())


def row_notes(row: list[str], student: str, name: str, path: Path) -> list[str]:
    """A student's gradebook row whose name is not the download's: perhaps another course's export."""
    if name and squash(row[0]) != name:
        return [
            f"ID {student} is {row[0]!r} in {path.name} but {name!r} in the download: "
            "check that both come from the same course"
        ]
    return []


def other_row_notes(row: list[str], target: int, max_score: float) -> list[str]:
    """The "Points Possible" row: a note when Canvas's points are not the assignment's (automatic and hand-graded)."""
    if not row or row[0].strip() != "Points Possible":
        return []
    try:
        possible = float(row[target])
    except (ValueError, IndexError):
        return []
    if possible == max_score:
        return []
    return [
        f"Canvas's column is worth {possible:g} points, the assignment {max_score:g}: the CSV has "
        "points, so change the assignment's points in Canvas or scale them there"
    ]


def feedback_name(ident: Identity | None, student: str, stem: str) -> str | None:
    """Canvas's "Upload submissions" reads the user id and attachment id from the first two all-digit ``_`` parts
    (``infer_comment_context_from_filename``), so the download's prefix is kept; anonymous names carry no user id."""
    if ident is None or not ident.upload or student.startswith("anon_"):
        return None
    return f"{ident.upload}_{stem}"
