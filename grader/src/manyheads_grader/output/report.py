"""What ``manyheads grade`` writes for the instructor: OUT/grades.csv, OUT/report.md and OUT/report.html.

grades.csv has one row per student. The report (Markdown, and the same in a self-contained HTML page with figures)
has the summary, then per graded part its points, the score distribution and the item analysis (how many students
failed the part's test and the messages the test raised, identical ones grouped and counted, so that a common
misconception shows), then what needs a human: the submissions with the reason, the parts the own-work rule zeroed
and the integrity flags (flags.py; no points deducted). The LMS section (``lms.report_section``) comes last.
The HTML loads nothing: inline CSS, PNG figures as data URIs, no script, and a Content-Security-Policy that forbids
any request. Taught on the instructors' page ``instructors/grading.md``.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader.output import feedback, pages
from manyheads_grader.records import NEEDS_A_HUMAN, RunFacts, texts
from manyheads_grader.review import versions

COLUMNS = ["student_id", "score", "max_score", "status", "problems"]
FLAGS_TITLE = "Integrity flags (no points deducted)"
EVIDENCE_TITLE = "The cells behind the out-of-order flags"
MAX_MESSAGE = 300  # characters of a failure message kept in the report (tensor printouts can be long)
TOP_MESSAGES = 5  # messages listed per part; the rest are counted
NO_MESSAGE = "(no error message: the test gave fewer points than it is worth)"
# Okabe & Ito's colour-blind-safe palette; the bars also carry hatching, so the colours are never the only cue.
COLOURS = {"full": "#0072B2", "partial": "#E69F00", "zero": "#D55E00", "not scored": "#999999"}
HATCHES = {"full": "", "partial": "//", "zero": "xx", "not scored": ".."}


def _num(value) -> str:
    return "" if value is None else f"{value:g}"


CSV_PROBLEM = 120  # characters of each problem in grades.csv; the report has them in full


def _middle_cut(text: str, limit: int) -> str:
    """The start and the end of ``text`` (what happened, and what was done about it), the middle left out."""
    tail = limit // 3  # the start says more (whose file, what kind of problem)
    return text[: limit - tail - 1].rstrip() + "…" + text[-tail:].lstrip()


def short_problems(problems: list) -> str:
    """grades.csv's problems cell: each problem cut to :data:`CSV_PROBLEM` characters, its middle left out (a
    spreadsheet cell stays readable), and a pointer to the report when anything was cut."""
    full = texts(problems)
    cut = [p if len(p) <= CSV_PROBLEM else _middle_cut(p, CSV_PROBLEM) for p in full]
    return "; ".join(cut) + (" (in full in report.md)" if cut != full else "")


def write_csv(path: Path, rows, test_ids: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS + test_ids)
        for row in sorted(rows, key=lambda r: r.student_id):
            writer.writerow(
                [row.student_id, _num(row.score), _num(row.max_score), row.status, short_problems(row.problems)]
                + [_num(row.tests.get(g)) for g in test_ids]
            )


def read_csv(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["student_id"]: r for r in csv.DictReader(f)}


def who(row) -> str:
    """A student as the report names them: "Name (id)" when the LMS gave a name, else the id."""
    name = getattr(row, "name", "")
    return f"{name} ({row.student_id})" if name else row.student_id


def needs_human(row) -> bool:
    """Failed or repaired, a test nbgrader could not score, or anything about the own-work rule."""
    return row.status != "graded" or any(p.kind in NEEDS_A_HUMAN for p in row.problems)


def failures(nb) -> dict[str, str]:
    """{test id: the message its test raised} for each autograded test cell of a graded notebook that raised."""
    return {p.grade_id: p.message for p in feedback.parts_of(nb) if p.kind == "test" and p.message}


def _message(text: str) -> str:
    """One line, cut: identical failures group however the traceback printed them."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


# ------------------------------------------------------------------------------------------------------------------
# the figures the report is made of


@dataclass
class PartResults:
    """One graded part (an autograded test cell) over the class: the distribution and the item analysis."""

    test_id: str
    points: float
    scores: list[float] = field(default_factory=list)  # of the students it was scored for
    unscored: int = 0  # graded notebooks where nbgrader gave the part no automatic score
    zeroed: int = 0  # of the failures: no points by the own-work rule
    messages: list[tuple[str, int]] = field(default_factory=list)  # most common first

    @property
    def full(self) -> int:
        return sum(s >= self.points for s in self.scores)

    @property
    def zero(self) -> int:
        return sum(s <= 0 for s in self.scores)

    @property
    def partial(self) -> int:
        return len(self.scores) - self.full - self.zero

    @property
    def failed(self) -> int:
        return len(self.scores) - self.full

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None


def parts(rows, facts: RunFacts) -> list[PartResults]:
    """Per graded part, over the notebooks that were graded (a failed submission has no part scores)."""
    graded = [r for r in rows if r.status != "failed"]
    found = []
    for test_id, points in facts.points.items():
        part = PartResults(test_id, float(points))
        counted: Counter = Counter()
        for row in graded:
            score = row.tests.get(test_id)
            if score is None:
                part.unscored += 1
                continue
            part.scores.append(float(score))
            if score < points:
                part.zeroed += test_id in getattr(row, "zeroed", {})
                counted[_message(getattr(row, "failures", {}).get(test_id, "")) or NO_MESSAGE] += 1
        part.messages = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0] == NO_MESSAGE, kv[0]))
        found.append(part)
    return found


@dataclass
class Summary:
    students: int
    counts: dict[str, int]
    scored: list[float]
    max_score: float

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scored) if self.scored else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.scored) if self.scored else None


def _parts_text(facts: RunFacts) -> str:
    """What the maximum is made of, in words."""
    auto = f"automatic {facts.max_score:g} ({', '.join(f'{g} {p:g}' for g, p in facts.points.items())})"
    if not facts.manual:
        return auto
    hand = ", ".join(f"{g} {p:g}" for g, p in facts.manual.items())
    return (
        f"{auto}, hand-graded {sum(facts.manual.values()):g} ({hand}); a written answer counts once a person gives "
        "its points (formgrader on `OUT/course` or `OUT/manual-grades.csv`, then `manyheads rescore`)"
    )


def summary(rows, facts: RunFacts) -> Summary:
    return Summary(
        len(rows),
        {s: sum(r.status == s for r in rows) for s in ("graded", "repaired", "failed")},
        [r.score for r in rows if r.score is not None],
        facts.maximum,
    )


IDENTICAL = "identical answer: "  # starts each identical-answer flag (flags.identical_answers)


def _flags(rows, facts: RunFacts | None = None) -> list[tuple[str, str]]:
    """(student as named, flag) for each flag; identical answers once per group instead (when the facts have the
    groups), else each student's own."""
    grouped = facts is not None and facts.identical is not None
    return [
        (who(r), flag)
        for r in rows
        for flag in [*getattr(r, "flags", []), *([] if grouped else getattr(r, "copied", []))]
    ]


def _evidence(rows) -> list[tuple[str, list]]:
    """(student as named, the cells behind their out-of-order flag, whole) for each student who has such cells."""
    return [(who(r), list(r.evidence)) for r in rows if getattr(r, "evidence", None)]


def _evidence_lines(rows) -> list[str]:
    """The cells behind the out-of-order flags, whole, as Markdown: per student, each cell's source, what it
    showed as handed in and what the top-to-bottom run gives."""
    found = _evidence(rows)
    if not found:
        return []
    lines = ["", f"### {EVIDENCE_TITLE}", ""]
    for student, cells in found:
        lines += [f"#### {_md(student)}", ""]
        for cell in cells:
            lines += [f"{_md(cell.label)}, ran as [{cell.ran_as}]:", "", *_block(cell.source, "python")]
            lines += ["Handed in, it showed:", "", *_block("\n".join(cell.handed_in) or "(no output)")]
            lines += ["The top-to-bottom run gives:", "", *_block("\n".join(cell.rerun) or "(no output)")]
    return lines


def _block(text: str, language: str = "text") -> list[str]:
    """A fenced Markdown code block around text that may hold backtick fences itself."""
    fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    return [f"{fence}{language}", *text.splitlines(), fence, ""]


def _groups(rows, facts: RunFacts) -> list[str]:
    """One line per group of identical answers, with its size and the students by name and id."""
    names = {r.student_id: who(r) for r in rows}
    lines = []
    for g in facts.identical or []:
        students = ", ".join(names.get(s, s) for s in g["students"])
        n = len(g["students"])
        who_ = f"{n} student{'s' if n != 1 else ''}: {students}"
        if g["reference"]:
            lines.append(f"{IDENTICAL}answer cell {g['part']} is the published reference solution, handed in by {who_}")
        else:
            lines.append(f"{IDENTICAL}answer cell {g['part']}: the same code from {who_}")
        lines[-1] += f" (comments, docstrings and blank lines aside; it starts `{g['starts']}`)"
    return lines


def _zeroed(rows) -> list[tuple[str, str, str]]:
    return [(who(r), test, why) for r in rows for test, why in sorted(getattr(r, "zeroed", {}).items())]


# ------------------------------------------------------------------------------------------------------------------
# Markdown


def _md(text: str) -> str:
    """Text from a submission (a problem, a flag's evidence), safe in Markdown: a renderer shows it, never runs it."""
    return html.escape(str(text), quote=False).replace("\n", " ")


def _cell(text: str) -> str:
    return _md(text).replace("|", "\\|")


def _code(text: str) -> str:
    """A Markdown code span (shown literally, HTML included) around text that may hold backticks."""
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def phase_line(phases: dict) -> str:
    """Where the jobs' time went (runner's facts.phases, Worker.phase_times), in one sentence."""
    text = "The jobs' time, summed over the jobs (the preflight included): "
    text += f"nbgrader autograde {phases['nbgrader']:.1f} s"
    if phases.get("kernels"):
        text += (
            f", of which {phases['kernels']:g} forked kernel(s) lived {phases['kernel_life']:.1f} s (their set-up "
            f"before ipykernel {phases['kernel_setup']:.2f} s) and the template cleaned up after them for "
            f"{phases['cleanup']:.1f} s; the rest is nbgrader's own work"
        )
    return text + "."


def _summary_lines(rows, facts: RunFacts) -> list[str]:
    s = summary(rows, facts)
    return [
        f"# Grading report: {facts.assignment}",
        "",
        f"{s.students} students: {s.counts['graded']} graded, {s.counts['repaired']} graded after a repair, "
        f"{s.counts['failed']} failed. Points out of {s.max_score:g}: {_parts_text(facts)}.",
        "",
        f"Mean score {s.mean:.2f} over {len(s.scored)} graded notebooks; median {s.median:g}."
        if s.scored
        else "No notebook could be graded.",
        "",
        f"Graded with {facts.jobs} job(s), sandbox {'on' if facts.sandbox else 'OFF'}, "
        f"{facts.forked_kernels} kernel(s) forked from a template process"
        + (f" ({facts.not_forked})" if facts.not_forked else "")
        + ", "
        f"{facts.db} gradebook, in {facts.seconds:.0f} s.",
        "",
        *([phase_line(facts.phases), ""] if facts.phases.get("nbgrader") else []),
        *([f"Preflight: {facts.preflight}.", ""] if facts.preflight else []),
    ]


def _parts_lines(rows, facts: RunFacts) -> list[str]:
    lines = [
        "## Parts",
        "",
        "Over the graded notebooks. Failures: the students who did not get the part's full points, with the "
        "messages the part's test raised (identical messages counted together).",
        "",
        "| part | points | mean | full | partial | zero | not scored |",
        "|---|---|---|---|---|---|---|",
    ]
    found = parts(rows, facts)
    for p in found:
        mean = "" if p.mean is None else f"{p.mean:.2f}"
        lines.append(
            f"| {_cell(p.test_id)} | {p.points:g} | {mean} | {p.full} | {p.partial} | {p.zero} | {p.unscored} |"
        )
    lines += ["", "### Item analysis", ""]
    for p in found:
        own = f", {p.zeroed} of them by the own-work rule" if p.zeroed else ""
        lines.append(f"- **{p.test_id}**: failed by {p.failed} of {len(p.scores)}{own}.")
        lines += [f"  - {n} × {_code(m)}" for m, n in p.messages[:TOP_MESSAGES]]
        if len(p.messages) > TOP_MESSAGES:
            rest = sum(n for _, n in p.messages[TOP_MESSAGES:])
            lines.append(f"  - {rest} more, with {len(p.messages) - TOP_MESSAGES} other messages")
    return lines


def _human_lines(rows, facts: RunFacts) -> list[str]:
    """What needs a human: the submissions with why, the parts the own-work rule zeroed, the integrity flags."""
    lines = ["", "## Needs a human", ""]
    todo = [r for r in rows if needs_human(r)]
    if todo:
        lines += ["| student | status | score | why |", "|---|---|---|---|"]
        for r in todo:
            why = _cell("; ".join(texts(r.problems)))
            lines.append(f"| {_cell(who(r))} | {r.status} | {_num(r.score)} | {why} |")
    else:
        lines.append("Nothing: every submission was graded without a repair.")
    zeroed = _zeroed(rows)
    if zeroed:
        lines += [
            "",
            "## Parts given no points by the own-work rule",
            "",
            "The answer called the course's own implementation of the part (evidence: the error its test raised).",
            "",
        ]
        lines += [f"- {_md(student)}, {test}: {_md(why)}" for student, test, why in zeroed]
    flagged, groups = _flags(rows, facts), _groups(rows, facts)
    lines += ["", f"## {FLAGS_TITLE}", ""]
    if flagged or groups:
        lines += ["For a human to look at, each with its evidence; a flag changes no score.", ""]
        lines += [f"- {_md(student)}: {_md(flag)}" for student, flag in flagged]
        lines += [f"- {_md(line)}" for line in groups]
        lines += _evidence_lines(rows)
    else:
        lines.append("None.")
    return lines


def _closing_lines(rows, facts: RunFacts) -> list[str]:
    """The releases the class worked on, the files that belong to no student, notes on graded submissions."""
    lines: list[str] = []
    labels = {r.student_id: who(r) for r in rows}
    version_lines = versions.report_lines(facts, lambda s: _md(labels.get(s, s)))
    if version_lines:
        lines += ["", *version_lines]
    if facts.skipped:
        lines += ["", "## Files that belong to no student (not graded)", ""]
        lines += [f"- `{name}`" for name in facts.skipped]
    notes = [r for r in rows if r.status == "graded" and r.problems and not needs_human(r)]
    if notes:
        lines += ["", "## Notes on graded submissions", ""]
        lines += [f"- {_md(who(r))}: {_md('; '.join(texts(r.problems)))}" for r in notes]
    return lines


def write_report(path: Path, rows, facts: RunFacts) -> None:
    """OUT/report.md: the summary, the parts with their item analysis, what needs a human, and the rest."""
    rows = sorted(rows, key=lambda r: r.student_id)
    lines = [*_summary_lines(rows, facts), *_parts_lines(rows, facts), *_human_lines(rows, facts)]
    lines += _closing_lines(rows, facts)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------------------------------
# HTML: one file, nothing loaded from anywhere (templates/report.html.j2, filled here)


CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(drawn: tuple[object, str], caption: str) -> dict[str, str]:
    """A figure for the page's template: the PNG inline (the page loads nothing), its text alternative, caption."""
    fig, alt = drawn
    return {"png": _png(fig), "alt": alt, "caption": caption}


def _counts(values: list[float]) -> list[tuple[float, int]]:
    return sorted(Counter(values).items())


def _students(n: int) -> str:
    return f"{n} student{'s' if n != 1 else ''}"


def _histogram(values: list[float], top: float, label: str, size=(6, 2.4)) -> tuple[object, str]:
    """Bars of how many students got each score (scores are few and discrete, so one bar per value)."""
    from matplotlib.figure import Figure  # no pyplot: the caller's matplotlib state stays as it is

    counts = _counts(values)
    gaps = [b - a for (a, _), (b, _) in zip(counts, counts[1:])]
    width = min([top / 10] + [g * 0.8 for g in gaps]) if top > 0 else 0.8
    fig = Figure(figsize=size, layout="constrained")
    ax = fig.add_subplot()
    for value, n in counts:
        kind = "full" if value >= top else "zero" if value <= 0 else "partial"
        ax.bar(value, n, width=width, color=COLOURS[kind], hatch=HATCHES[kind], edgecolor="black", linewidth=0.5)
    ax.set_xticks(sorted({0.0, top, *(v for v, _ in counts)}))
    ax.set_xlim(min(0.0, counts[0][0]) - width, max(top, counts[-1][0]) + width)
    ax.set_xlabel(label)
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    alt = f"Bar chart of {label}: " + "; ".join(f"{_students(n)} scored {v:g}" for v, n in counts) + "."
    return fig, alt


def _parts_figure(found: list[PartResults]) -> tuple[object, str]:
    """One stacked bar per part: full / partial / zero / not scored, so the hard parts stand out."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 0.5 + 0.45 * len(found)), layout="constrained")
    ax = fig.add_subplot()
    names = [p.test_id for p in found][::-1]
    left = [0] * len(found)
    for kind in COLOURS:
        n = [{"full": p.full, "partial": p.partial, "zero": p.zero, "not scored": p.unscored}[kind] for p in found][
            ::-1
        ]
        if any(n):
            ax.barh(names, n, left=left, color=COLOURS[kind], hatch=HATCHES[kind], edgecolor="black", lw=0.5)
            ax.bar_label(
                ax.containers[-1],
                labels=[str(v) if v else "" for v in n],
                label_type="center",
                fontsize=9,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},  # legible over the hatching
            )
            ax.containers[-1].set_label(kind)
            left = [a + b for a, b in zip(left, n)]
    ax.set_xlabel("students")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(found) > 2 else -0.6), ncols=4, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    alt = "Stacked bars, one per part, of how many students got full, partial, zero points or no score: " + "; ".join(
        f"{p.test_id}: {p.full} full, {p.partial} partial, {p.zero} zero, {p.unscored} not scored" for p in found
    )
    return fig, alt + "."


def _summary_list(s: Summary, facts: RunFacts) -> list[tuple[str, str]]:
    return [
        (
            "Students",
            f"{s.students}: {s.counts['graded']} graded, {s.counts['repaired']} graded after a repair, "
            f"{s.counts['failed']} failed",
        ),
        ("Points", f"{s.max_score:g}: {_parts_text(facts)}"),
        ("Mean", f"{s.mean:.2f} over {len(s.scored)} graded notebooks" if s.scored else "no notebook was graded"),
        ("Median", f"{s.median:g}" if s.scored else "–"),
        ("Time", f"{facts.seconds:.0f} s"),
        ("Jobs", str(facts.jobs)),
        ("Sandbox", "on" if facts.sandbox else "OFF (trusted code only)"),
        ("Kernels forked from a template", str(facts.forked_kernels)),
        ("Gradebook", str(facts.db)),
        *([("Preflight", str(facts.preflight))] if facts.preflight else []),
    ]


def _part_figures(found: list[PartResults]) -> list[tuple[PartResults, dict | None]]:
    """Each part with the histogram of its scores (none when nobody was scored on it)."""
    out = []
    for p in found:
        figure = None
        if p.scores:
            drawn = _histogram(p.scores, p.points, f"score on {p.test_id} (out of {p.points:g})", (4.5, 1.8))
            figure = _figure(drawn, f"How many students got each score on {p.test_id}.")
        out.append((p, figure))
    return out


def html_context(rows, facts: RunFacts, extra: list[str] = ()) -> dict:
    """Everything templates/report.html.j2 shows, as plain values (the template escapes them)."""
    rows = sorted(rows, key=lambda r: r.student_id)
    s, found = summary(rows, facts), parts(rows, facts)
    labels = {r.student_id: who(r) for r in rows}
    version_lines = versions.report_lines(facts, lambda x: labels.get(x, x).replace("`", "'"))
    scored = s.scored
    return {
        "title": f"Grading report: {facts.assignment}",
        "csp": CSP,
        "summary": _summary_list(s, facts),
        "total_figure": _figure(
            _histogram(scored, s.max_score, f"total score (out of {s.max_score:g})"),
            "How many students got each total score.",
        )
        if scored
        else None,
        "parts_figure": _figure(_parts_figure(found), "Full, partial and zero points per part.")
        if found and any(p.scores or p.unscored for p in found)
        else None,
        "parts": _part_figures(found),
        "top_messages": TOP_MESSAGES,
        "needs_human": [
            {"who": who(r), "status": r.status, "score": _num(r.score), "why": "; ".join(texts(r.problems))}
            for r in rows
            if needs_human(r)
        ],
        "zeroed": _zeroed(rows),
        "flags_title": FLAGS_TITLE,
        "flagged": _flags(rows, facts),
        "groups": _groups(rows, facts),
        "evidence_title": EVIDENCE_TITLE,
        "evidence": _evidence(rows),
        "versions": "\n".join(version_lines),
        "skipped": list(facts.skipped),
        "notes": [
            (who(r), "; ".join(texts(r.problems)))
            for r in rows
            if r.status == "graded" and r.problems and not needs_human(r)
        ],
        "lms": "\n".join(extra),
    }


def markdown_html(lines: list[str]) -> str:
    """Markdown lines (``lms.report_section``, the versions section) as HTML, as the page shows them."""
    return str(pages.markdown("\n".join(lines)))


def write_html(path: Path, rows, facts: RunFacts, extra: list[str] = ()) -> None:
    """OUT/report.html: the report with figures, self-contained; ``extra``: Markdown lines to end with (LMS)."""
    page = pages.render("report.html.j2", **html_context(rows, facts, extra))
    path.write_text(page, encoding="utf-8")
