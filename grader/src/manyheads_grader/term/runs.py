"""What ``grade``, ``rescore`` and ``--undo`` do around their own work, in one OUT over a term: read the class as the
last finished run left it (refusing another assignment's OUT before writing anything), start a new generation, carry
into it what that run does not make again (the other students' feedback pages, gradebook entries and nbgrader files,
the history), merge, and leave the outputs to be written and made current (``generations.make_current``).
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from manyheads_grader import store
from manyheads_grader.output import gradebook
from manyheads_grader.records import FEEDBACK_DIR, GradingError, Row, RunFacts
from manyheads_grader.review import flags as review_flags
from manyheads_grader.term import generations, merge


@dataclass
class Before:
    """The class as the last finished run left it in OUT."""

    generation: Path
    rows: list[Row]
    facts: RunFacts
    plan: object  # output.lms.Plan, or None

    @classmethod
    def read(cls, out: Path, assignment: str) -> Before | None:
        """The last finished run's class; None before the first. Another assignment's OUT, or records that cannot
        be read, stop the command (:class:`GradingError`) before anything is written."""
        generations.adopt_old_layout(out)
        now = generations.current(out)
        if now is None:
            return None
        try:
            rows, facts = store.read_class(now)
            plan = store.read_plan(now)
        except store.RecordsError as exc:
            raise GradingError(f"the class kept in {out} cannot be read: {exc}") from exc
        if facts.assignment != assignment:
            raise GradingError(
                f"{out} holds the grades of {facts.assignment}, not {assignment}: give each assignment its own --out "
                f"(nothing was written)"
            )
        return cls(now, rows, facts, plan)


def _rebase(row: Row, old: Path, new: Path) -> Row:
    """The row's feedback page copied from generation ``old`` into ``new``, and the row pointing at the copy."""
    if row.feedback is not None:
        rel = Path(row.feedback).resolve().relative_to(old)
        if (old / rel).is_file():
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(old / rel, new / rel)
        row.feedback = new / rel
    return row


def _carry_course(source: Path, dest: Path, assignment: str, students: list[str], db: str) -> None:
    """The students' gradebook entries (with sqlite) and nbgrader files, from course ``source`` into ``dest``."""
    if not students or not source.is_dir():
        return
    if db == "sqlite" and (source / "gradebook.db").is_file() and (dest / "gradebook.db").is_file():
        gradebook.remove_students(dest / "gradebook.db", assignment, students)
        gradebook.carry_students(source / "gradebook.db", dest / "gradebook.db", assignment, students)
    gradebook.carry_folders(source, dest, students)


def _carry_history(before: Before | None, gen: Path) -> Path:
    history = gen / "history"
    if before is not None and (before.generation / "history").is_dir():
        shutil.copytree(before.generation / "history", history, dirs_exist_ok=True)
    history.mkdir(parents=True, exist_ok=True)
    return history


def after_grading(before: Before | None, gen: Path, rows: list[Row], facts: RunFacts, plan, reason: str):
    """The class after a run that graded ``rows`` into ``gen``: merged with ``before`` (the other students' files
    carried into ``gen``, each replaced result recorded in ``gen/history``). Returns (rows, plan, notes)."""
    history = _carry_history(before, gen)
    if before is None:
        return rows, plan, []
    merged = merge.merge(before.rows, rows)
    for row in merged.rows:
        if row.student_id in merged.carried:
            _rebase(row, before.generation, gen)
    _carry_course(before.generation / "course", gen / "course", facts.assignment, merged.carried, facts.db)
    merge.record(history, merged.replaced, before.generation, reason, before.generation)
    notes = [
        f"this run graded {len(rows)} of the {len(merged.rows)} students; the other "
        f"{len(merged.carried) - len(merged.kept_after_failure)} keep their earlier results"
    ]
    if merged.replaced:
        notes.append(
            f"{len(merged.replaced)} earlier result(s) moved to history/ ({reason}): "
            + ", ".join(sorted(merged.replaced))
        )
    if merged.kept_after_failure:
        notes.append(f"{merge.KEPT_NOTE} for {', '.join(merged.kept_after_failure)}")
    return merged.rows, merge.merge_plans(before.plan, plan, merged.carried), notes


def compare_again(gen: Path, rows: list[Row], facts: RunFacts) -> RunFacts:
    """The identical answers of the class as it now stands, every row's and the facts' (a re-graded student's new
    answer is compared with everyone's, and nobody's flag names a student whose answer has changed since), against
    the answer key the runs kept in ``gen``; unchanged for an OUT graded before keys were kept."""
    key = store.read_answer_key(gen)
    if key is None:
        return facts
    compared = [r for r in rows if r.code]  # a row kept from before 0.9.1 has no code: it keeps its flags
    copied, groups = review_flags.in_class({r.student_id: r.code for r in compared}, key)
    for row in compared:
        row.copied = copied.get(row.student_id, [])
    return dataclasses.replace(facts, identical=[dataclasses.asdict(g) for g in groups])


def carry_all(before: Before, gen: Path) -> list[Row]:
    """For a rescore or an undo: everything of the last finished run copied into ``gen``; the rows point there."""
    shutil.copytree(before.generation, gen, dirs_exist_ok=True, symlinks=True)
    rows, _ = store.read_class(gen)
    return rows


def undo(before: Before, gen: Path, student: str, out: Path) -> tuple[list[Row], str]:
    """``gen`` (a copy of the last run, :func:`carry_all`) with ``student``'s previous result restored from history;
    their current one moves to history. Returns the rows and a note."""
    rows = carry_all(before, gen)
    found = merge.entries(gen / "history", student)
    if not found:
        raise GradingError(f"{student} has no earlier result in {out / 'history'}: nothing to undo")
    path, entry = found[-1]
    source = out / generations.GENERATIONS / entry["generation"]
    if not source.is_dir():
        raise GradingError(f"the run that holds {student}'s earlier result ({source}) is gone: cannot undo")
    current = {r.student_id: r for r in rows}
    restored = _rebase(store.row_from(entry["row"], source), source, gen)
    for view in FEEDBACK_DIR.values():
        if (gen / view / student).is_dir() and restored.feedback is None:
            shutil.rmtree(gen / view / student)
    _carry_course(source / "course", gen / "course", before.facts.assignment, [student], before.facts.db)
    if student in current:
        merge.record(gen / "history", {student: current[student]}, before.generation, "undone", gen)
    path.unlink()
    current[student] = restored
    note = f"undo: {student}'s result of before {entry['replaced_at']} ({entry['reason']}) restored"
    return [current[s] for s in sorted(current)], note
