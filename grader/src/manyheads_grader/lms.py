"""The LMS round trip of ``manyheads grade``: whose file is whose in an LMS download, and grades and feedback back.

Taught on the instructors' page ``instructors/lms.md``. Three jobs, all on names and tables (nothing here runs a
notebook): read a download's file names (:func:`map_files`, used by ``collect``), fill a gradebook CSV the LMS imports
(:func:`write_grades`) and name each student's feedback so that the LMS can take it back (:func:`write_feedback`).

Download names (``tooling-notes.md`` §6.2, read in the LMSs' source, not tried on a live LMS):

* ``canvas``: ``<name>[_LATE]_<user id>_<attachment id>_<file>``; with anonymous grading ``anon_<id>`` and no name.
  The student id is the Canvas user id (or ``anon_<id>``).
* ``moodle``: a folder per student ``<Full Name>_<participant id>_assignsubmission_file[_]/<file>`` (Moodle 3.1 on;
  4.1 drops the last ``_``), or the old flat ``<Full Name>_<participant id>_assignsubmission_file_<file>``. The
  student id is the participant id (the download's, not the Moodle user id).
* ``blackboard``: ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>``; the id is the username (one
  without ``_``: others need ``--pattern``). Of several attempts the latest is graded and the report says so.
* ``generic``: ``<student id>/<any>.ipynb`` or ``<student id>__<any>.ipynb``.

A display name found in a file name is kept for the report and the CSVs; it is never used as the id.

Gradebook CSV columns (``OUT/<lms>-grades.csv``; with ``--gradebook FILE`` that export is filled in instead, every
other row, column, delimiter and encoding kept):

* canvas: ``Student, ID, SIS User ID, SIS Login ID, Section, <Assignment> (<assignment id>)``, second row
  ``Points Possible``; students are matched on ``ID`` (the Canvas user id).
* moodle: the assignment's grading worksheet, ``Identifier`` (``Participant <id>``), ``Full name``, ``Grade``,
  ``Maximum Grade``, ``Last modified (grade)``, matched on ``Identifier``; or, as template, a gradebook export
  (``First name``, ``Last name``/``Surname``, ``Email address``...), matched on the full name.
* blackboard: ``Username, <column>`` as in the Grade Center export, matched on ``Username``.
* generic: ``student_id, name, score, max_score, status`` and one column per graded part.

Feedback for upload (``OUT/lms-feedback/`` and ``OUT/lms-feedback.zip``, see :func:`feedback_name`): Canvas
``<download prefix>_<assignment>_feedback.html`` (its "Re-Upload Submissions"), Moodle the download's folder or flat
prefix (its "Upload multiple feedback files in a zip"), Blackboard named like the attempt (no bulk upload known),
generic ``<student id>/<assignment>_feedback.html``. Not verified against a live LMS: Canvas's CSV import rules,
Moodle's worksheet columns in other languages than English, everything about Blackboard (third-party parsers only).
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import time
import unicodedata
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from manyheads_grader.records import RunFacts

LMS_NAMES = ("canvas", "moodle", "blackboard", "generic")
CHOICES = ("auto", *LMS_NAMES)
LABEL = {"canvas": "Canvas", "moodle": "Moodle", "blackboard": "Blackboard", "generic": "the generic"}
SHAPE = {
    "canvas": "<name>[_LATE]_<user id>_<attachment id>_<file>",
    "moodle": "<Full Name>_<participant id>_assignsubmission_file_/<file>",
    "blackboard": "<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>",
    "generic": "<student id>/<file> or <student id>__<file>",
}
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # what nbgrader accepts as a folder name, safely
FEEDBACK_DIR = "lms-feedback"
BY_HAND_DIR = "lms-feedback-by-hand"
TO_DO = "use --lms to choose the layout, or --pattern with a (?P<student_id>...) group for other names"

_CANVAS = re.compile(
    r"^(?:(?P<name>[^/]+?)_)??(?:(?P<late>LATE)_)?(?P<id>\d+|anon_[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<file>[^/]+)$"
)
_MOODLE = re.compile(r"^(?P<name>[^_/]*)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?P<rest>_[^/]*)?$")
_BLACKBOARD = re.compile(
    r"^(?P<assignment>.+)_(?P<id>[^_/]+)_attempt_(?P<attempt>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})_(?P<file>[^/]+)$"
)
_MOODLE_BLIND = "Participant"  # the name Moodle writes with blind marking


class LmsError(Exception):
    """A layout or gradebook that cannot be used as asked: the message says what is wrong and what to do."""


@dataclass(frozen=True)
class Identity:
    """Who handed in one file, as its LMS name says."""

    student_id: str
    name: str = ""  # display name from the file name: for the report and CSVs, never the id
    late: bool = False  # Canvas's LATE flag (Canvas computes lateness; nbgrader does not see it)
    attempt: str = ""  # Blackboard's attempt stamp, YYYY-MM-DD-HH-MM-SS, so it sorts in time order
    upload: str = ""  # the part of the download name the LMS matches when the feedback goes back
    folder: bool = False  # Moodle: one folder per student (else the old flat names)


def read_name(lms: str, rel: str) -> Identity | None:
    """The identity in one file's path (relative to the download, ``/`` separators) under a layout, or None."""
    parts = PurePosixPath(rel).parts
    if not parts:
        return None
    last = parts[-1]
    if lms == "canvas":
        m = _CANVAS.match(last)
        if not m:
            return None
        anonymous = m["id"].startswith("anon_")
        return Identity(
            m["id"],
            name="" if anonymous else (m["name"] or ""),
            late=bool(m["late"]),
            upload=last[: m.start("file") - 1],
        )
    if lms == "moodle":
        for i, part in enumerate(parts):
            m = _MOODLE.match(part)
            if not m or m["plugin"] != "file":
                continue
            name = "" if m["name"] == _MOODLE_BLIND else m["name"]
            if i == len(parts) - 1:  # the old flat names: the file's own name follows the prefix
                if not m["rest"] or len(m["rest"]) < 2:
                    return None
                return Identity(m["id"], name=name, upload=part[: len(part) - len(m["rest"]) + 1])
            if m["rest"] in (None, "_"):
                return Identity(m["id"], name=name, upload=part, folder=True)
        return None
    if lms == "blackboard":
        m = _BLACKBOARD.match(last)
        if not m:
            return None
        return Identity(m["id"], attempt=m["attempt"], upload=last[: m.start("file") - 1])
    if lms == "generic":
        if len(parts) >= 2:
            return Identity(parts[0], upload=parts[0])
        if "__" in last:
            student = last.split("__", 1)[0]
            return Identity(student, upload=student)
        return None
    raise LmsError(f"unknown LMS layout {lms!r}: choose one of {', '.join(CHOICES)}")


def _zip_hint(source_name: str) -> str | None:
    """The LMS a download's own name points to: Canvas's ``…_submissions.zip``, Blackboard's ``gradebook_….zip``."""
    stem = PurePosixPath(source_name).stem.lower()
    if re.search(r"(^|[_-])submissions( \(\d+\))?$", stem):
        return "canvas"
    if stem.startswith("gradebook_"):
        return "blackboard"
    return None


def detect(names: list[str], source_name: str = "") -> tuple[str, str]:
    """The layout of a download (the LMS whose names most files have, else generic) and why, in words."""
    counts = {lms: sum(_valid(read_name(lms, n)) for n in names) for lms in ("canvas", "moodle", "blackboard")}
    best = max(counts.values())
    if best == 0:
        return "generic", "no file has an LMS's download name, so the folder-per-student or <id>__<name> layout"
    top = [lms for lms, n in counts.items() if n == best]
    hint = _zip_hint(source_name)
    if len(top) > 1:
        if hint not in top:
            raise LmsError(
                f"the file names fit {' and '.join(LABEL[t] for t in top)} equally well ({best} files each): "
                f"choose with --lms {'/'.join(top)}"
            )
        top = [hint]
    why = f"detected: {best} of {len(names)} notebooks have {LABEL[top[0]]}'s download names"
    return top[0], why + (f", as has the download's name {source_name}" if hint == top[0] else "")


def _valid(ident: Identity | None) -> bool:
    return ident is not None and bool(STUDENT_ID.match(ident.student_id))


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


def map_files(names: list[str], lms: str = "auto", pattern: re.Pattern | None = None, source_name: str = "") -> Plan:
    """Map each notebook of a download to its student. ``pattern`` (a regex with a ``student_id`` group) wins over
    the layout's names; the layout still names the CSV and feedback files."""
    if lms not in CHOICES:
        raise LmsError(f"unknown --lms {lms!r}: choose one of {', '.join(CHOICES)}")
    if pattern is not None and "student_id" not in pattern.groupindex:
        raise LmsError("--pattern needs a named group (?P<student_id>...)")
    if pattern is not None:
        chosen = "generic" if lms == "auto" else lms
        result = Plan(chosen, f"--pattern {pattern.pattern!r}" + (f", {LABEL[lms]} CSV" if lms != "auto" else ""))
    elif lms == "auto":
        chosen, how = detect(names, source_name)
        result = Plan(chosen, how)
    else:
        chosen = lms
        result = Plan(chosen, "chosen with --lms")
    for rel in names:
        ident = read_name(chosen, rel)
        if pattern is not None:
            found = _by_pattern(pattern, rel)
            if found is None:
                result.unmatched[rel] = f"--pattern {pattern.pattern!r} does not match it"
                continue
            # The id comes from the pattern; the LMS name, when there is one, still names the feedback upload.
            ident = replace(ident, student_id=found.student_id, name=found.name or ident.name) if ident else found
        elif ident is None:
            others = [LABEL[o] for o in ("canvas", "moodle", "blackboard") if o != chosen and _valid(read_name(o, rel))]
            looks = f"; it looks like {others[0]}'s" if others else ""
            result.unmatched[rel] = f"not a {LABEL[chosen]} download name ({SHAPE[chosen]}){looks}: {TO_DO}"
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
    result._index = None
    return result


# ------------------------------------------------------------------------------------------------------------------
# Grades back: a CSV each LMS imports


def _num(value) -> str:
    return "" if value is None else f"{value:g}"


def _norm(text: str) -> str:
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


def _column(header: list[str], candidates: list[str], assignment: str, column: str | None, where: str) -> int:
    """Index of the gradebook column to fill: ``--column`` (exact, or its title or id), else the one assignment
    column whose title contains the assignment's name."""
    if column:
        if column in header:
            return header.index(column)
        loose = [h for h in candidates if _norm(column) in (_norm(_title(h)), _norm(_column_id(h)))]
        if len(loose) == 1:
            return header.index(loose[0])
        why = f"several columns fit: {', '.join(loose)}" if loose else "no column has that name"
        raise LmsError(f"--column {column!r}: {why} in {where}; columns: {', '.join(candidates) or '(none)'}")
    found = [h for h in candidates if _norm(assignment) in _norm(h)]
    if len(found) == 1:
        return header.index(found[0])
    listing = ", ".join(repr(h) for h in (found or candidates)) or "(none)"
    raise LmsError(
        f"cannot tell which column of {where} is {assignment}: {'several fit' if found else 'none has its name'} "
        f"(assignment columns: {listing}); name it with --column 'TITLE'"
    )


def _title(header: str) -> str:
    """An assignment column's title without the LMS's decorations: "(123)", "[Total Pts: …] |123", "Assignment:"."""
    title = re.sub(r"\s*\[Total Pts:.*$", "", header)
    title = re.sub(r"\s*\((\d+|Real|Letter|Percentage)\)$", "", title)
    return re.sub(r"^Assignment:\s*", "", title)


def _column_id(header: str) -> str:
    found = re.search(r"\((\d+)\)$|\|(\d+)$", header)
    return (found.group(1) or found.group(2)) if found else ""


def _require(header: list[str], names: tuple[str, ...], lms: str, path: Path, how: str) -> None:
    missing = [n for n in names if n not in header]
    if missing:
        raise LmsError(
            f"--gradebook {path} is not a {LABEL[lms]} gradebook export: no {', '.join(missing)} column in its first "
            f"row ({', '.join(header[:8])}...). {how}"
        )


EXPORT_HOW = {
    "canvas": "In Canvas: Grades, Export, Export Entire Gradebook; pass the CSV unchanged.",
    "moodle": "In Moodle: the assignment's View all submissions, Grading action, Download grading worksheet "
    "(needs 'Offline grading worksheet' on in the assignment's feedback types).",
    "blackboard": "In Blackboard: Grade Center, Work Offline, Download (delimiter comma or tab).",
}


@dataclass
class Result:
    """What was written for the LMS, and what the instructor must know about it."""

    lms: str
    grades: Path | None = None
    column: str = ""
    feedback: Path | None = None
    feedback_zip: Path | None = None
    by_hand: Path | None = None
    notes: list[str] = field(default_factory=list)


def write_grades(
    rows, facts: RunFacts, layout: Plan, out: Path, gradebook: Path | None = None, column: str | None = None
):
    """``OUT/<lms>-grades.csv`` in the LMS's import format (filled into ``gradebook`` when given): a Result."""
    lms, assignment = layout.lms, facts.assignment
    max_score = facts.max_score
    scores = {r.student_id: r for r in rows}
    result = Result(lms, grades=out / f"{lms}-grades.csv")
    failed = sorted(s for s, r in scores.items() if r.score is None)
    if failed:
        result.notes.append(f"no score for {', '.join(failed)} (not graded): their cells are not filled in")
    if gradebook is not None:
        _fill(Table.read(gradebook), scores, facts, layout, result, Path(gradebook), column, max_score)
        return result
    if lms == "generic":
        table = [["student_id", "name", "score", "max_score", "status", *facts.test_ids]]
        for student in sorted(scores):
            r = scores[student]
            tests = [_num(r.tests.get(t)) for t in facts.test_ids]
            table.append([student, layout.name(student), _num(r.score), _num(r.max_score), r.status, *tests])
        Table(table, newline="\n").write(result.grades)
        return result
    result.column = column or assignment
    if lms == "canvas":
        anonymous = sorted(s for s in scores if s.startswith("anon_"))
        if anonymous:
            result.notes.append(
                f"anonymous grading: Canvas's CSV is keyed by user id, so {len(anonymous)} anonymous students "
                f"({', '.join(anonymous)}) are not in it: enter their scores in SpeedGrader"
            )
        table = [
            ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", result.column],
            ["Points Possible", "", "", "", "", _num(max_score)],
        ]
        table += [[layout.name(s), s, "", "", "", _num(scores[s].score)] for s in sorted(scores) if s not in anonymous]
        if not _column_id(result.column):
            result.notes.append(
                f"the column {result.column!r} has no Canvas assignment id '(123456)': Canvas may create a new "
                "assignment; pass --gradebook with an export from Canvas, or --column 'Title (id)'"
            )
    elif lms == "moodle":
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")  # not older than the grade in Moodle, so the import takes it
        table = [["Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)"]]
        table += [
            [f"Participant {s}", layout.name(s), _num(scores[s].score), _num(max_score), stamp] for s in sorted(scores)
        ]
        result.column = "Grade"
    else:  # blackboard
        if not column:
            result.column = f"{assignment} [Total Pts: {max_score:g} Score]"
        table = [["Username", result.column]] + [[s, _num(scores[s].score)] for s in sorted(scores)]
    Table(table).write(result.grades)
    return result


@dataclass
class Template:
    """Where a gradebook export keeps what ``_fill`` needs: the column to fill and the columns naming the student."""

    target: int
    keys: list[int]
    kind: str  # "id" (Canvas ID, Moodle worksheet Identifier), "username" (Blackboard) or "name" (Moodle gradebook)

    def key(self, row: list[str]) -> str:
        if len(row) <= max(self.keys):
            return ""
        if self.kind == "name":
            return _norm(" ".join(row[k] for k in self.keys))
        value = row[self.keys[0]].strip()
        if self.kind == "username":
            return value.casefold()
        found = re.search(r"(\d+)$", value)  # Moodle's worksheet says "Participant 123"
        return found.group(1) if found and not value.isdigit() else value


def template(header: list[str], lms: str, assignment: str, column: str | None, path: Path) -> Template:
    """Check that ``header`` is the first row of the LMS's export and find its columns; else an LmsError that says
    how to get the right file or column."""
    if lms == "generic":
        raise LmsError("--gradebook needs --lms canvas, moodle or blackboard (the generic CSV has no template)")
    if lms == "canvas":
        _require(header, ("Student", "ID"), lms, path, EXPORT_HOW[lms])
        candidates = [h for h in header if re.search(r"\(\d+\)$", h)]
        return Template(_column(header, candidates, assignment, column, str(path)), [header.index("ID")], "id")
    if lms == "blackboard":
        _require(header, ("Username",), lms, path, EXPORT_HOW[lms])
        candidates = [h for h in header if "[Total Pts:" in h or re.search(r"\|\d+$", h)]
        target = _column(header, candidates, assignment, column, str(path))
        return Template(target, [header.index("Username")], "username")
    if "Identifier" in header:  # Moodle's grading worksheet, keyed by participant id
        _require(header, ("Grade",), lms, path, EXPORT_HOW[lms])
        if column and column not in header:
            raise LmsError(f"--column {column!r}: no such column in {path} ({', '.join(header)})")
        return Template(header.index(column or "Grade"), [header.index("Identifier")], "id")
    # A Moodle gradebook export: no participant ids, so rows are matched on the full name.
    last = "Last name" if "Last name" in header else "Surname"
    _require(header, ("First name", last), lms, path, EXPORT_HOW[lms] + " Or the course gradebook's CSV export.")
    candidates = [h for h in header if h.startswith("Assignment:")]
    target = _column(header, candidates, assignment, column, str(path))
    return Template(target, [header.index("First name"), header.index(last)], "name")


def _canvas_squash(sortable: str) -> str:
    """A gradebook's "Last, First" as Canvas writes it into download names (``sanitize_user_name``)."""
    return re.sub(r"[^\w]", "", re.sub(r"_(\d+)_", r"\1", sortable.strip()).lower())


def _fill(table: Table, scores: dict, facts: RunFacts, layout: Plan, result: Result, path, column, max_score) -> None:
    """Write the scores into the template's assignment column; every other cell stays as it was."""
    header = table.rows[0]
    found = template(header, layout.lms, facts.assignment, column, path)
    target = found.target
    if found.kind == "name":
        names = {s: _norm(layout.name(s)) for s in scores}
        unnamed = sorted(s for s, n in names.items() if not n)
        if unnamed:
            result.notes.append(
                f"no name in the download for {', '.join(unnamed)} (blind marking?): a gradebook export is matched "
                "on names; use the assignment's grading worksheet as --gradebook instead"
            )
        twins = sorted({n for n in names.values() if n and list(names.values()).count(n) > 1})
        if twins:
            raise LmsError(
                f"several students of the download are named {', '.join(twins)}: a gradebook export is matched on "
                "names; use the assignment's grading worksheet as --gradebook instead"
            )
        wanted = {n: s for s, n in names.items() if n}
    else:
        wanted = {(s.casefold() if found.kind == "username" else s): s for s in scores}
    result.column = header[target]
    seen: dict[str, int] = {}
    for i, row in enumerate(table.rows[1:], start=1):
        k = found.key(row)
        if k and k in wanted:
            seen[k] = seen.get(k, 0) + 1
            if seen[k] > 1:
                raise LmsError(
                    f"--gradebook {path}: two rows match student {wanted[k]} (row {i + 1}); "
                    "a gradebook export matched on names needs unique names: use the grading worksheet"
                )
            row += [""] * (len(header) - len(row))
            student = wanted[k]
            if layout.lms == "canvas" and layout.name(student) and _canvas_squash(row[0]) != layout.name(student):
                result.notes.append(
                    f"ID {student} is {row[0]!r} in {path.name} but {layout.name(student)!r} in the download: "
                    "check that both come from the same course"
                )
            score = scores[student].score
            if score is not None:
                row[target] = _num(score)
        elif layout.lms == "canvas" and row and row[0].strip() == "Points Possible":
            try:
                possible = float(row[target])
            except (ValueError, IndexError):
                possible = None
            if possible is not None and possible != max_score:
                result.notes.append(
                    f"Canvas's column is worth {possible:g} points, the automatic parts {max_score:g}: the CSV has "
                    "points, so change the assignment's points in Canvas or scale them there"
                )
    missing = sorted(s for k, s in wanted.items() if k not in seen)
    if missing:
        result.notes.append(
            f"not in {path.name}, so not imported: {', '.join(missing)} (export the gradebook again, or enter by hand)"
        )
    table.write(result.grades)


# ------------------------------------------------------------------------------------------------------------------
# Feedback back: files named so that the LMS gives each to its student


def feedback_name(layout: Plan, student: str, assignment: str) -> str | None:
    """The relative name that the LMS's bulk upload maps to ``student``, or None when it has no such route.

    Canvas's "Upload submissions" reads the user id and attachment id from the first two all-digit ``_`` parts
    (``infer_comment_context_from_filename``), so the download's prefix is kept; anonymous names carry no user id.
    Moodle's "Upload multiple feedback files in a zip" reads ``<name>_<participant id>_<plugin>`` from each folder or
    file name (``assignfeedback_file_zip_importer``), so the download's folder (or flat prefix) is kept."""
    ident = layout.identity(student)
    stem = f"{assignment}_feedback.html"
    if layout.lms == "generic":
        return f"{student}/{stem}"
    if ident is None or not ident.upload:
        return None
    if layout.lms == "canvas":
        return None if student.startswith("anon_") else f"{ident.upload}_{stem}"
    if layout.lms == "moodle":
        return f"{ident.upload}/{stem}" if ident.folder else f"{ident.upload}{stem}"
    return f"{ident.upload}_{stem}"  # blackboard: no bulk upload known; named like the attempt, attach by hand


def write_feedback(rows, facts: RunFacts, layout: Plan, out: Path, result: Result) -> None:
    """Copy each student's feedback HTML to ``OUT/lms-feedback/<LMS name>`` and zip it for upload; files the LMS
    cannot map back go to ``OUT/lms-feedback-by-hand/<student>.html``."""
    assignment = facts.assignment
    target, by_hand = out / FEEDBACK_DIR, out / BY_HAND_DIR
    for folder in (target, by_hand):
        shutil.rmtree(folder, ignore_errors=True)
    written, manual = [], []
    for row in sorted(rows, key=lambda r: r.student_id):
        if row.feedback is None or not Path(row.feedback).is_file():
            continue
        name = feedback_name(layout, row.student_id, assignment)
        dest = target / name if name else by_hand / f"{row.student_id}.html"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(row.feedback, dest)
        (written if name else manual).append(dest)
    if written:
        result.feedback, result.feedback_zip = target, out / f"{FEEDBACK_DIR}.zip"
        with zipfile.ZipFile(result.feedback_zip, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in written:
                archive.write(path, path.relative_to(target).as_posix())
    if manual:
        result.by_hand = by_hand
        result.notes.append(
            f"{len(manual)} feedback files have no name {LABEL[layout.lms]} maps back to a student; upload them by "
            f"hand from {by_hand}"
        )


def export(
    rows,
    facts: RunFacts,
    layout: Plan,
    out: Path,
    gradebook: Path | None = None,
    column: str | None = None,
    feedback: bool = True,
) -> Result:
    """After grading: the gradebook CSV and, unless ``feedback`` is False (the instructor's full feedback, which
    shows hidden tests and must not reach students), the feedback for upload. Returns a Result for the report."""
    result = write_grades(rows, facts, layout, Path(out), gradebook, column)
    if feedback:
        write_feedback(rows, facts, layout, Path(out), result)
    else:
        result.notes.append("no feedback for upload: --feedback full shows hidden tests; grade again without it")
    return result


def report_section(layout: Plan, result: Result, out: Path) -> list[str]:
    """Markdown lines for report.md: the layout, what was written, the mapping and anything to do by hand."""

    def rel(path: Path | None) -> str:
        return f"`{path.relative_to(out).as_posix()}`" if path else "(none)"

    lines = [
        "",
        f"## LMS: {LABEL[layout.lms]}",
        "",
        f"Layout: {layout.how}.",
        f"Gradebook CSV: {rel(result.grades)}" + (f", column `{result.column}`." if result.column else "."),
        f"Feedback to upload: {rel(result.feedback_zip)}"
        + (f"; by hand: {rel(result.by_hand)}." if result.by_hand else "."),
    ]
    if result.notes or layout.unmatched:
        lines += ["", "To check:", ""]
        lines += [f"- {note}" for note in result.notes]
        lines += [f"- `{name}` was not graded: {why}" for name, why in sorted(layout.unmatched.items())]
    students = layout.students()
    if students:
        lines += ["", "| student id | name in the LMS | files | notes |", "|---|---|---|---|"]
        for student, kept in students.items():
            notes = "; ".join(layout.notes(student)).replace("|", "\\|")
            files = ", ".join(f"`{r}`" for r, _ in kept).replace("|", "\\|")
            lines.append(f"| {student} | {layout.name(student).replace('|', '/')} | {files} | {notes} |")
    return lines
