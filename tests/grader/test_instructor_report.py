"""The instructor's report of ``manyheads grade`` (report.py): OUT/report.md and the self-contained OUT/report.html.

Fast: the report writers on hand-made rows (counts, grouped failure messages, integrity flags, escaping of what a
submission controls), the HTML parsed (nothing remote, alt text, table headers, viewport) and loaded in headless
Chromium with a network log (no request leaves the page). Slow: one small class through the real command, whose
report must show the messages the hidden tests really raised, counted per part.
"""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers.browser import chromium

from manyheads_grader.output import report
from manyheads_grader.records import Problem, ProblemKind, Row, RunFacts, not_graded
from manyheads_grader.review import versions

POINTS = {"test_softmax": 2.0, "test_attention": 4.0, "test_entropy": 2.0}
SCALE = "AssertionError: the scores are not scaled by sqrt(d_k)"
OVERFLOW = "AssertionError: softmax overflows for large scores"
EVIL = "<script>alert('pwned')</script>"


def facts(**extra) -> RunFacts:
    return RunFacts("01_single_head_bottleneck", dict(POINTS), jobs=2, sandbox=True, db="sqlite", seconds=42.0, **extra)


def row(student: str, tests: dict, failures: dict | None = None, status: str = "graded", **kw) -> Row:
    r = Row(student, status=status, tests=dict(tests), failures=dict(failures or {}), **kw)
    if status != "failed":
        r.score, r.max_score = float(sum(v or 0 for v in tests.values())), sum(POINTS.values())
    return r


def a_class() -> list[Row]:
    """Eight students: three ignore the scaling (one message, written two ways), one overflows, one hands part 2 to
    the course (own-work rule), one was not scored on part 3, one half-right, one failed submission."""
    full = dict(POINTS)
    return [
        row("ada", full),
        row("bob", {**full, "test_attention": 0.0}, {"test_attention": SCALE}),
        row("cy", {**full, "test_attention": 0.0}, {"test_attention": SCALE}),
        row("dee", {**full, "test_attention": 0.0}, {"test_attention": SCALE.replace(" ", "\n  ", 2)}),
        row("eve", {**full, "test_softmax": 0.0}, {"test_softmax": OVERFLOW}),
        row(
            "fay",
            {**full, "test_attention": 0.0},
            {"test_attention": "OwnWorkError: own work"},
            zeroed={"test_attention": "OwnWorkError: own work"},
            problems=[Problem(ProblemKind.OWN_WORK, "own work: test_attention got no points: OwnWorkError: own work")],
        ),
        row(
            "gus",
            {**full, "test_entropy": None},
            problems=[Problem(ProblemKind.MANUAL, "needs a manual look: no automatic score for x")],
        ),
        row("hal", {**full, "test_softmax": 1.0}),
        row("ivy", {}, status="failed", problems=[Problem(ProblemKind.UNREADABLE, "not a notebook (unreadable JSON)")]),
    ]


def write_both(tmp_path: Path, rows, extra: list[str] = (), **kw) -> tuple[str, str]:
    report.write_report(tmp_path / "report.md", rows, facts(**kw))
    report.write_html(tmp_path / "report.html", rows, facts(**kw), list(extra))
    return (tmp_path / "report.md").read_text(encoding="utf-8"), (tmp_path / "report.html").read_text("utf-8")


# ------------------------------------------------------------------------------------------------------------------
# the numbers (fast)


def test_part_counts_cover_the_graded_notebooks_only():
    parts = {p.test_id: p for p in report.parts(a_class(), facts())}
    softmax, attention, entropy = parts["test_softmax"], parts["test_attention"], parts["test_entropy"]
    assert (softmax.full, softmax.partial, softmax.zero, softmax.failed) == (6, 1, 1, 2)
    assert (attention.full, attention.partial, attention.zero, attention.failed, attention.zeroed) == (4, 0, 4, 4, 1)
    assert (entropy.full, entropy.unscored, len(entropy.scores)) == (7, 1, 7)  # ivy failed: counted nowhere
    assert softmax.mean == pytest.approx((6 * 2 + 1) / 8)
    s = report.summary(a_class(), facts())
    assert s.counts == {"graded": 8, "repaired": 0, "failed": 1} and s.max_score == 8
    assert s.median == 5.0 and s.mean == pytest.approx(sum(s.scored) / 8)


def test_identical_messages_are_grouped_and_counted_most_common_first(tmp_path):
    attention = report.parts(a_class(), facts())[1]
    assert attention.messages == [(SCALE, 3), ("OwnWorkError: own work", 1)]  # dee's line breaks do not matter
    softmax = report.parts(a_class(), facts())[0]
    assert softmax.messages == [(OVERFLOW, 1), (report.NO_MESSAGE, 1)]  # hal lost a point without an error
    md, page = write_both(tmp_path, a_class())
    assert "- **test_attention**: failed by 4 of 8, 1 of them by the own-work rule." in md
    assert f"  - 3 × `{SCALE}`" in md
    assert re.search(r"<td class=n>3</td><td><code>" + re.escape(SCALE) + "</code></td>", page)


def test_only_the_most_common_messages_are_listed_and_the_rest_counted(tmp_path):
    rows = [
        row(f"s{i}", {**POINTS, "test_entropy": 0.0}, {"test_entropy": f"ValueError: case {i % 7}"}) for i in range(9)
    ]
    md, page = write_both(tmp_path, rows)
    shown = re.findall(r"  - (\d+) × `ValueError: case (\d)`", md)
    assert [n for n, _ in shown] == ["2", "2", "1", "1", "1"] and len(shown) == report.TOP_MESSAGES
    assert "  - 2 more, with 2 other messages" in md
    assert "2 other messages" in page


def test_a_long_message_is_cut_and_backticks_stay_inside_the_code_span(tmp_path):
    rows = [row("a", {**POINTS, "test_softmax": 0.0}, {"test_softmax": "AssertionError: `x` " + "y" * 1000})]
    md, _ = write_both(tmp_path, rows)
    line = next(line for line in md.splitlines() if "AssertionError" in line)
    assert line.startswith("  - 1 × ``AssertionError: `x` y") and line.endswith("…``")
    assert len(line) < report.MAX_MESSAGE + 20


# ------------------------------------------------------------------------------------------------------------------
# the sections (fast)


def test_the_existing_sections_are_kept(tmp_path):
    md, page = write_both(tmp_path, a_class(), skipped=["stray.ipynb"])
    assert md.startswith("# Grading report: 01_single_head_bottleneck\n")
    assert "9 students: 8 graded, 0 graded after a repair, 1 failed." in md
    assert "| ivy | failed |  | not a notebook (unreadable JSON) |" in md
    assert "| gus | graded | 6 | needs a manual look: no automatic score for x |" in md
    assert "## Parts given no points by the own-work rule" in md
    assert "- fay, test_attention: OwnWorkError: own work" in md
    assert "- `stray.ipynb`" in md
    for section in ("summary", "parts", "item-analysis", "needs-human", "own-work", "integrity-flags", "skipped"):
        assert f'id="{section}"' in page, section
    for fact in ("42 s", "<dd>2</dd>", "<dd>on</dd>", "Median</dt><dd>5</dd>"):
        assert fact in page, fact


def test_integrity_flags_are_listed_in_both_formats_and_rows_without_them_work(tmp_path):
    rows = a_class()
    rows[1].copied = ["identical answer: test_attention same code as cy"]
    rows[2].copied = ["identical answer: test_attention same code as bob"]
    rows[2].flags = ["tampering: cell 7, line 2: os.environ"]
    md, page = write_both(tmp_path, rows)
    section = md.split(f"## {report.FLAGS_TITLE}\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("\n- ") == 3 and "- cy: tampering: cell 7, line 2: os.environ" in section
    assert f"<h2>{report.FLAGS_TITLE}</h2>" in page
    assert "<td>cy</td><td>tampering: cell 7, line 2: os.environ</td>" in page
    # A row from before flags existed (no attribute at all): the section says so, nothing breaks.
    gone = ("flags", "failures", "copied", "evidence")
    bare = [SimpleNamespace(**{k: v for k, v in vars(r).items() if k not in gone}) for r in rows]
    md, page = write_both(tmp_path, bare)
    assert f"## {report.FLAGS_TITLE}\n\nNone." in md and "<p>None.</p>" in page


def test_what_a_submission_controls_is_escaped(tmp_path):
    rows = [
        row(
            EVIL,
            {**POINTS, "test_softmax": 0.0},
            {"test_softmax": f"AssertionError: {EVIL}"},
            problems=[Problem(ProblemKind.NOTE, EVIL)],
        ),
        row("ok", dict(POINTS), flags=[f'tampering: <img src=x onerror="alert(1)"> {EVIL}']),
    ]
    rows[0].status = "repaired"
    md, page = write_both(
        tmp_path, rows, ["## LMS: Canvas", "", "| student id | name |", "|---|---|", f"| 1 | {EVIL} |"]
    )
    assert "<script" not in page.lower() and "<img src=x" not in page
    shown = Page(page)  # parsed, as a browser reads it: the markup is the template's and markdown-it's
    assert shown.all("script") == [] and not [a for a in shown.all("img") if a.get("src") == "x"]
    assert sum(EVIL in text for text in shown.text("td") + shown.text("code")) >= 4, shown.texts  # shown as text
    assert "<script" not in md.replace(f"`AssertionError: {EVIL}`", "")  # inside a code span it is shown, not run
    assert "| &lt;script&gt;alert('pwned')&lt;/script&gt; | repaired |" in md
    assert "- ok: tampering: &lt;img src=x" in md


def test_the_grades_table_keeps_problems_short_and_the_report_in_full(tmp_path):
    long = "nbgrader could not grade it: " + "x" * 300
    r = row(
        "ivy", {}, status="failed", problems=[not_graded("x" * 300), Problem(ProblemKind.UNREADABLE, "not a notebook")]
    )
    report.write_csv(tmp_path / "grades.csv", [r], list(POINTS))
    cell = report.read_csv(tmp_path / "grades.csv")["ivy"]["problems"]
    assert len(cell) < 200 and cell.endswith("; not a notebook (in full in report.md)"), cell
    md, _ = write_both(tmp_path, [r])
    assert long in md
    assert report.short_problems([Problem(ProblemKind.NOTE, "short")]) == "short"


def test_identical_answers_are_one_line_per_group_with_its_size_and_names(tmp_path):
    rows = [row(s, dict(POINTS)) for s in ("1005", "1006", "1007", "1008")]
    rows[0].name, rows[1].name = "Ann Lee", "Ben Roe"
    for r in rows:
        r.flags = ["tampering: x"]
        r.copied = ["identical answer: answer cell softmax has the same code as others (… `x`)"]
    groups = [
        {"part": "softmax", "students": ["1005", "1006", "1007"], "starts": "e = x", "reference": False},
        {"part": "attention", "students": ["1008"], "starts": "s = q", "reference": True},
    ]
    md, page = write_both(tmp_path, rows, identical=groups)
    flags = md.split(f"## {report.FLAGS_TITLE}\n", 1)[1].split("\n## ", 1)[0]
    assert flags.count("identical answer:") == 2, flags  # one line per group, not one per student and part
    assert (
        "- identical answer: answer cell softmax: the same code from 3 students: Ann Lee (1005), Ben Roe (1006), "
        "1007 (comments" in flags
    )
    assert (
        "- identical answer: answer cell attention is the published reference solution, handed in by 1 student: 1008"
        in flags
    )
    assert "- Ann Lee (1005): tampering: x" in flags
    assert page.count("identical answer:") == 2 and "Ann Lee (1005)" in page


# ------------------------------------------------------------------------------------------------------------------
# the HTML page: self-contained, accessible, readable on a phone (fast)


class Page(HTMLParser):
    """A page as parsed: its tags with their attributes, and each element's text (white space folded)."""

    VOID = {"img", "meta", "br", "hr", "input", "link"}

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.texts: list[tuple[str, str]] = []
        self._open: list[list[str]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self._open.append([tag, ""])

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                name, text = self._open.pop(i)
                self.texts.append((name, " ".join(text.split())))
                return

    def handle_data(self, data):
        for element in self._open:
            element[1] += data

    def all(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]

    def text(self, tag: str) -> list[str]:
        return [text for t, text in self.texts if t == tag]


def test_the_lms_section_is_rendered_from_its_markdown():
    page = report.markdown_html(
        ["", "## LMS: Canvas", "", "Layout: x.", "", "To check:", "", "- `a.ipynb` was late", ""]
        + ["| student id | name in the LMS |", "|---|---|", "| 1 | a \\| b |"]
    )
    # compared as parsed content, not bytes: the page comes from a template and markdown-it (issue 36, item 3)
    parsed = Page(page)
    assert parsed.text("h2") == ["LMS: Canvas"] and "Layout: x." in parsed.text("p")
    assert parsed.text("li") == ["a.ipynb was late"] and parsed.text("code") == ["a.ipynb"]
    assert parsed.text("th") == ["student id", "name in the LMS"] and parsed.text("td") == ["1", "a | b"]
    assert {a.get("scope") for a in parsed.all("th")} == {"col"}  # a screen reader names each cell's column
    assert all(a.get("class") == "scroll" for a in parsed.all("div"))  # a wide table scrolls, not the page


def test_the_page_is_self_contained_and_accessible(tmp_path):
    _, text = write_both(tmp_path, a_class(), ["## LMS: Canvas", "", "| a | b |", "|---|---|", "| 1 | 2 |"])
    page = Page(text)
    for tag, attrs in page.tags:
        for name in ("src", "href", "srcset", "action", "data", "poster"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value), (tag, name, value)
    assert page.all("script") == [] and page.all("link") == [] and "@import" not in text and "url(" not in text
    images = page.all("img")
    assert len(images) == 2 + len(POINTS)  # the total, the parts overview and one histogram per part
    for img in images:
        assert img["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(img["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(img.get("alt", "")) > 40, img.get("alt")
    assert any("4 students scored 0" in i["alt"] for i in images)  # the alt text carries the numbers
    assert {"name": "viewport", "content": "width=device-width, initial-scale=1"} in page.all("meta")
    csp = next(m["content"] for m in page.all("meta") if m.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp
    tables = text.count("<table>")
    assert tables == text.count("<thead>") == text.count('<div class="scroll"><table>') and tables >= 5
    assert ".scroll { overflow-x: auto;" in text
    assert set(report.COLOURS.values()) == {"#0072B2", "#E69F00", "#D55E00", "#999999"}  # Okabe & Ito


def _page_requests(page: Path, tmp_path: Path) -> list[str]:
    """The URLs a page asked for when Chromium loaded it (its network log; Chromium's own traffic left out)."""
    log = tmp_path / f"{page.stem}-netlog.json"
    done = chromium(f"--log-net-log={log}", "--dump-dom", page.as_uri(), budget_ms=5000)
    assert done.returncode == 0 and "<body>" in done.stdout, done.stderr[-2000:]
    events = json.loads(log.read_text(encoding="utf-8"))
    start = events["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    found = []
    for event in events["events"]:
        params = event.get("params", {})
        if event["type"] == start and "file://" in str(params.get("network_isolation_key", "")):  # from the page
            found.append(params["url"])
    return [url for url in found if not url.startswith(("file:", "data:"))]


def test_chromium_loads_the_report_without_any_request(tmp_path):
    _, text = write_both(tmp_path, a_class())
    assert _page_requests(tmp_path / "report.html", tmp_path) == []
    # The same check sees a page that does load something (so an empty list above means something).
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png" alt="x"></body></html>')
    assert _page_requests(leaky, tmp_path) == ["http://example.invalid/x.png"]


# ------------------------------------------------------------------------------------------------------------------
# failure messages read from a graded notebook (fast)


def test_failures_are_the_messages_the_test_cells_raised():
    nb = corpus.answered()
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    tests = [c for c in tests if not c.metadata["nbgrader"].get("solution")]
    assert len(tests) == 3
    tests[1].outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue=SCALE[16:], traceback=["x"])]
    tests[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="fine\n")]
    assert report.failures(nb) == {tests[1].metadata["nbgrader"]["grade_id"]: SCALE}


# ------------------------------------------------------------------------------------------------------------------
# one small class through the real command (slow)


@pytest.mark.slow
def test_a_graded_class_gets_both_reports_with_the_real_messages(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    answers = {
        "right": corpus.answered(),
        "no_scale_a": corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE}),
        "no_scale_b": corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE}),
        "overflows": corpus.answered({"softmax": corpus.OVERFLOWS}),
        "hands_over": corpus.answered({"scaled_dot_product_attention": corpus.HANDING_OVER["direct"]}),
    }
    # one from an older release (its set-up cell names another tag), one without a recognisable set-up cell
    expected = versions.course(corpus.RELEASE).expected
    older = "0.0.1" if expected != "0.0.1" else "0.0.2"
    answers["old_release"] = corpus.answered({"softmax": corpus.OVERFLOWS})
    answers["old_release"].cells[0].source = (
        answers["old_release"].cells[0].source.replace(f"@v{expected}", f"@v{older}")
    )
    answers["no_setup"] = corpus.answered({"softmax": corpus.OVERFLOWS})
    del answers["no_setup"].cells[0]
    answers["no_setup"].metadata.get("manyheads", {}).pop("version", None)  # as Colab may strip it
    for student, nb in answers.items():
        (subs / student).mkdir(parents=True)
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(nb))
    done = corpus.run_grade(corpus.EX1, str(subs), "--out", str(out), "--no-sandbox", "--jobs", "2", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("[")], "--quiet: no progress lines"
    assert str(out / "report.html") in done.stdout
    md, text = (out / "report.md").read_text(), (out / "report.html").read_text()
    graded = {s: out / "course" / "autograded" / s / corpus.EX1 / f"{corpus.EX1}.ipynb" for s in answers}
    raised = {s: report.failures(nbformat.read(path, as_version=4)) for s, path in graded.items()}
    attention = "test_scaled_dot_product_attention"
    assert raised["right"] == {} and set(raised["no_scale_a"]) == {attention} and set(raised["overflows"])
    scale = raised["no_scale_a"][attention]
    assert scale == raised["no_scale_b"][attention] and "Error" in scale
    assert f"- **{attention}**: failed by 3 of 7, 1 of them by the own-work rule." in md
    assert f"  - 2 × {report._code(report._message(scale))}" in md
    for message in raised["overflows"].values():
        assert f"  - 3 × {report._code(report._message(message))}" in md
    # another version or none: listed with both versions, graded like the others (no points change)
    rows = report.read_csv(out / "grades.csv")
    assert rows["old_release"]["score"] == rows["no_setup"]["score"] == rows["overflows"]["score"]
    assert rows["old_release"]["status"] == rows["no_setup"]["status"] == "graded"
    assert f"- old_release: worked on v{older}, the course is at v{expected}" in md
    assert "- old_release: tampering" not in md, "an older release's set-up cell is the course's, not the student's"
    assert "- no_setup: version unknown" in md and "- right:" not in md.split("## Versions", 1)[1]
    assert f"worked on v{older}, the course is at v{expected}" in text and "no_setup: version unknown" in text
    assert f"(1 on another version than v{expected}, 1 version unknown: see the report)" in done.stdout
    assert "## Integrity flags (no points deducted)" in md and "## LMS: " in md and 'id="lms"' in text
    flags = md.split("## Integrity flags (no points deducted)\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "- identical answer: answer cell scaled_dot_product_attention: the same code from 2 students: "
        "no_scale_a, no_scale_b" in flags
    )
    assert "- identical answer: answer cell softmax is the published reference solution, handed in by " in flags
    assert _page_requests(out / "report.html", tmp_path) == []
