"""A run's rows merged into the class as the runs before it left it, by the table of issue 37:

* a student graded in this run: the new result replaces theirs; the old one goes to ``history/`` with the time and
  the reason;
* a student this run failed for a reason of the environment (the kernel died at start-up, the cluster lost the
  task) who had a result: the previous result stays, and the report says "re-grade failed, previous grade kept";
* a student this run failed because of their notebook (invalid, hostile, over the limits): that is their new
  submission's result, which replaces the old (to history);
* a student not in this run: untouched.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader import store
from manyheads_grader.records import Problem, ProblemKind, Row, of_the_environment

KEPT_NOTE = "re-grade failed, previous grade kept"
CHANGED_NOTE = "answer changed since hand-graded"


@dataclass
class Merged:
    rows: list[Row]  # the class, by student id
    replaced: dict[str, Row] = field(default_factory=dict)  # student -> the previous row this run replaced
    carried: list[str] = field(default_factory=list)  # students whose result is the previous run's
    kept_after_failure: list[str] = field(default_factory=list)  # of those, the ones this run failed to re-grade


def merge(previous: list[Row], new: list[Row]) -> Merged:
    """The class after this run (see the module's table)."""
    rows = {r.student_id: r for r in previous}
    merged = Merged([], carried=list(rows))
    for row in new:
        sid, old = row.student_id, rows.get(row.student_id)
        environment = [p for p in row.problems if of_the_environment(p)]
        if old is not None and row.status == "failed" and environment and old.status != "failed":
            old.problems = [p for p in old.problems if not p.text.startswith(KEPT_NOTE)]
            old.problems.append(Problem(ProblemKind.NOTE, f"{KEPT_NOTE}: {environment[0].detail}"))
            merged.kept_after_failure.append(sid)
            continue
        if old is not None:
            merged.replaced[sid] = old
            merged.carried.remove(sid)
            keep_hand_graded(old, row)
        rows[sid] = row
    merged.rows = [rows[s] for s in sorted(rows)]
    return merged


def keep_hand_graded(old: Row, new: Row) -> None:
    """The points a person gave the old submission stay with the new one; an answer whose text changed since is
    flagged for a look (the points are kept until the person changes them)."""
    for item, points in old.manual.items():
        if points is None or new.manual.get(item) is not None:
            continue
        new.manual[item] = points
        if item in old.answers and old.answers.get(item) != new.answers.get(item):
            new.problems.append(
                Problem(
                    ProblemKind.MANUAL,
                    f"{CHANGED_NOTE}: {item} (the {points:g} points given are kept until you grade it again)",
                )
            )


def merge_plans(previous, new, carried: list[str]):
    """Whose file was whose for the merged class: the new run's files, and the previous plan's for the students
    whose result is carried over."""
    if previous is None:
        return new
    if new is None:
        return previous
    keep = set(carried)
    for rel, ident in previous.files.items():
        if ident.student_id in keep and rel not in new.files:
            new.files[rel] = ident
    for student, older in previous.older.items():
        if student in keep:
            new.older.setdefault(student, older)
    new.forget_index()
    return new


# ------------------------------------------------------------------------------------------------------------------
# OUT/history: one JSON file per replaced result


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:60]


def record(history: Path, replaced: dict[str, Row], generation: Path, reason: str, base: Path) -> list[Path]:
    """Write each replaced row to ``history/`` with the time, the reason and the generation that holds its files
    (their paths as they are under ``base``, a copy of that generation or itself)."""
    history.mkdir(parents=True, exist_ok=True)
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    written = []
    for sid, row in sorted(replaced.items()):
        path = history / f"{time.strftime('%Y%m%dT%H%M%S')}-{_slug(sid)}-{time.monotonic_ns() % 10**6:06d}.json"
        data = {
            "student_id": sid,
            "replaced_at": when,
            "reason": reason,
            "generation": generation.name,
            "row": store.row_data(row, base),
        }
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    return written


def entries(history: Path, student: str) -> list[tuple[Path, dict]]:
    """The student's history entries, oldest first."""
    found = []
    for path in history.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("student_id") == student:
            found.append((path, data))
    return sorted(found, key=lambda e: (e[1]["replaced_at"], e[0].name))
