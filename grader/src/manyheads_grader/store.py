"""The class's result kept under OUT as JSON (``OUT/records/class.json``): what the stages decided about each student
(status, points per test, the own-work zeros, the messages of failed tests, problems with their kinds, flags) and
what the run observed (:class:`~manyheads_grader.records.RunFacts`), so that the outputs can be made again from it
without executing anything: a re-grade's merge and a rescore read it back.

Each stage's own records are kept beside it (``OUT/records/<stage>.json`` for checked, executed, scored and
reviewed; :func:`write_stages`, :func:`read_stage`): the checked notebooks themselves (a re-grade compares every
student's answers again), each executed notebook's place in ``OUT/course`` with the cells that hit a limit, the
scores, the flags.

The file says which record format wrote it; :func:`read_class` reads this format only and says what to do with
another, a damaged file or none.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import nbformat

from manyheads_grader.records import (
    AnswerKey,
    CellEvidence,
    CellOutcome,
    Checked,
    Executed,
    Outcome,
    Problem,
    ProblemKind,
    Reviewed,
    Row,
    RunFacts,
    Scored,
    VersionFacts,
)

__all__ = [
    "FORMAT",
    "RECORDS",
    "STAGES",
    "RecordsError",
    "write_class",
    "read_class",
    "row_data",
    "row_from",
    "write_plan",
    "write_answer_key",
    "read_answer_key",
    "write_policy",
    "write_releases",
    "read_releases",
    "read_policy",
    "read_plan",
    "write_stages",
    "read_stage",
]

FORMAT = 1  # raise it when a field's meaning changes, and teach read_class the old one if it must still be read
RECORDS = Path("records") / "class.json"
_ROW_FIELDS = ("student_id", "name", "status", "score", "max_score", "tests", "zeroed", "failures", "flags")


class RecordsError(Exception):
    """The stored records cannot be read: missing, damaged, or written in another record format."""


def row_data(row: Row, out: Path) -> dict:
    """A row as stored, its feedback page relative to ``out`` (the generation that holds it)."""
    data = {name: getattr(row, name) for name in _ROW_FIELDS}
    data["problems"] = [{"kind": p.kind.value, "text": p.text, "detail": p.detail} for p in row.problems]
    data["repaired"], data["version"] = row.repaired, row.version
    data["feedback"] = None if row.feedback is None else str(Path(row.feedback).relative_to(out))
    data["manual"], data["answers"], data["release"] = row.manual, row.answers, row.release
    data["evidence"] = [_evidence(e) for e in row.evidence]
    data["copied"], data["code"] = row.copied, row.code
    return data


def _evidence(cell: CellEvidence) -> dict:
    return {**dataclasses.asdict(cell), "handed_in": list(cell.handed_in), "rerun": list(cell.rerun)}


def _read_evidence(data: list[dict]) -> list[CellEvidence]:
    return [CellEvidence(**{**d, "handed_in": tuple(d["handed_in"]), "rerun": tuple(d["rerun"])}) for d in data]


def write_class(out: Path, rows: list[Row], facts: RunFacts) -> Path:
    """Write the class's result to ``OUT/records/class.json`` (whole, then renamed into place)."""
    out = Path(out).resolve()
    path = out / RECORDS
    path.parent.mkdir(parents=True, exist_ok=True)
    _save(path, {"format": FORMAT, "facts": dataclasses.asdict(facts), "students": [row_data(r, out) for r in rows]})
    return path


def _save(path: Path, data: dict) -> None:
    """Write ``data`` as JSON, whole, then renamed into place: a run stopped while writing leaves the previous file.
    Not sort_keys: the order of the points and of each row's tests is the notebook's, which the outputs keep."""
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    partial.replace(path)


def _load(path: Path, out: Path) -> dict:
    """A records file's JSON, once it is there, readable and of this grader's record format; else RecordsError."""
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
    return data


def read_class(out: Path) -> tuple[list[Row], RunFacts]:
    """The rows and the facts stored by :func:`write_class` in ``out``; :class:`RecordsError` says what is wrong."""
    path = Path(out) / RECORDS
    data = _load(path, out)
    try:
        facts_data = dict(data["facts"])
        versions = facts_data.pop("versions")
        facts = RunFacts(**facts_data, versions=None if versions is None else VersionFacts(**versions))
        rows = [row_from(student, Path(out).resolve()) for student in data["students"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordsError(
            f"{path} is damaged ({type(exc).__name__}: {exc}): grade the class again into {out}"
        ) from exc
    return rows, facts


def row_from(data: dict, out: Path) -> Row:
    """A stored row read back, its feedback page under ``out``."""
    row = Row(**{name: data[name] for name in _ROW_FIELDS})
    row.problems = [Problem(ProblemKind(p["kind"]), p["text"], p["detail"]) for p in data["problems"]]
    row.repaired, row.version = data["repaired"], data["version"]
    row.feedback = None if data["feedback"] is None else out / data["feedback"]
    row.manual, row.answers = dict(data.get("manual", {})), dict(data.get("answers", {}))  # none before 0.9
    row.release = data.get("release", "")
    # none before 0.9.1: such a row's identical-answer flags are among its flags, and it is not compared again
    row.evidence, row.copied = _read_evidence(data.get("evidence", [])), list(data.get("copied", []))
    row.code = dict(data.get("code", {}))
    return row


def _write_kept(out: Path, name: str, value) -> None:
    """One kept value as ``OUT/records/<name>.json`` (versioned, whole, then renamed into place)."""
    folder = Path(out) / RECORDS.parent
    folder.mkdir(parents=True, exist_ok=True)
    _save(folder / f"{name}.json", {"format": FORMAT, name: value})


def _read_kept(out: Path, name: str, absent):
    """What :func:`_write_kept` stored under ``name``; ``absent`` when there is no such file."""
    path = Path(out) / RECORDS.parent / f"{name}.json"
    return _load(path, out)[name] if path.is_file() else absent


def write_policy(out: Path, policy: dict) -> None:
    """The late policy in force (``term.late``), kept for the runs after this one: ``OUT/records/policy.json``."""
    _write_kept(out, "policy", policy)


def read_policy(out: Path) -> dict | None:
    return _read_kept(out, "policy", None)


def write_releases(out: Path, manifests: list[list]) -> None:
    """Every release of the assignment graded into this OUT (``notebooks.release_manifest``, oldest first):
    ``OUT/records/releases.json``."""
    _write_kept(out, "releases", manifests)


def read_releases(out: Path) -> list[list]:
    return _read_kept(out, "releases", [])


def write_answer_key(out: Path, key) -> None:
    """The release's answer cells and the reference solution's (``records.AnswerKey``), which a re-grade's
    merge compares the class's answers against: ``OUT/records/answer-key.json``."""
    _write_kept(out, "answer-key", dataclasses.asdict(key))


def read_answer_key(out: Path):
    """The key :func:`write_answer_key` kept; None for an OUT graded before it was kept."""
    found = _read_kept(out, "answer-key", None)
    return None if found is None else AnswerKey(**found)


def write_plan(out: Path, plan) -> None:
    """Whose file was whose (the LMS download's :class:`~manyheads_grader.output.lms.Plan`), kept so that a rescore
    or a re-graded student's run can write the whole class's LMS files: ``OUT/records/plan.json``."""
    files = {rel: dataclasses.asdict(ident) for rel, ident in plan.files.items()}
    older = {s: [[rel, dataclasses.asdict(i)] for rel, i in found] for s, found in plan.older.items()}
    folder = Path(out) / RECORDS.parent
    folder.mkdir(parents=True, exist_ok=True)
    _save(folder / "plan.json", {"format": FORMAT, "lms": plan.lms, "how": plan.how, "files": files, "older": older})


def read_plan(out: Path):
    """The plan :func:`write_plan` kept (None when there is none: an OUT graded before plans were kept)."""
    from manyheads_grader.output.lms import Identity, Plan

    path = Path(out) / RECORDS.parent / "plan.json"
    if not path.is_file():
        return None
    data = _load(path, out)
    try:
        files = {rel: Identity(**ident) for rel, ident in data["files"].items()}
        older = {s: [(rel, Identity(**i)) for rel, i in found] for s, found in data["older"].items()}
        return Plan(data["lms"], data["how"], files=files, older=older)
    except (KeyError, TypeError) as exc:
        raise RecordsError(
            f"{path} is damaged ({type(exc).__name__}: {exc}): grade the class again into {out}"
        ) from exc


# ------------------------------------------------------------------------------------------------------------------
# Each stage's records: OUT/records/<stage>.json

STAGES = ("checked", "executed", "scored", "reviewed")


def _problems(problems) -> list[dict]:
    return [{"kind": p.kind.value, "text": p.text, "detail": p.detail} for p in problems]


def _read_problems(data: list[dict]) -> tuple[Problem, ...]:
    return tuple(Problem(ProblemKind(p["kind"]), p["text"], p["detail"]) for p in data)


def _graded_path(out: Path, assignment: str, student: str) -> Path:
    """Where a student's executed notebook lies once the course is published (``OUT/course``)."""
    return out / "course" / "autograded" / student / assignment / f"{assignment}.ipynb"


def _write(path: Path, stage: str, students: list[dict], **more) -> None:
    _save(path, {"format": FORMAT, "stage": stage, **more, "students": students})


def write_stages(
    out: Path, assignment: str, checked: list[Checked], executed: dict[str, Executed], scored: dict, reviewed: dict
) -> None:
    """Write every stage's records to ``OUT/records/<stage>.json`` (each whole, then renamed into place)."""
    out = Path(out).resolve()
    folder = out / RECORDS.parent
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder / "checked.json", "checked", [_checked(c) for c in checked])
    _write(
        folder / "executed.json",
        "executed",
        [_executed(e, _graded_path(out, assignment, s).relative_to(out)) for s, e in executed.items()],
        assignment=assignment,
    )
    _write(folder / "scored.json", "scored", [_scored(s, out) for s in scored.values()])
    _write(
        folder / "reviewed.json",
        "reviewed",
        [
            {
                "student_id": r.student_id,
                "flags": list(r.flags),
                "evidence": [_evidence(e) for e in r.evidence],
                "copied": list(r.copied),
            }
            for r in reviewed.values()
        ],
    )


def _notebook(nb) -> dict | None:
    return None if nb is None else json.loads(nbformat.writes(nb))


def _checked(c: Checked) -> dict:
    return {
        "student_id": c.student_id,
        "name": c.name,
        "version": c.version,
        "repaired": c.repaired,
        "problems": _problems(c.problems),
        "notebook": _notebook(c.notebook),
        "submitted": _notebook(c.submitted),
    }


def _executed(e: Executed, graded: Path) -> dict:
    return {
        "student_id": e.student_id,
        "graded": None if e.graded is None else graded.as_posix(),
        "cells": [{"cell": c.cell, "kind": c.kind.value, "evidence": c.evidence} for c in e.cells],
        "problems": _problems(e.problems),
    }


def _scored(s: Scored, out: Path) -> dict:
    data = {f.name: getattr(s, f.name) for f in dataclasses.fields(Scored) if f.name not in ("problems", "feedback")}
    data["problems"] = _problems(s.problems)
    data["feedback"] = None if s.feedback is None else str(Path(s.feedback).relative_to(out))
    return data


def read_stage(out: Path, stage: str) -> list:
    """One stage's records as :func:`write_stages` stored them (executed notebooks read from ``OUT/course``);
    :class:`RecordsError` says what is wrong."""
    if stage not in STAGES:
        raise RecordsError(f"no stage {stage!r}: the stages kept are {', '.join(STAGES)}")
    out = Path(out).resolve()
    path = out / RECORDS.parent / f"{stage}.json"
    data = _load(path, out)
    if data.get("stage") != stage:
        raise RecordsError(
            f"{path} holds the records of stage {data.get('stage')!r}, not {stage!r}: grade the class again into {out}"
        )
    try:
        return [_READERS[stage](student, out) for student in data["students"]]
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise RecordsError(
            f"{path} is damaged ({type(exc).__name__}: {exc}): grade the class again into {out}"
        ) from exc


def _read_notebook(data: dict | None):
    return None if data is None else nbformat.reads(json.dumps(data), as_version=4)  # as nbformat reads a file


def _read_checked(d: dict, out: Path) -> Checked:
    return Checked(
        d["student_id"],
        name=d["name"],
        notebook=_read_notebook(d["notebook"]),
        submitted=_read_notebook(d["submitted"]),
        version=d["version"],
        repaired=d["repaired"],
        problems=_read_problems(d["problems"]),
    )


def _read_executed(d: dict, out: Path) -> Executed:
    graded = None if d["graded"] is None else nbformat.read(out / d["graded"], as_version=4)
    cells = tuple(CellOutcome(c["cell"], Outcome(c["kind"]), c["evidence"]) for c in d["cells"])
    return Executed(d["student_id"], graded, cells, _read_problems(d["problems"]))


def _read_scored(d: dict, out: Path) -> Scored:
    feedback = None if d["feedback"] is None else out / d["feedback"]
    return Scored(**{**d, "problems": _read_problems(d["problems"]), "feedback": feedback})


_READERS = {
    "checked": _read_checked,
    "executed": _read_executed,
    "scored": _read_scored,
    "reviewed": lambda d, out: Reviewed(
        d["student_id"], tuple(d["flags"]), tuple(_read_evidence(d["evidence"])), tuple(d["copied"])
    ),
}
