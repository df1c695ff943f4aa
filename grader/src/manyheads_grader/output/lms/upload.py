"""Grades and feedback back to the LMS: the gradebook CSV it imports (written, or filled into its own export) and
each student's feedback named so that its bulk upload gives it to that student; the report's LMS section."""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader.output.lms.csv_files import Table, Template, norm, num
from manyheads_grader.output.lms.download import FORMATS, LABEL, Plan
from manyheads_grader.output.lms.identity import LmsError
from manyheads_grader.records import RunFacts

FEEDBACK_DIR = "lms-feedback"
BY_HAND_DIR = "lms-feedback-by-hand"


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


@dataclass(frozen=True)
class Into:
    """Where the scores go in the LMS's own gradebook: its export to fill in (``--gradebook``; None: write a CSV
    of its import format) and the column (``--column``; None: the one named after the assignment)."""

    gradebook: Path | None = None
    column: str | None = None


def template(header: list[str], lms: str, assignment: str, column: str | None, path: Path) -> Template:
    """Check that ``header`` is the first row of the LMS's export and find its columns; else an LmsError that says
    how to get the right file or column."""
    return FORMATS[lms].template(header, assignment, column, path)


def write_grades(
    rows, facts: RunFacts, layout: Plan, out: Path, gradebook: Path | None = None, column: str | None = None
):
    """``OUT/<lms>-grades.csv`` in the LMS's import format (filled into ``gradebook`` when given): a Result."""
    scores = {r.student_id: r for r in rows}
    result = Result(layout.lms, grades=out / f"{layout.lms}-grades.csv")
    failed = sorted(s for s, r in scores.items() if r.score is None)
    if failed:
        result.notes.append(f"no score for {', '.join(failed)} (not graded): their cells are not filled in")
    if gradebook is not None:
        _fill(Table.read(gradebook), scores, layout, facts, Into(Path(gradebook), column), result)
        return result
    table, result.column, notes = FORMATS[layout.lms].grades_table(scores, layout, facts, column)
    result.notes += notes
    table.write(result.grades)
    return result


def _wanted(found: Template, scores: dict, layout: Plan, result: Result) -> dict[str, str]:
    """{the key a gradebook row is matched on: student id}; matched on names, the students without one or sharing
    one are said (a note, or an LmsError when two would get one row)."""
    if found.kind != "name":
        return {(s.casefold() if found.kind == "username" else s): s for s in scores}
    names = {s: norm(layout.name(s)) for s in scores}
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
    return {n: s for s, n in names.items() if n}


def _fill(table: Table, scores: dict, layout: Plan, facts: RunFacts, into: Into, result: Result) -> None:
    """Write the scores into the template's assignment column; every other cell stays as it was."""
    path, fmt = into.gradebook, FORMATS[layout.lms]
    found = template(table.rows[0], layout.lms, facts.assignment, into.column, path)
    wanted = _wanted(found, scores, layout, result)
    result.column = table.rows[0][found.target]
    seen: dict[str, int] = {}
    for i, row in enumerate(table.rows[1:], start=1):
        k = found.key(row)
        if not (k and k in wanted):
            result.notes += fmt.other_row_notes(row, found.target, facts.maximum)
            continue
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > 1:
            raise LmsError(
                f"--gradebook {path}: two rows match student {wanted[k]} (row {i + 1}); "
                "a gradebook export matched on names needs unique names: use the grading worksheet"
            )
        row += [""] * (len(table.rows[0]) - len(row))
        student = wanted[k]
        result.notes += fmt.row_notes(row, student, layout.name(student), path)
        if scores[student].score is not None:
            row[found.target] = num(scores[student].score)
    missing = sorted(s for k, s in wanted.items() if k not in seen)
    if missing:
        result.notes.append(
            f"not in {path.name}, so not imported: {', '.join(missing)} (export the gradebook again, or enter by hand)"
        )
    table.write(result.grades)


def feedback_name(layout: Plan, student: str, assignment: str) -> str | None:
    """The relative name that the LMS's bulk upload maps to ``student``, or None when it has no such route (each
    LMS's module says how its upload reads names)."""
    return FORMATS[layout.lms].feedback_name(layout.identity(student), student, f"{assignment}_feedback.html")


def write_feedback(rows, facts: RunFacts, layout: Plan, out: Path, result: Result) -> None:
    """Copy each student's feedback HTML to ``OUT/lms-feedback/<LMS name>`` and zip it for upload; files the LMS
    cannot map back go to ``OUT/lms-feedback-by-hand/<student>.html``."""
    target, by_hand = out / FEEDBACK_DIR, out / BY_HAND_DIR
    for folder in (target, by_hand):
        shutil.rmtree(folder, ignore_errors=True)
    written, manual = [], []
    for row in sorted(rows, key=lambda r: r.student_id):
        if row.feedback is None or not Path(row.feedback).is_file():
            continue
        name = feedback_name(layout, row.student_id, facts.assignment)
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


def export(rows, facts: RunFacts, layout: Plan, out: Path, into: Into | None = None, feedback: bool = True) -> Result:
    """After grading: the gradebook CSV and, unless ``feedback`` is False (the instructor's full feedback, which
    shows hidden tests and must not reach students), the feedback for upload. Returns a Result for the report."""
    into = into or Into()
    result = write_grades(rows, facts, layout, Path(out), into.gradebook, into.column)
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
