"""The points the outputs show: the automatic ones, the hand-graded ones given so far, and the late policy's
penalty. The class kept in OUT holds the first two as graded; these totals are made from it on every run (so a
rescore after hand-grading or a changed policy needs no kernel), never stored in its place.
"""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path

from manyheads_grader.records import Problem, ProblemKind, Row, RunFacts
from manyheads_grader.term.late import Policy, submitted_at

MANUAL_PREFIX = "needs a manual look"


def _num(x: float) -> str:
    return f"{x:g}"


def apply(rows: list[Row], facts: RunFacts, policy: Policy, plan) -> tuple[list[Row], list[str]]:
    """Copies of ``rows`` with their totals (score = automatic + hand-graded so far - late penalty, out of the
    automatic and hand-graded maximum), the hand-graded items as columns, and a note per late student; the report's
    lines about the whole class."""
    out, unknown, ungraded_students, left_out, late = [], [], 0, 0.0, []
    maximum = facts.max_score + sum(facts.manual.values())
    for row in rows:
        row = copy.copy(row)
        row.tests, row.problems = dict(row.tests), list(row.problems)
        for item, points in row.manual.items():
            if item in facts.points and points is not None:
                row.tests[item] = points  # a person's score over the automatic one
        for item in facts.manual:
            row.tests[item] = row.manual.get(item)
        if row.score is not None:
            auto = sum(v or 0.0 for k, v in row.tests.items() if k in facts.points)
            given = sum(row.manual[i] for i in facts.manual if row.manual.get(i) is not None)
            pending = [i for i in facts.manual if row.manual.get(i) is None]
            row.problems = [
                p for p in row.problems if not (p.kind is ProblemKind.MANUAL and p.text.startswith(MANUAL_PREFIX))
            ]
            if pending:
                row.problems.insert(
                    0, Problem(ProblemKind.MANUAL, f"{MANUAL_PREFIX}: not hand-graded yet: {', '.join(pending)}")
                )
                ungraded_students += 1
                left_out += sum(facts.manual[i] for i in pending)
            raw = auto + given
            penalty, final, why = policy.verdict(
                row.student_id, raw, maximum, submitted_at(policy, plan, row.student_id)
            )
            row.score, row.max_score = final, maximum
            row.raw, row.penalty = raw, penalty
            if why == "time unknown":
                unknown.append(row.student_id)
            elif why:
                row.problems.append(
                    Problem(ProblemKind.NOTE, f"late: {why}: {_num(raw)} - {_num(penalty)} = {_num(final)} points")
                )
                late.append(row.student_id)
        out.append(row)
    lines = []
    if policy.due:
        lines.append(
            f"late policy: due {policy.due} ({policy.zone}), {_num(policy.penalty)} % of the maximum per started day "
            f"late, at most {_num(policy.cap)} %"
            + (f", 0 after {_num(policy.cutoff)} days" if policy.cutoff is not None else "")
            + f"; {len(policy.extensions)} extension(s); late: {', '.join(late) or 'nobody'}"
        )
        if unknown:
            lines.append(
                f"time unknown (no penalty applied; give --times with an export from the LMS): {', '.join(unknown)}"
            )
    if facts.manual:
        lines.append(
            f"{ungraded_students} student(s) still have hand-graded answers to grade, leaving out "
            f"{_num(left_out)} points in all; their totals so far count only what is graded"
            if ungraded_students
            else "every hand-graded answer has its points"
        )
    return out, lines


def columns(facts: RunFacts, policy: Policy) -> list[str]:
    """The per-item columns of grades.csv: the tests, then the hand-graded items."""
    return [*facts.test_ids, *facts.manual]


_BLOCK = re.compile(r"<!-- manyheads:totals -->.*?<!-- /manyheads:totals -->\n?", re.S)


def mark_feedback(row: Row) -> None:
    """The student's feedback page says their raw points, the late penalty and the final points (replacing what an
    earlier run wrote there)."""
    if row.feedback is None or not Path(row.feedback).is_file() or row.score is None:
        return
    page = Path(row.feedback)
    text = _BLOCK.sub("", page.read_text(encoding="utf-8"))
    parts = [f"Points: {_num(row.raw)} of {_num(row.max_score)}"]
    if row.penalty:
        parts.append(f"late penalty: -{_num(row.penalty)}")
    parts.append(f"final: {_num(row.score)} of {_num(row.max_score)}")
    pending = [p.text for p in row.problems if p.kind is ProblemKind.MANUAL]
    block = (
        '<!-- manyheads:totals --><div class="mh-totals" role="note"><p><b>'
        + html.escape("; ".join(parts))
        + "</b></p>"
        + "".join(f"<p>{html.escape(p)}</p>" for p in pending)
        + "</div><!-- /manyheads:totals -->\n"
    )
    found = re.search(r"<body[^>]*>\n?", text)
    at = found.end() if found else 0
    page.write_text(text[:at] + block + text[at:], encoding="utf-8")
