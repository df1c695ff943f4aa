"""OUT/grades.csv (one row per student) and OUT/report.md (summary, then the submissions that need a human)."""

from __future__ import annotations

import csv
from pathlib import Path

COLUMNS = ["student_id", "score", "max_score", "status", "problems"]


def _num(value) -> str:
    return "" if value is None else f"{value:g}"


def write_csv(path: Path, rows, test_ids: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS + test_ids)
        for row in sorted(rows, key=lambda r: r.student_id):
            writer.writerow(
                [row.student_id, _num(row.score), _num(row.max_score), row.status, "; ".join(row.problems)]
                + [_num(row.tests.get(g)) for g in test_ids]
            )


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def needs_human(row) -> bool:
    """Failed or repaired, a test nbgrader could not score, or anything about the own-work rule."""
    return row.status != "graded" or any(p.startswith(("needs a manual look", "own work")) for p in row.problems)


def write_report(path: Path, rows, facts: dict) -> None:
    rows = sorted(rows, key=lambda r: r.student_id)
    counts = {s: sum(r.status == s for r in rows) for s in ("graded", "repaired", "failed")}
    scored = [r.score for r in rows if r.score is not None]
    max_score = sum(facts["points"].values())
    lines = [
        f"# Grading report: {facts['assignment']}",
        "",
        f"{len(rows)} students: {counts['graded']} graded, {counts['repaired']} graded after a repair, "
        f"{counts['failed']} failed. Automatic points out of {max_score:g} "
        f"({', '.join(f'{g} {p:g}' for g, p in facts['points'].items())}); written answers are graded by hand "
        "in nbgrader's formgrader on `OUT/course` and are not in these scores.",
        "",
        f"Mean score {sum(scored) / len(scored):.2f} over {len(scored)} graded notebooks."
        if scored
        else "No notebook could be graded.",
        "",
        f"Graded with {facts['jobs']} job(s), sandbox {'on' if facts['sandbox'] else 'OFF'}, "
        f"{facts['db']} gradebook, in {facts['seconds']:.0f} s.",
        "",
        "## Needs a human",
        "",
    ]
    todo = [r for r in rows if needs_human(r)]
    if todo:
        lines += ["| student | status | score | why |", "|---|---|---|---|"]
        for r in todo:
            why = "; ".join(r.problems).replace("|", "\\|")
            lines.append(f"| {r.student_id} | {r.status} | {_num(r.score)} | {why} |")
    else:
        lines.append("Nothing: every submission was graded without a repair.")
    zeroed = [(r.student_id, test, why) for r in rows for test, why in sorted(getattr(r, "zeroed", {}).items())]
    if zeroed:
        lines += [
            "",
            "## Parts given no points by the own-work rule",
            "",
            "The answer called the course's own implementation of the part (evidence: the error its test raised).",
            "",
        ]
        lines += [f"- {student}, {test}: {why}" for student, test, why in zeroed]
    if facts.get("skipped"):
        lines += ["", "## Files that belong to no student (not graded)", ""]
        lines += [f"- `{name}`" for name in facts["skipped"]]
    notes = [r for r in rows if r.status == "graded" and r.problems and not needs_human(r)]
    if notes:
        lines += ["", "## Notes on graded submissions", ""]
        lines += [f"- {r.student_id}: {'; '.join(r.problems)}" for r in notes]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
