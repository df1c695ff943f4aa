"""Students' feedback from ``manyheads grade``: points, pass/fail and messages, never hidden tests or reference code.

Fast tests of the pieces (hidden regions, traceback cutting, withheld outputs, the config block), then one real
submission of exercise 1 graded by the command (real nbgrader, sandboxed): one part passes, one fails the visible
check, one fails only the hidden tests, and extra cells try to print the hidden tests. The instructor's view is
rendered from the same graded course with stock ``nbgrader generate_feedback``.
"""

from __future__ import annotations

import html
import inspect
import re
import shutil

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers.grading_corpus import run_grade
from helpers.nbgrader_course import run_nbgrader

import manyheads.checks.single_head_bottleneck as ex1_checks
from manyheads.attention import scaled_dot_product_attention
from manyheads_grader import cli
from manyheads_grader.execution import sandbox
from manyheads_grader.output import feedback, report

EX1 = corpus.EX1
SOURCE = nbformat.read(corpus.SOURCE, as_version=4)


def _test_cells(nb) -> dict[str, str]:
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
    }


# ------------------------------------------------------------------------------------------------------------------
# the pieces (fast)


def test_strip_hidden_gives_the_release_and_the_hidden_lines_are_the_rest():
    released = _test_cells(corpus.release())
    for grade_id, source in _test_cells(SOURCE).items():
        hidden = feedback.hidden_lines(source)
        assert len(hidden) > 3, grade_id
        assert feedback.strip_hidden(source).strip() == released[grade_id].strip()
        assert feedback.BEGIN_HIDDEN not in feedback.strip_hidden(source)


def _graded_cell(source: str, outputs: list) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, outputs=outputs)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 2, "locked": True}
    return cell


SECRET_CELL = """mh.checks.check_x(x)
### BEGIN HIDDEN TESTS
_want = reference_answer_for_the_hidden_case(7)
assert x(7) == _want, "x(7) is wrong: mind the last axis"
### END HIDDEN TESTS"""


def test_scrub_removes_hidden_tests_cuts_tracebacks_and_withholds_quoting_outputs():
    error = nbformat.v4.new_output(
        "error",
        ename="AssertionError",
        evalue="x(7) is wrong: mind the last axis",
        traceback=[
            "\x1b[0;31mAssertionError\x1b[0m  Traceback (most recent call last)",
            "Cell \x1b[0;32mIn[9], line 4\x1b[0m\n\x1b[1;32m----> 4\x1b[0m assert x(7) == _want, ...",
        ],
    )
    student = nbformat.v4.new_code_cell(
        "print(In)",
        outputs=[
            nbformat.v4.new_output(
                "stream", name="stdout", text="['', '_want = reference_answer_for_the_hidden_case(7)']"
            )
        ],
    )
    own = nbformat.v4.new_code_cell("print(2)", outputs=[nbformat.v4.new_output("stream", name="stdout", text="2\n")])
    nb = nbformat.v4.new_notebook(cells=[_graded_cell(SECRET_CELL, [error]), student, own])
    parts = feedback.parts_of(nb)
    assert [(p.status, p.message, p.where) for p in parts] == [
        ("failed", "AssertionError: x(7) is wrong: mind the last axis", "hidden tests")
    ]
    secrets = feedback.secrets_of(nb)
    feedback.scrub(nb, secrets)
    assert nb.cells[0].source == "mh.checks.check_x(x)"
    assert nb.cells[0].outputs[0].traceback == ["AssertionError: x(7) is wrong: mind the last axis"]
    assert nb.cells[1].outputs[0].text == feedback.WITHHELD
    assert nb.cells[2].outputs[0].text == "2\n"
    assert "reference_answer_for_the_hidden_case" not in nbformat.writes(nb)


def test_failed_where_tells_the_visible_check_from_the_hidden_tests():
    def err(line: int):
        return {"output_type": "error", "traceback": [f"Cell \x1b[0;32mIn[3], line {line}\x1b[0m", "more frames"]}

    assert feedback.failed_where(SECRET_CELL, err(1)) == "visible check"
    assert feedback.failed_where(SECRET_CELL, err(4)) == "hidden tests"
    assert feedback.failed_where("check(x)", err(1)) == "visible check"
    assert feedback.failed_where(SECRET_CELL, {"traceback": ["no cell frame"]}) is None
    # as a failed check shows it (manyheads.checks.display): the last line says where in the cell
    short = ["AssertionError: wrong", "  your x, line 2: return 1", "  (checked in this cell, line 4)"]
    assert feedback.failed_where(SECRET_CELL, {"traceback": short}) == "hidden tests"


def test_the_students_view_keeps_the_message_and_their_own_line():
    """Issue 38, item 3: the feedback shows a failed check as the notebook does, the message and the student's own
    line, nothing of the check's or the hidden tests' code."""
    error = nbformat.v4.new_output(
        "error",
        ename="AssertionError",
        evalue="x is off by 2: mind the last axis",
        traceback=[
            "AssertionError: x is off by 2: mind the last axis",
            "  your x, line 3: return v.sum(dim=0)",
            "  (checked in this cell, line 4)",
        ],
    )
    nb = nbformat.v4.new_notebook(cells=[_graded_cell(SECRET_CELL, [error])])
    feedback.scrub(nb, feedback.secrets_of(nb))
    assert nb.cells[0].outputs[0].traceback == [
        "AssertionError: x is off by 2: mind the last axis",
        "  your x, line 3: return v.sum(dim=0)",
    ]


def test_summary_escapes_what_the_student_controls():
    part = feedback.Part("t", "test", "Part 1", 0.0, 2.0, "failed", "AssertionError: <script>alert(1)</script>")
    text = feedback.summary_html([part], full=False)
    assert "<script>" not in text and "&lt;script&gt;" in text and "<b>0 / 2</b>" in text
    assert "Instructor view" in feedback.summary_html([part], full=True)


def test_configure_replaces_its_own_block_and_refuses_unknown_modes(tmp_path):
    config = tmp_path / "nbgrader_config.py"
    config.write_text("c = get_config()\nc.Execute.timeout = 5\n")
    feedback.configure(config, "full")
    with open(config, "a") as f:
        f.write("c.CourseDirectory.db_url = 'sqlite:///x.db'\n")
    feedback.configure(config, "student")
    text = config.read_text()
    assert text.count("c.GenerateFeedback.preprocessors") == 1 and "c.StudentFeedback.full = False" in text
    assert "c.Execute.timeout = 5" in text and "db_url = 'sqlite:///x.db'" in text
    with pytest.raises(ValueError, match="feedback mode must be one of student, full"):
        feedback.configure(config, "everything")


def test_the_command_takes_a_feedback_option():
    parser = cli.build_parser()
    assert parser.parse_args(["grade", EX1, "subs", "--out", "o"]).feedback == "student"
    assert parser.parse_args(["grade", EX1, "subs", "--out", "o", "--feedback", "full"]).feedback == "full"
    with pytest.raises(SystemExit):
        parser.parse_args(["grade", EX1, "subs", "--out", "o", "--feedback", "answers"])


# ------------------------------------------------------------------------------------------------------------------
# one real submission through the command (slow)

# Written differently from the reference, so that no line of the reference solution is in the submission.
OWN_SOFTMAX = """def softmax(scores):
    top = torch.amax(scores, dim=-1, keepdim=True)
    e = torch.exp(scores - top)
    return e / torch.sum(e, dim=-1, keepdim=True)
"""
# Right on every visible input, wrong when the last axis has 7 keys, which only the hidden tests use.
HIDDEN_ONLY_ENTROPY = """def attention_entropy(weights):
    h = -torch.where(weights > 0, weights * torch.log(weights), torch.zeros_like(weights)).sum(dim=-1)
    return h * 0.5 if weights.shape[-1] == 7 else h
"""
SNOOP = [
    "print(In)",  # every executed cell's source, the hidden tests included
    "get_ipython().run_line_magic('history', '')",  # the same through IPython's history
]


def _text(page: str) -> str:
    """What a reader of the HTML sees (tags removed, entities decoded)."""
    body = page[page.index("<body") :]
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def _private_lines(submitted: nbformat.NotebookNode) -> set[str]:
    """Lines of the hidden tests, the reference solution and the reference implementations the checks compare
    against, that neither the release nor the student's own notebook shows."""
    shown = {line.strip() for c in [*corpus.release().cells, *submitted.cells] for line in c.source.splitlines()}
    lines = set()
    for cell in SOURCE.cells:
        lines |= {s.strip() for s in feedback.hidden_lines(cell.source) + feedback.solution_lines(cell.source)}
    for fn in (scaled_dot_product_attention, ex1_checks.check_scaled_dot_product_attention):
        lines |= {s.strip() for s in inspect.getsource(fn).splitlines()}
    return {s for s in lines - shown if len(s) >= 12 and not s.startswith(("#", '"', "f'", 'f"', "'"))}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.available():
        pytest.fail(sandbox.available())
    base = tmp_path_factory.mktemp("feedback")
    subs, out = base / "submissions", base / "out"
    nb = corpus.answered(
        {
            "softmax": OWN_SOFTMAX,
            "scaled_dot_product_attention": corpus.NO_SCALE,
            "attention_entropy": HIDDEN_ONLY_ENTROPY,
        }
    )
    for code in SNOOP:
        nb = corpus.with_extra(nb, code, after="test_attention_entropy")
    for cell in nb.cells:  # a written answer (a person grades it later; an unchanged one scores 0 at once)
        if cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = "In my own words: one head mixes both targets into one weighted average."
    (subs / "mixed").mkdir(parents=True)
    (subs / "mixed" / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
    done = run_grade(EX1, str(subs), "--out", str(out), "--jobs", "1", "--timeout", "20")
    assert done.returncode == 0, done.stdout + done.stderr
    page = (out / "feedback" / "mixed" / f"{EX1}.html").read_text(encoding="utf-8")
    return {"out": out, "nb": nb, "page": page, "row": report.read_csv(out / "grades.csv")["mixed"]}


@pytest.mark.slow
def test_the_grades_are_what_the_answers_earn(graded):
    row = graded["row"]
    assert (row["test_softmax"], row["test_scaled_dot_product_attention"], row["test_attention_entropy"]) == (
        "2",
        "0",
        "0",
    )


@pytest.mark.slow
def test_student_feedback_shows_points_results_and_messages(graded):
    page = graded["page"]
    text = _text(page)
    start = page.index('id="mh-feedback-summary"')
    summary = _text("<body>" + page[start : page.index("</ul></div>", start)])
    for expected in (
        "test_softmax Part 1 (2 points)",
        ": 2 / 2, passed",
        ": 0 / 4, failed (raised in the visible check)",
        "AssertionError: weights match softmax(q kᵀ) without scaling: divide the scores by √d_k",
        ": 0 / 2, failed (raised in the hidden tests)",
        "AssertionError: entropy ",  # the hidden test's own message: which value, not how it is computed
    ):
        assert expected in summary, expected
    assert "check_softmax: all visible checks passed" in text  # the checks' output stays


@pytest.mark.slow
def test_student_feedback_shows_no_hidden_test_and_no_reference_code(graded):
    page, text = graded["page"], _text(graded["page"])
    private = _private_lines(graded["nb"])
    assert len(private) > 50
    assert [line for line in private if line in text] == []
    for marker in ("HIDDEN TESTS", "BEGIN SOLUTION", "Traceback", "def _reference", "def _compare"):
        assert marker not in text, marker
    assert "----> " not in page and "Cell In[" not in text
    assert text.count(feedback.WITHHELD.strip()) == len(SNOOP)


@pytest.mark.slow
def test_stock_generate_feedback_in_out_course_is_safe_and_full_is_the_instructors_view(graded, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(graded["out"] / "course", course)
    private = _private_lines(graded["nb"])
    html_file = course / "feedback" / "mixed" / EX1 / f"{EX1}.html"

    status, log = run_nbgrader(course, "generate_feedback", EX1, "--force")
    assert status == 0, log
    student_text = _text(html_file.read_text(encoding="utf-8"))
    assert [line for line in private if line in student_text] == []

    status, log = run_nbgrader(course, "generate_feedback", EX1, "--force", "--StudentFeedback.full=True")
    assert status == 0, log
    page = html_file.read_text(encoding="utf-8")
    full_text = _text(page)
    assert "Instructor view, not for students" in full_text
    assert [line for line in private if line in full_text], "the same search finds them when they are shown"
    hidden = {s.strip() for s in feedback.hidden_lines(_test_cells(SOURCE)["test_attention_entropy"])}
    assert {line for line in hidden if len(line) >= 12} <= {line for line in hidden if line in full_text}
    # the traceback as the kernel stored it: a failed check's short form (manyheads.checks.display), where it failed
    assert "### BEGIN HIDDEN TESTS" in full_text and "(checked in this cell, line" in full_text
    assert ": 0 / 2, failed (raised in the hidden tests)" in full_text


@pytest.mark.slow
def test_the_page_works_offline_on_a_phone_and_says_not_graded_yet(graded):
    """No MathJax (or anything) from a CDN, message boxes that wrap at phone width, and the written answer nobody
    has graded yet says so instead of "Score: 0.0 / N"."""
    page = graded["page"]
    assert "cdnjs" not in page and "MathJax.js" not in page
    assert not re.search(r"<script[^>]+src=\"?https?://", page) and not re.search(r"<link[^>]+href=\"?https?://", page)
    assert 'name="viewport"' in page and "white-space: pre-wrap" in page and "max-width: 600px" in page
    written = [
        c.metadata.nbgrader["grade_id"]
        for c in corpus.release().cells
        if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")
    ]
    assert written
    for gid in written:
        toc = re.search(rf'<a href="#{gid}">Written response</a>\s*([^<]*)</li>', page)
        assert toc and toc.group(1).strip() == "(not graded yet)", toc and toc.group(0)
        heading = page[page.index(f'<a name="{gid}"></a>') :][:600]
        assert "not graded yet" in heading and "Score:" not in heading, heading
    assert "written part(s) not graded yet" in page
