"""Gradebook CSVs as the LMSs write them: read and written back unchanged but for the filled cells, and the column
to fill found by the assignment's name."""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from manyheads_grader.output.lms.identity import LmsError


def num(value) -> str:
    """A score as a CSV cell: empty when there is none."""
    return "" if value is None else f"{value:g}"


def norm(text: str) -> str:
    """Lower case, accents and punctuation folded, so that "Zoë  Ñúñez" and "zoe nunez" meet."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.sub(r"[^0-9a-z]+", " ", text).strip()


@dataclass
class Table:
    """A CSV read as it is, to be written back the same way (encoding, delimiter, quoting, line ends)."""

    rows: list[list[str]]
    encoding: str = "utf-8"
    delimiter: str = ","
    quote_all: bool = False
    newline: str = "\r\n"

    @classmethod
    def read(cls, path: Path) -> Table:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise LmsError(f"--gradebook {path}: cannot read it ({exc})") from None
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            encoding = "utf-16"  # Blackboard's "xls" exports are UTF-16, tab separated
        elif data.startswith(b"\xef\xbb\xbf"):
            encoding = "utf-8-sig"
        else:
            encoding = "utf-8"
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            encoding, text = "cp1252", data.decode("cp1252", errors="replace")
        first = text.split("\n", 1)[0]
        delimiter = max(",\t;", key=first.count)
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
        if not rows or not any(rows[0]):
            raise LmsError(f"--gradebook {path}: empty; export the gradebook from the LMS and pass that file")
        return cls(rows, encoding, delimiter, first.startswith('"'), "\r\n" if "\r\n" in text[:10000] else "\n")

    def write(self, path: Path) -> None:
        buffer = io.StringIO(newline="")
        quoting = csv.QUOTE_ALL if self.quote_all else csv.QUOTE_MINIMAL
        csv.writer(buffer, delimiter=self.delimiter, quoting=quoting, lineterminator=self.newline).writerows(self.rows)
        Path(path).write_bytes(buffer.getvalue().encode(self.encoding))


@dataclass
class Template:
    """Where a gradebook export keeps what the filling needs: the column to fill and the columns naming the
    student."""

    target: int
    keys: list[int]
    kind: str  # "id" (Canvas ID, Moodle worksheet Identifier), "username" (Blackboard) or "name" (Moodle gradebook)

    def key(self, row: list[str]) -> str:
        if len(row) <= max(self.keys):
            return ""
        if self.kind == "name":
            return norm(" ".join(row[k] for k in self.keys))
        value = row[self.keys[0]].strip()
        if self.kind == "username":
            return value.casefold()
        found = re.search(r"(\d+)$", value)  # Moodle's worksheet says "Participant 123"
        return found.group(1) if found and not value.isdigit() else value


def find_column(header: list[str], candidates: list[str], assignment: str, column: str | None, where: str) -> int:
    """Index of the gradebook column to fill: ``--column`` (exact, or its title or id), else the one assignment
    column whose title contains the assignment's name."""
    if column:
        if column in header:
            return header.index(column)
        loose = [h for h in candidates if norm(column) in (norm(column_title(h)), norm(column_id(h)))]
        if len(loose) == 1:
            return header.index(loose[0])
        why = f"several columns fit: {', '.join(loose)}" if loose else "no column has that name"
        raise LmsError(f"--column {column!r}: {why} in {where}; columns: {', '.join(candidates) or '(none)'}")
    found = [h for h in candidates if norm(assignment) in norm(h)]
    if len(found) == 1:
        return header.index(found[0])
    listing = ", ".join(repr(h) for h in (found or candidates)) or "(none)"
    raise LmsError(
        f"cannot tell which column of {where} is {assignment}: {'several fit' if found else 'none has its name'} "
        f"(assignment columns: {listing}); name it with --column 'TITLE'"
    )


def column_title(header: str) -> str:
    """An assignment column's title without the LMS's decorations: "(123)", "[Total Pts: …] |123", "Assignment:"."""
    title = re.sub(r"\s*\[Total Pts:.*$", "", header)
    title = re.sub(r"\s*\((\d+|Real|Letter|Percentage)\)$", "", title)
    return re.sub(r"^Assignment:\s*", "", title)


def column_id(header: str) -> str:
    """The LMS's assignment id in a column's title ("(123)" or "|123"), or ""."""
    found = re.search(r"\((\d+)\)$|\|(\d+)$", header)
    return (found.group(1) or found.group(2)) if found else ""


def require_columns(header: list[str], names: tuple[str, ...], label: str, path: Path, how: str) -> None:
    """An LmsError naming the missing columns and how to export the right file, when ``header`` lacks one."""
    missing = [n for n in names if n not in header]
    if missing:
        raise LmsError(
            f"--gradebook {path} is not a {label} gradebook export: no {', '.join(missing)} column in its first "
            f"row ({', '.join(header[:8])}...). {how}"
        )
