"""The class's result kept under OUT as JSON (``OUT/records/class.json``): what the stages decided about each student
(status, points per test, the own-work zeros, the messages of failed tests, problems with their kinds, flags) and
what the run observed (:class:`~manyheads_grader.records.RunFacts`), so that the outputs can be made again from it
without executing anything: a re-grade's merge and a rescore read it back.

The file says which record format wrote it; :func:`read_class` reads this format only and says what to do with
another, a damaged file or none.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from manyheads_grader.records import Problem, ProblemKind, Row, RunFacts, VersionFacts

__all__ = ["FORMAT", "RECORDS", "RecordsError", "write_class", "read_class"]

FORMAT = 1  # raise it when a field's meaning changes, and teach read_class the old one if it must still be read
RECORDS = Path("records") / "class.json"
_ROW_FIELDS = ("student_id", "name", "status", "score", "max_score", "tests", "zeroed", "failures", "flags")


class RecordsError(Exception):
    """The stored records cannot be read: missing, damaged, or written in another record format."""


def _row(row: Row, out: Path) -> dict:
    data = {name: getattr(row, name) for name in _ROW_FIELDS}
    data["problems"] = [{"kind": p.kind.value, "text": p.text, "detail": p.detail} for p in row.problems]
    data["repaired"], data["version"] = row.repaired, row.version
    data["feedback"] = None if row.feedback is None else str(Path(row.feedback).relative_to(out))
    return data


def write_class(out: Path, rows: list[Row], facts: RunFacts) -> Path:
    """Write the class's result to ``OUT/records/class.json`` (whole, then renamed into place)."""
    out = Path(out).resolve()
    path = out / RECORDS
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "facts": dataclasses.asdict(facts), "students": [_row(r, out) for r in rows]}
    # Not sort_keys: the order of the points and of each row's tests is the notebook's, which the outputs keep.
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    partial.replace(path)  # a run stopped while writing leaves the previous file whole
    return path


def read_class(out: Path) -> tuple[list[Row], RunFacts]:
    """The rows and the facts stored by :func:`write_class` in ``out``; :class:`RecordsError` says what is wrong."""
    path = Path(out) / RECORDS
    if not path.is_file():
        raise RecordsError(f"{path} does not exist: grade the class into {out} first (manyheads grade ... --out {out})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordsError(f"{path} cannot be read ({exc}): grade the class again into {out}") from exc
    found = data.get("format") if isinstance(data, dict) else None
    if found != FORMAT:
        raise RecordsError(
            f"{path} is in record format {found!r}; this grader reads format {FORMAT}. Use the manyheads-grader "
            f"release that wrote it, or grade the class again into {out}"
        )
    try:
        facts_data = dict(data["facts"])
        versions = facts_data.pop("versions")
        facts = RunFacts(**facts_data, versions=None if versions is None else VersionFacts(**versions))
        rows = [_read_row(student, Path(out).resolve()) for student in data["students"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordsError(
            f"{path} is damaged ({type(exc).__name__}: {exc}): grade the class again into {out}"
        ) from exc
    return rows, facts


def _read_row(data: dict, out: Path) -> Row:
    row = Row(**{name: data[name] for name in _ROW_FIELDS})
    row.problems = [Problem(ProblemKind(p["kind"]), p["text"], p["detail"]) for p in data["problems"]]
    row.repaired, row.version = data["repaired"], data["version"]
    row.feedback = None if data["feedback"] is None else out / data["feedback"]
    return row
