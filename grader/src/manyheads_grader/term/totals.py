"""The points the outputs show: the automatic ones, the hand-graded ones given so far, and the late policy's
penalty. The class kept in OUT holds the first two as graded; these totals are made from it on every run (so a
rescore after hand-grading or a changed policy needs no kernel), never stored in its place.
"""

from __future__ import annotations

import copy
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader.records import Problem, ProblemKind, Row, RunFacts
from manyheads_grader.term.late import Policy, submitted_at

PENDING = "written answers not hand-graded yet"
EARLIER = "graded under an earlier release of the assignment: grade again to apply the current tests and points"


def _num(x: float) -> str:
    return f"{x:g}"


@dataclass
class _Tally:
    """What the class's lines say: the late students, those with no known time, the written answers left."""

    late: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    ungraded: int = 0
    left_out: float = 0.0
    earlier: list[str] = field(default_factory=list)  # graded under an earlier release of the assignment


def apply(rows: list[Row], facts: RunFacts, policy: Policy, plan) -> tuple[list[Row], list[str]]:
    """Copies of ``rows`` with their totals (score = automatic + hand-graded so far - late penalty, out of the
    automatic and hand-graded maximum), the hand-graded items as columns, and a note per late student; the report's
    lines about the whole class."""
    tally = _Tally()
    shown = [_total(row, facts, policy, plan, tally) for row in rows]
    return shown, _lines(facts, policy, tally)


def _total(row: Row, facts: RunFacts, policy: Policy, plan, tally: _Tally) -> Row:
    row = copy.copy(row)
    row.tests, row.problems = dict(row.tests), list(row.problems)
    for item, points in row.manual.items():
        if item in facts.points and points is not None:
            row.tests[item] = points  # a person's score over the automatic one
    for item in facts.manual:
        row.tests[item] = row.manual.get(item)
    if row.score is None:
        return row
    if row.release and facts.release and row.release != facts.release:
        row.problems.append(Problem(ProblemKind.NOTE, EARLIER))
        tally.earlier.append(row.student_id)
    auto = sum(v or 0.0 for k, v in row.tests.items() if k in facts.points)
    given = sum(row.manual[i] for i in facts.manual if row.manual.get(i) is not None)
    pending = [i for i in facts.manual if row.manual.get(i) is None]
    if pending:  # the written columns are empty and the class's line counts them: not a problem of the row
        row.pending = pending
        tally.ungraded += 1
        tally.left_out += sum(facts.manual[i] for i in pending)
    raw, maximum = auto + given, facts.max_score + sum(facts.manual.values())
    penalty, final, why = policy.verdict(row.student_id, raw, maximum, submitted_at(policy, plan, row.student_id))
    row.score, row.max_score, row.raw, row.penalty = final, maximum, raw, penalty
    if why == "time unknown":
        tally.unknown.append(row.student_id)
    elif why:
        row.problems.append(
            Problem(ProblemKind.NOTE, f"late: {why}: {_num(raw)} - {_num(penalty)} = {_num(final)} points")
        )
        tally.late.append(row.student_id)
    return row


def _lines(facts: RunFacts, policy: Policy, tally: _Tally) -> list[str]:
    lines = []
    if tally.earlier:
        lines.append(
            f"{len(tally.earlier)} student(s) graded under an earlier release of the assignment, whose tests or points "
            f"changed since: {', '.join(tally.earlier)}. Grade the class again (a rescore runs no test) to apply "
            "the current ones"
        )
    if policy.due:
        lines.append(
            f"late policy: due {policy.due} ({policy.zone}), {_num(policy.penalty)} % of the maximum per started day "
            f"late, at most {_num(policy.cap)} %"
            + (f", 0 after {_num(policy.cutoff)} days" if policy.cutoff is not None else "")
            + f"; {len(policy.extensions)} extension(s); late: {', '.join(tally.late) or 'nobody'}"
        )
        if tally.unknown:
            lines.append(
                "time unknown (no penalty applied; give --times with an export from the LMS): "
                + ", ".join(tally.unknown)
            )
    if facts.manual:
        lines.append(
            f"{tally.ungraded} student(s) still have hand-graded answers to grade, leaving out "
            f"{_num(tally.left_out)} points in all; their totals so far count only what is graded"
            if tally.ungraded
            else "every hand-graded answer has its points"
        )
    return lines


def columns(facts: RunFacts, policy: Policy) -> list[str]:
    """The per-item columns of grades.csv: the tests, then the hand-graded items."""
    return [*facts.test_ids, *facts.manual]


_BLOCK = re.compile(r"<!-- manyheads:totals -->.*?<!-- /manyheads:totals -->\n?", re.S)


def mark_feedback(row: Row, maxima: dict[str, float]) -> None:
    """The student's feedback page says their raw points, the late penalty and the final points, and marks the
    written parts a person has graded since (``maxima``: each hand-graded item's points), replacing what an earlier
    run wrote there."""
    if row.feedback is None or not Path(row.feedback).is_file() or row.score is None:
        return
    page = Path(row.feedback)
    text = _BLOCK.sub("", page.read_text(encoding="utf-8"))
    for item, points in row.manual.items():  # the parts list says what a person has given since
        if points is not None:
            text = re.sub(
                rf'<li class="mh-(?:waiting|graded)"><code>{re.escape(item)}</code>(.*?): <b>[^<]* / ([^<]*)</b>, '
                r"(?:waiting for a grader|graded)",
                lambda m, p=points, i=item: (
                    f'<li class="mh-graded"><code>{i}</code>{m.group(1)}: <b>{p:g} / {m.group(2)}</b>, graded'
                ),
                text,
            )
            text = re.sub(  # and the table of contents on top
                rf'(<li><a href="#{re.escape(item)}">[^<]*</a>) \((?:not graded yet|Score: [^)]*)\)',
                lambda m, p=points, i=item: f"{m.group(1)} (Score: {p:g} / {_num(maxima.get(i, p))})",
                text,
            )
    heading = re.search(r"<h4>([^<(]*)\(Score:[^<]*\)</h4>", text)
    if heading:  # nbgrader's heading gave the score when the notebook was graded: now the current one
        waiting = f"; {len(row.pending)} written part(s) not graded yet" if row.pending else ""
        new = f"<h4>{heading.group(1)}(Score: {_num(row.score)} / {_num(row.max_score)}{waiting})</h4>"
        text, at = text[: heading.start()] + new + text[heading.end() :], heading.start() + len(new)
    else:
        found = re.search(r"<body[^>]*>\n?", text)
        at = found.end() if found else 0
    page.write_text(text[:at] + _totals_block(row) + text[at:], encoding="utf-8")


def _totals_block(row: Row) -> str:
    parts = [f"Points: {_num(row.raw)} of {_num(row.max_score)}"]
    if row.penalty:
        parts.append(f"late penalty: -{_num(row.penalty)}")
    parts.append(f"final: {_num(row.score)} of {_num(row.max_score)}")
    pending = [f"{PENDING}: {', '.join(row.pending)}"] if row.pending else []
    return (
        '<!-- manyheads:totals --><div class="mh-totals" role="note" style="margin:0.5em 0;padding:0.5em 0.8em;'
        'border-left:4px solid #1a73e8;background:#eef4fd"><p style="margin:0"><b>'
        + html.escape("; ".join(parts))
        + "</b> (as of the last grading or rescore: points a person gives later count once the instructor "
        "rescores)</p>"
        + "".join(f'<p style="margin:0.3em 0 0">{html.escape(p)}</p>' for p in pending)
        + "</div><!-- /manyheads:totals -->\n"
    )
