"""Hand-graded points, from either source: nbgrader's formgrader on ``OUT/course`` (its gradebook) or the
instructor's ``OUT/manual-grades.csv`` (columns ``student_id,item,points,comment``; every run writes
``OUT/manual-grades.template.csv`` listing each student's hand-graded items and their maximum, and never touches the
instructor's file). Where both give a value the CSV wins, and the report lists the conflict. A CSV line with points
above the item's maximum, or for a student or item the class does not have, is an error naming the line, and
nothing of the file is applied.
"""

from __future__ import annotations

import csv
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from manyheads_grader.records import GradingError, Row

CSV_NAME = "manual-grades.csv"
TEMPLATE_NAME = "manual-grades.template.csv"
COLUMNS = ("student_id", "item", "points", "comment")


@dataclass(frozen=True)
class Given:
    points: float
    comment: str = ""
    source: str = "csv"  # or "formgrader"


def from_gradebook(course: Path, assignment: str) -> dict[tuple[str, str], Given]:
    """{(student, item): points} a person gave in the formgrader (nbgrader's manual_score) in ``course``'s sqlite
    gradebook; an absent gradebook gives none."""
    db = Path(course) / "gradebook.db"
    if not db.is_file():
        return {}
    query = (
        "SELECT sa.student_id, bc.name, g.manual_score, c.manual_comment FROM grade g "
        "JOIN base_cell bc ON g.cell_id = bc.id JOIN submitted_notebook sn ON g.notebook_id = sn.id "
        "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN assignment a ON sa.assignment_id = a.id "
        "LEFT JOIN comment c ON c.notebook_id = g.notebook_id AND c.cell_id = g.cell_id "
        "WHERE a.name = ? AND g.manual_score IS NOT NULL"
    )
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = con.execute(query, (assignment,)).fetchall()
    finally:
        con.close()
    return {(s, item): Given(float(points), comment or "", "formgrader") for s, item, points, comment in found}


def from_csv(path: Path, rows: list[Row], items: dict[str, float], tests: dict[str, float]):
    """{(student, item): Given} of the instructor's CSV (None when there is no file). Items are the hand-graded ones
    and, to override an automatic score, the test ids; :class:`GradingError` names the first bad line."""
    if not path.is_file():
        return None
    maxima = {**tests, **items}
    students = {r.student_id for r in rows}
    found: dict[tuple[str, str], Given] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or not {"student_id", "item", "points"} <= set(reader.fieldnames):
                raise GradingError(f"{path}: needs the columns {','.join(COLUMNS)} (see {TEMPLATE_NAME})")
            for line, rec in enumerate(reader, start=2):
                sid, item = (rec.get("student_id") or "").strip(), (rec.get("item") or "").strip()
                points = (rec.get("points") or "").strip()
                if not points:
                    continue  # a line of the template not graded yet
                where = f"{path}, line {line}"
                if sid not in students:
                    raise GradingError(f"{where}: no student {sid!r} in this class; nothing of the file was applied")
                if item not in maxima:
                    raise GradingError(
                        f"{where}: no item {item!r} in this assignment (items: {', '.join(maxima)}); nothing of the "
                        "file was applied"
                    )
                try:
                    value = float(points)
                except ValueError:
                    raise GradingError(f"{where}: points {points!r} is not a number; nothing was applied") from None
                if not 0 <= value <= maxima[item]:
                    raise GradingError(
                        f"{where}: {value:g} points for {item}, whose maximum is {maxima[item]:g}; nothing of the file "
                        "was applied"
                    )
                found[(sid, item)] = Given(value, (rec.get("comment") or "").strip(), "csv")
    except OSError as exc:
        raise GradingError(f"{path}: cannot read it ({exc.strerror})") from exc
    return found


def write_template(path: Path, rows: list[Row], items: dict[str, float]) -> None:
    """Every student's hand-graded items with their maximum and the points given so far: a start for the CSV."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*COLUMNS, "max_points"])
        for row in rows:
            for item, top in items.items():
                given = row.manual.get(item)
                writer.writerow([row.student_id, item, "" if given is None else f"{given:g}", "", f"{top:g}"])


def combine(gradebook: dict, csv_given: dict | None) -> tuple[dict, list[str]]:
    """The points in force ((student, item) -> Given) and the conflicts (both gave a different value: the CSV's
    wins)."""
    given = dict(gradebook)
    conflicts = []
    for key, value in (csv_given or {}).items():
        other = gradebook.get(key)
        if other is not None and other.points != value.points:
            conflicts.append(
                f"{key[0]} {key[1]}: {value.points:g} in {CSV_NAME}, {other.points:g} in the formgrader: the CSV's "
                "value is used"
            )
        given[key] = value
    return given, conflicts
