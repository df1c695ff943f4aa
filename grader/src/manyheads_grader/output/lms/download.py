"""Whose file is whose in an LMS download: each LMS's names read by its own module, the layout detected when not
chosen, several attempts reduced to the latest."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from manyheads_grader.output.lms import blackboard, canvas, generic, moodle
from manyheads_grader.output.lms.identity import STUDENT_ID, TO_DO, Identity, LmsError, valid

FORMATS = {m.NAME: m for m in (canvas, moodle, blackboard, generic)}  # a new LMS: its module, added here
LMS_NAMES = tuple(FORMATS)
DETECTABLE = tuple(n for n in LMS_NAMES if n != "generic")  # generic is what is left when no LMS's names fit
CHOICES = ("auto", *LMS_NAMES)
LABEL = {name: module.LABEL for name, module in FORMATS.items()}
SHAPE = {name: module.SHAPE for name, module in FORMATS.items()}


def read_name(lms: str, rel: str) -> Identity | None:
    """The identity in one file's path (relative to the download, ``/`` separators) under a layout, or None."""
    if lms not in FORMATS:
        raise LmsError(f"unknown LMS layout {lms!r}: choose one of {', '.join(CHOICES)}")
    parts = PurePosixPath(rel).parts
    return FORMATS[lms].read_name(parts) if parts else None


def detect(names: list[str], source_name: str = "") -> tuple[str, str]:
    """The layout of a download (the LMS whose names most files have, else generic) and why, in words."""
    counts = {lms: sum(valid(read_name(lms, n)) for n in names) for lms in DETECTABLE}
    best = max(counts.values())
    if best == 0:
        return "generic", "no file has an LMS's download name, so the folder-per-student or <id>__<name> layout"
    top = [lms for lms, n in counts.items() if n == best]
    stem = PurePosixPath(source_name).stem.lower()
    hint = next((lms for lms in DETECTABLE if FORMATS[lms].zip_hint(stem)), None) if source_name else None
    if len(top) > 1:
        if hint not in top:
            raise LmsError(
                f"the file names fit {' and '.join(LABEL[t] for t in top)} equally well ({best} files each): "
                f"choose with --lms {'/'.join(top)}"
            )
        top = [hint]
    why = f"detected: {best} of {len(names)} notebooks have {LABEL[top[0]]}'s download names"
    return top[0], why + (f", as has the download's name {source_name}" if hint == top[0] else "")


@dataclass
class Plan:
    """Whose file is whose in one download."""

    lms: str  # the layout: how the files were read and what the CSV and feedback names are for
    how: str  # why this layout, for the report
    files: dict[str, Identity] = field(default_factory=dict)  # the files to grade
    older: dict[str, list[tuple[str, Identity]]] = field(default_factory=dict)  # earlier attempts, not graded
    unmatched: dict[str, str] = field(default_factory=dict)  # file -> why it belongs to no student
    _index: dict | None = field(default=None, repr=False)

    def students(self) -> dict[str, list[tuple[str, Identity]]]:
        """Student id -> (file, identity) of the files to grade, by id and file name (computed once)."""
        if self._index is None:
            found: dict[str, list[tuple[str, Identity]]] = {}
            for rel in sorted(self.files):
                found.setdefault(self.files[rel].student_id, []).append((rel, self.files[rel]))
            self._index = dict(sorted(found.items()))
        return self._index

    def forget_index(self) -> None:
        """After ``files`` changed: the next ``students()`` computes the index again."""
        self._index = None

    def identity(self, student: str) -> Identity | None:
        """The identity of a student's first file (all of a student's kept files share its id and attempt)."""
        files = self.students().get(student)
        return files[0][1] if files else None

    def name(self, student: str) -> str:
        return next((i.name for _, i in self.students().get(student, []) if i.name), "")

    def notes(self, student: str) -> list[str]:
        """What the report says about this student's download: late, earlier attempts not graded."""
        found = []
        kept = self.students().get(student, [])
        if any(i.late for _, i in kept):
            found.append(f"{LABEL[self.lms]} marked it late")
        if self.older.get(student):
            older = sorted({i.attempt or "no date" for _, i in self.older[student]})
            found.append(
                f"{len(older) + 1} attempts: graded the latest ({kept[0][1].attempt}), "
                f"not {', '.join(older)} ({', '.join(sorted(rel for rel, _ in self.older[student]))})"
            )
        return found


def _by_pattern(regex: re.Pattern, rel: str) -> Identity | None:
    found = regex.search(rel)
    if not found:
        return None
    name = found.groupdict().get("name") or ""
    return Identity(found.group("student_id"), name=name)


def _plan(names: list[str], lms: str, pattern: re.Pattern | None, source_name: str) -> Plan:
    """An empty plan with its layout chosen: by --pattern, detected, or by --lms."""
    if lms not in CHOICES:
        raise LmsError(f"unknown --lms {lms!r}: choose one of {', '.join(CHOICES)}")
    if pattern is not None and "student_id" not in pattern.groupindex:
        raise LmsError("--pattern needs a named group (?P<student_id>...)")
    if pattern is not None:
        chosen = "generic" if lms == "auto" else lms
        return Plan(chosen, f"--pattern {pattern.pattern!r}" + (f", {LABEL[lms]} CSV" if lms != "auto" else ""))
    if lms == "auto":
        return Plan(*detect(names, source_name))
    return Plan(lms, "chosen with --lms")


def _why_unmatched(chosen: str, rel: str) -> str:
    others = [LABEL[o] for o in DETECTABLE if o != chosen and valid(read_name(o, rel))]
    looks = f"; it looks like {others[0]}'s" if others else ""
    return f"not a {LABEL[chosen]} download name ({SHAPE[chosen]}){looks}: {TO_DO}"


def map_files(names: list[str], lms: str = "auto", pattern: re.Pattern | None = None, source_name: str = "") -> Plan:
    """Map each notebook of a download to its student. ``pattern`` (a regex with a ``student_id`` group) wins over
    the layout's names; the layout still names the CSV and feedback files."""
    result = _plan(names, lms, pattern, source_name)
    for rel in names:
        ident = read_name(result.lms, rel)
        if pattern is not None:
            found = _by_pattern(pattern, rel)
            if found is None:
                result.unmatched[rel] = f"--pattern {pattern.pattern!r} does not match it"
                continue
            # The id comes from the pattern; the LMS name, when there is one, still names the feedback upload.
            ident = replace(ident, student_id=found.student_id, name=found.name or ident.name) if ident else found
        elif ident is None:
            result.unmatched[rel] = _why_unmatched(result.lms, rel)
            continue
        if not STUDENT_ID.match(ident.student_id):
            result.unmatched[rel] = (
                f"student id {ident.student_id!r} has characters nbgrader cannot use (letters, digits, _ . - only): "
                f"{TO_DO}"
            )
            continue
        result.files[rel] = ident
    # Several attempts (Blackboard keeps them all): the latest is graded.
    for student, kept in result.students().items():
        latest = max(i.attempt for _, i in kept)
        for rel, ident in kept:
            if ident.attempt != latest:
                result.older.setdefault(student, []).append((rel, ident))
                del result.files[rel]
    result.forget_index()
    return result
