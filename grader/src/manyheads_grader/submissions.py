"""Find each student's notebook(s) in a submissions folder or ``.zip``, without modifying it.

Which file is whose comes from the LMS layout (``lms``: Canvas, Moodle, Blackboard or the generic
``<student_id>/<anything>.ipynb`` / ``<student_id>__<anything>.ipynb``), detected from the names unless ``--lms``
names one, or from a ``--pattern`` regex with a ``student_id`` group (searched in the path relative to the
submissions root, with ``/`` separators). Files are read into memory; nothing is extracted, so the input is never
touched. Taught on the instructors' pages ``instructors/grading.md`` and ``instructors/lms.md``.
"""

from __future__ import annotations

import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader.output import lms as lms_mod

STUDENT_ID = lms_mod.STUDENT_ID
MAX_FILE_BYTES = 50_000_000


class CollectError(Exception):
    """The submissions cannot be read at all (misuse): the command stops with this message."""


@dataclass
class Submission:
    """One student's files: ``files`` maps a relative path to (bytes, modification time)."""

    student_id: str
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    name: str = ""  # the display name in the LMS's file names, if any (never the id)


def _notebook(rel: str) -> bool:
    return rel.endswith(".ipynb") and "__MACOSX" not in rel and ".ipynb_checkpoints" not in rel


def _entries(source: Path, read: bool = True):
    """(relative posix path, bytes or None if too large or not ``read``, mtime) for every .ipynb in a folder or
    zip."""
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                if info.is_dir() or not _notebook(info.filename):
                    continue
                data = archive.read(info) if read and info.file_size <= MAX_FILE_BYTES else None
                yield info.filename, data, float(time.mktime(info.date_time + (0, 0, -1)))
    elif source.is_dir():
        for path in sorted(source.rglob("*.ipynb")):
            rel = path.relative_to(source).as_posix()
            if not _notebook(rel) or not path.is_file():
                continue
            stat = path.stat()
            data = path.read_bytes() if read and stat.st_size <= MAX_FILE_BYTES else None
            yield rel, data, stat.st_mtime
    else:
        raise CollectError(f"{source}: not a folder or a .zip file of submissions")


def _regex(pattern: str | None) -> re.Pattern | None:
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as exc:
        raise CollectError(f"--pattern {pattern!r} is not a valid regular expression: {exc}") from None
    if regex is not None and "student_id" not in regex.groupindex:
        raise CollectError("--pattern needs a named group (?P<student_id>...)")
    return regex


def _read(source: Path, read: bool) -> list:
    source = Path(source)
    if not source.exists():
        raise CollectError(f"{source}: no such file or folder")
    try:
        return list(_entries(source, read))
    except (OSError, zipfile.BadZipFile) as exc:
        raise CollectError(f"{source}: cannot read the submissions ({exc})") from None


def _plan(source: Path, names: list[str], pattern: str | None, lms: str) -> lms_mod.Plan:
    regex = _regex(pattern)
    try:
        return lms_mod.map_files(names, lms, regex, Path(source).name)
    except lms_mod.LmsError as exc:
        raise CollectError(str(exc)) from None


def plan(source: Path, pattern: str | None = None, lms: str = "auto") -> lms_mod.Plan:
    """Whose file is whose, from the names alone (nothing is read): for the LMS export and early errors."""
    return _plan(source, [rel for rel, _, _ in _read(source, read=False)], pattern, lms)


def collect(source: Path, pattern: str | None = None, lms: str = "auto") -> tuple[list[Submission], list[str]]:
    """Every student's submission, sorted by student id, and the files that belong to no student (skipped).

    Files of a student's earlier attempts (Blackboard keeps them all) are not graded; a note on the submission
    says which attempt was."""
    entries = _read(source, read=True)
    layout = _plan(source, [rel for rel, _, _ in entries], pattern, lms)
    students: dict[str, Submission] = {}
    skipped: list[str] = []
    for rel, data, mtime in entries:
        ident = layout.files.get(rel)
        if ident is None:
            if rel in layout.unmatched:
                skipped.append(rel)
            continue
        sub = students.setdefault(ident.student_id, Submission(ident.student_id, name=layout.name(ident.student_id)))
        if data is None:
            sub.problems.append(f"{rel}: larger than {MAX_FILE_BYTES // 1_000_000} MB, not read")
            continue
        sub.files[rel] = (data, mtime)
    for student, sub in students.items():
        sub.problems += layout.notes(student)
    return [students[s] for s in sorted(students)], skipped
