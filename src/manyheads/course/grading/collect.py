"""Find each student's notebook(s) in a submissions folder or ``.zip``, without modifying it.

Accepted layouts: ``<student_id>/<anything>.ipynb``, ``<student_id>__<anything>.ipynb``, or any name matched by a
``--pattern`` regex with a ``student_id`` group (searched in the path relative to the submissions root, with ``/``
separators). Files are read into memory; nothing is extracted, so the input is never touched.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_FILE_BYTES = 50_000_000


class CollectError(Exception):
    """The submissions cannot be read at all (misuse): the command stops with this message."""


@dataclass
class Submission:
    """One student's files: ``files`` maps a relative path to (bytes, modification time)."""

    student_id: str
    files: dict[str, tuple[bytes, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _student_of(rel: str, pattern: re.Pattern | None) -> str | None:
    if pattern is not None:
        found = pattern.search(rel)
        return found.group("student_id") if found else None
    parts = PurePosixPath(rel).parts
    if len(parts) >= 2:
        return parts[0]
    if "__" in parts[0]:
        return parts[0].split("__", 1)[0]
    return None


def _entries(source: Path):
    """(relative posix path, bytes or None if too large, mtime) for every .ipynb in a folder or zip."""
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                if info.is_dir() or not info.filename.endswith(".ipynb") or "__MACOSX" in info.filename:
                    continue
                data = archive.read(info) if info.file_size <= MAX_FILE_BYTES else None
                yield info.filename, data, float(__import__("time").mktime(info.date_time + (0, 0, -1)))
    elif source.is_dir():
        for path in sorted(source.rglob("*.ipynb")):
            rel = path.relative_to(source).as_posix()
            if ".ipynb_checkpoints" in rel or not path.is_file():
                continue
            stat = path.stat()
            yield rel, (path.read_bytes() if stat.st_size <= MAX_FILE_BYTES else None), stat.st_mtime
    else:
        raise CollectError(f"{source}: not a folder or a .zip file of submissions")


def collect(source: Path, pattern: str | None = None) -> tuple[list[Submission], list[str]]:
    """Every student's submission, sorted by student id, and the files that belong to no student (skipped)."""
    source = Path(source)
    if not source.exists():
        raise CollectError(f"{source}: no such file or folder")
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as exc:
        raise CollectError(f"--pattern {pattern!r} is not a valid regular expression: {exc}") from None
    if regex is not None and "student_id" not in regex.groupindex:
        raise CollectError("--pattern needs a named group (?P<student_id>...)")
    try:
        entries = list(_entries(source))
    except (OSError, zipfile.BadZipFile) as exc:
        raise CollectError(f"{source}: cannot read the submissions ({exc})") from None
    students: dict[str, Submission] = {}
    skipped: list[str] = []
    for rel, data, mtime in entries:
        student = _student_of(rel, regex)
        if not student or not STUDENT_ID.match(student):
            skipped.append(rel)
            continue
        sub = students.setdefault(student, Submission(student))
        if data is None:
            sub.problems.append(f"{rel}: larger than {MAX_FILE_BYTES // 1_000_000} MB, not read")
            continue
        sub.files[rel] = (data, mtime)
    return [students[s] for s in sorted(students)], skipped
