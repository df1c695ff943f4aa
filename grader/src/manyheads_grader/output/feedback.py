"""Students' feedback that never shows the answers: points, pass/fail and messages, no hidden tests, no reference code.

nbgrader's ``generate_feedback`` renders the autograded notebook, which holds the hidden tests (restored by
``autograde``) and tracebacks that quote them (jupyter/nbgrader#917; tooling-notes §6.5). :class:`StudentFeedback` is
an nbgrader preprocessor that runs after ``GetGrades``: it puts a table of the graded parts on top (points, passed or
not, the message the test raised) and, unless ``full`` is set (the instructor's private review), removes the hidden
tests from the test cells, cuts every traceback down to ``ExceptionType: message`` and withholds any output that
quotes a hidden-test line or a line of the reference solution (e.g. a student printing ``In`` or ``inspect.getsource``).
:func:`configure` writes it into an ``nbgrader_config.py``, so the stock ``nbgrader generate_feedback`` in
``OUT/course`` is safe too. Taught on the instructors' page ``instructors/grading.md``.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Unicode

from manyheads_grader.output import pages

BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
MODES = ("student", "full")
WITHHELD = "[output withheld by the grader: it quotes the grader's hidden tests or reference solution]\n"
# Shorter lines ("else:", "return out") are too common to mean anything when they turn up in an output.
MIN_SECRET = 12
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# IPython's frame headers, and the last line of a failed check as manyheads.checks.display shows it
_CELL_LINE = re.compile(r"(?:Cell In\s*\[\d*\]|<ipython-input-[^>]*>|checked in this cell), line (\d+)")
_THEIR_LINE = re.compile(r"^\s*your \w+, line \d+: ")  # manyheads.checks.display: the student's line


def _regions(source: str, begin: str, end: str) -> tuple[str, list[str]]:
    """``source`` without the ``begin``..``end`` regions (delimiters included), and the lines inside them."""
    kept, inside, secret = [], False, []
    for line in source.splitlines(keepends=True):
        if line.strip() == begin:
            inside = True
        elif line.strip() == end and inside:
            inside = False
        elif inside:
            secret.append(line.rstrip("\n"))
        else:
            kept.append(line)
    return "".join(kept).rstrip("\n"), secret


def strip_hidden(source: str) -> str:
    """A test cell's source as the student's release shows it: the hidden tests removed."""
    return _regions(source, BEGIN_HIDDEN, END_HIDDEN)[0]


def hidden_lines(source: str) -> list[str]:
    return _regions(source, BEGIN_HIDDEN, END_HIDDEN)[1]


def solution_lines(source: str) -> list[str]:
    return _regions(source, BEGIN_SOLUTION, END_SOLUTION)[1]


def secrets_of(nb: nbformat.NotebookNode, source_nb: nbformat.NotebookNode | None = None) -> set[str]:
    """Distinctive lines that must not reach a student: hidden tests (in ``nb``) and reference solutions."""
    lines = [line for cell in nb.cells if cell.cell_type == "code" for line in hidden_lines(cell.source)]
    if source_nb is not None:
        for cell in source_nb.cells:
            if cell.cell_type == "code":
                lines += hidden_lines(cell.source) + solution_lines(cell.source)
    return {s for s in (line.strip() for line in lines) if len(s) >= MIN_SECRET and not s.startswith("#")} | {
        BEGIN_HIDDEN,
        END_HIDDEN,
    }


def plain(text: str) -> str:
    return _ANSI.sub("", text)


def error_message(output) -> str:
    """``ExceptionType: message`` of an error output, without the traceback (which quotes source lines)."""
    value = plain(str(output.get("evalue", ""))).strip()
    return f"{output.get('ename', 'Error')}: {value}" if value else str(output.get("ename", "Error"))


def _output_text(output) -> str:
    parts = [str(output.get("text", "")), str(output.get("ename", "")), str(output.get("evalue", ""))]
    parts += ["".join(output.get("traceback", []))]
    for value in output.get("data", {}).values():
        parts.append(value if isinstance(value, str) else "".join(value) if isinstance(value, list) else "")
    return plain("\n".join(parts))


def quotes_secret(text: str, secrets: set[str]) -> bool:
    text = plain(text)
    return any(s in text for s in secrets)


def failed_where(cell_source: str, output) -> str | None:
    """Where in a test cell the error was raised: the "visible check" or the "hidden tests" (None: unknown).

    Read from the first traceback frame in the cell, which is the top-level statement that raised.
    """
    lines = cell_source.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip() == BEGIN_HIDDEN), None)
    if start is None:
        return "visible check"
    for frame in output.get("traceback", []):
        found = _CELL_LINE.search(plain(frame))
        if found:
            return "hidden tests" if int(found.group(1)) > start else "visible check"
    return None


@dataclass
class Part:
    grade_id: str
    kind: str  # "test" (autograded) or "written"
    title: str
    score: float | None
    points: float | None
    status: str  # "passed", "failed", "graded", "waiting for a grader"
    message: str = ""
    where: str | None = None


NOT_RUN = "not run: an answer above has a SyntaxError (see the first failed part)"
_LINE = re.compile(r"line (\d+)")


def syntax_error(cell) -> str | None:
    """``SyntaxError: ... (line N of your answer: `code`)`` when the cell's code did not compile, else None."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") in (
            "SyntaxError",
            "IndentationError",
            "TabError",
        ):
            text = plain(" ".join([str(output.get("evalue", "")), *output.get("traceback", [])]))
            found = _LINE.search(text)
            lines = cell.source.splitlines()
            where = ""
            if found and 0 < int(found.group(1)) <= len(lines):
                n = int(found.group(1))
                where = f" (line {n} of your answer: `{lines[n - 1].strip()[:80]}`)"
            message = re.sub(r"\s*\([^()]*line \d+\)\s*$", "", str(output.get("evalue", "")).strip())
            return f"{output.get('ename')}: {plain(message)}{where}"
    return None


def _title(cell) -> str:
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
    return first.strip('"').strip("'").strip() if first.startswith(('"""', "'''")) else ""


def parts_of(nb: nbformat.NotebookNode, pending: set[str] = frozenset()) -> list[Part]:
    """One Part per graded cell, in order, from a notebook that ``GetGrades`` has given scores.

    ``pending``: grade ids that still need a person (their score is not final).
    """
    found = []
    broken = None  # the first answer cell that did not compile: later tests fail because of it, not on their own
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if broken is None and cell.cell_type == "code" and not (meta.get("grade") and not meta.get("solution")):
            broken = syntax_error(cell)
        if not meta.get("grade"):
            continue
        score, points = meta.get("score"), meta.get("points")
        if not meta.get("solution") and cell.cell_type == "code":  # an autograded test cell
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            failed = bool(errors) or (score is not None and points is not None and float(score) < float(points))
            found.append(
                Part(
                    meta["grade_id"],
                    "test",
                    _title(cell),
                    score,
                    points,
                    "failed" if failed else "passed",
                    error_message(errors[0]) if errors else "",
                    failed_where(cell.source, errors[0]) if errors else None,
                )
            )
            if errors and broken is not None:  # said once, as what it is; the tests after it did not run
                first = not any(p.message.startswith(broken) or p.message.startswith(NOT_RUN) for p in found[:-1])
                found[-1].message, found[-1].where = (broken, "your answer") if first else (NOT_RUN, "your answer")
        else:
            waiting = score is None or meta["grade_id"] in pending
            status = "waiting for a grader" if waiting else "graded"
            found.append(Part(meta["grade_id"], "written", "", None if waiting else score, points, status))
    return found


def summary_html(parts: list[Part], full: bool) -> str:
    """The list on top of the feedback: one item per graded part (templates/feedback_summary.html.j2).

    Only tags that nbconvert's ``clean_html`` keeps in a raw cell (div, ul, li, b, em, code, pre): it escapes the
    rest, including the ``tbody`` a table would get.
    """
    return pages.render("feedback_summary.html.j2", parts=parts, full=full).strip()


def scrub(nb: nbformat.NotebookNode, secrets: set[str]) -> nbformat.NotebookNode:
    """The student's view, in place: hidden tests out of the test cells, tracebacks cut to the message and the
    student's own line (as a failed check shows them, manyheads.checks.display), quoting outputs withheld."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if utils.is_grade(cell) or BEGIN_HIDDEN in cell.source:
            cell.source = strip_hidden(cell.source)
        outputs = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                message = error_message(out)
                theirs = [plain(t) for t in out.get("traceback", []) if _THEIR_LINE.match(plain(t))][:1]
                shown = [message, *(t for t in theirs if not quotes_secret(t, secrets))]  # their line: never secret
                out.traceback = [WITHHELD.strip()] if quotes_secret(message, secrets) else shown
                out.evalue = "" if quotes_secret(message, secrets) else out.get("evalue", "")
                outputs.append(out)
            elif quotes_secret(_output_text(out), secrets):
                outputs.append(nbformat.v4.new_output("stream", name="stdout", text=WITHHELD))
            else:
                outputs.append(out)
        cell.outputs = outputs
    return nb


# The feedback page: nbgrader's "feedback" template rewritten on the same classic base where it falls short. A
# written answer nobody has graded yet says so instead of "Score: 0.0 / 2.0"; no MathJax from a CDN (the page works
# offline: formulas stay as TeX); message boxes and code wrap at phone width. Written next to the course's config.
TEMPLATE_NAME = "manyheads_feedback"
TEMPLATE_DIR = "manyheads_templates"  # next to nbgrader_config.py
TEMPLATE = pages.TEMPLATES / "feedback.html.j2"  # an nbconvert template on the classic base


def write_template(folder: Path) -> Path:
    """Write the feedback template under ``folder`` (a template base directory); return ``folder``."""
    target = Path(folder) / TEMPLATE_NAME
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATE, target / "index.html.j2")
    (target / "conf.json").write_text('{"base_template": "classic", "mimetypes": {"text/html": true}}\n')
    return Path(folder)


class StudentFeedback(NbGraderPreprocessor):
    """Feedback without the answers (see the module docstring); put it after ``GetGrades``."""

    full = Bool(False, help="The instructor's private view: keep hidden tests and tracebacks.").tag(config=True)
    solutions = Unicode(
        "",
        help="Folder of the source notebooks, <solutions>/<assignment>/<notebook>.ipynb: their solution and "
        "hidden-test lines are withheld wherever an output quotes them.",
    ).tag(config=True)

    def _pending(self, info: dict) -> set[str]:
        """Grade ids still waiting for a person (a written answer nobody has graded yet)."""
        from nbgrader.api import Gradebook

        try:
            with Gradebook(info["db_url"]) as gb:
                nb = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
                return {g.name for g in nb.grades if g.needs_manual_grade}
        except Exception:  # no gradebook (a notebook rendered by hand): every score is shown as it is
            return set()

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        source_nb = None
        if self.solutions and info.get("assignment") and info.get("notebook"):
            path = Path(self.solutions) / info["assignment"] / f"{info['notebook']}.ipynb"
            if path.is_file():
                source_nb = nbformat.read(path, as_version=4)
        # A line the notebook shows anyway (release code, or the student's own identical line) is no secret.
        public = {line.strip() for cell in nb.cells for line in strip_hidden(cell.source).splitlines()}
        secrets = secrets_of(nb, source_nb) - public
        pending = self._pending(info)
        parts = parts_of(nb, pending)
        for cell in nb.cells:  # the page says "not graded yet" for these (TEMPLATE), not "Score: 0.0 / 2.0"
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade_id") in pending and meta.get("grade"):
                meta["mh_pending"] = True
        resources.setdefault("nbgrader", {})["mh_pending"] = sum(p.status == "waiting for a grader" for p in parts)
        if not self.full:
            scrub(nb, secrets)
            for part in parts:
                if quotes_secret(part.message, secrets):
                    part.message = WITHHELD.strip()
        table = nbformat.v4.new_raw_cell(summary_html(parts, self.full))
        table.metadata["raw_mimetype"] = "text/html"
        table.metadata["format"] = "text/html"
        nb.cells.insert(0, table)
        return nb, resources


PREPROCESSORS = [
    "nbgrader.preprocessors.GetGrades",
    f"{__name__}.StudentFeedback",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
_BEGIN = "# >>> manyheads: feedback without the answers (manyheads grade --feedback)"
_END = "# <<< manyheads: feedback"


def configure(config: Path, mode: str = "student") -> None:
    """Write into ``config`` (an nbgrader_config.py) the lines that make ``generate_feedback`` use StudentFeedback.

    Replaces an earlier block of its own; ``mode="full"`` is the instructor's private view.
    """
    if mode not in MODES:
        raise ValueError(f"feedback mode must be one of {', '.join(MODES)}, got {mode!r}")
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    if _BEGIN in text and _END in text:
        before, rest = text.split(_BEGIN, 1)
        text = before.rstrip("\n") + "\n" + rest.split(_END, 1)[1].lstrip("\n")
    text = text.rstrip("\n") + (
        f"\n\n{_BEGIN}\n"
        "import os as _os\n\n"
        f"c.GenerateFeedback.preprocessors = {PREPROCESSORS!r}\n"
        "import nbgrader as _nbgrader\n\n"
        f"c.HTMLExporter.template_name = {TEMPLATE_NAME!r}  # offline, phone-width, 'not graded yet'\n"
        "c.HTMLExporter.extra_template_basedirs = [\n"
        "    _os.path.join(_os.path.dirname(_nbgrader.__file__), 'server_extensions', 'formgrader', 'templates'),\n"
        f"    _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), {TEMPLATE_DIR!r}),\n"
        "]\n"
        "c.StudentFeedback.solutions = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), 'solutions')\n"
        f"c.StudentFeedback.full = {mode == 'full'}  # True: hidden tests and tracebacks shown (never for students)\n"
        f"{_END}\n"
    )
    config.write_text(text, encoding="utf-8")
    write_template(config.parent / TEMPLATE_DIR)
