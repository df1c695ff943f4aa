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

import html
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Unicode

BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
MODES = ("student", "full")
WITHHELD = "[output withheld by the grader: it quotes the grader's hidden tests or reference solution]\n"
# Shorter lines ("else:", "return out") are too common to mean anything when they turn up in an output.
MIN_SECRET = 12
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_LINE = re.compile(r"(?:Cell In\s*\[\d*\]|<ipython-input-[^>]*>), line (\d+)")


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


def _title(cell) -> str:
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
    return first.strip('"').strip("'").strip() if first.startswith(('"""', "'''")) else ""


def parts_of(nb: nbformat.NotebookNode, pending: set[str] = frozenset()) -> list[Part]:
    """One Part per graded cell, in order, from a notebook that ``GetGrades`` has given scores.

    ``pending``: grade ids that still need a person (their score is not final).
    """
    found = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
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
        else:
            waiting = score is None or meta["grade_id"] in pending
            status = "waiting for a grader" if waiting else "graded"
            found.append(Part(meta["grade_id"], "written", "", None if waiting else score, points, status))
    return found


def _num(value) -> str:
    return "–" if value is None else f"{float(value):g}"


def summary_html(parts: list[Part], full: bool) -> str:
    """The list on top of the feedback: one item per graded part.

    Only tags that nbconvert's ``clean_html`` keeps in a raw cell (div, ul, li, b, em, code, pre): it escapes the
    rest, including the ``tbody`` a table would get.
    """
    e = html.escape
    items = []
    for p in parts:
        title = f" <em>{e(p.title)}</em>" if p.title else ""
        where = f" <em>(raised in the {e(p.where)})</em>" if p.where else ""
        message = f"<pre>{e(p.message)}</pre>" if p.message else ""
        items.append(
            f'<li class="mh-{e(p.status.split()[0])}"><code>{e(p.grade_id)}</code>{title}: '
            f"<b>{_num(p.score)} / {_num(p.points)}</b>, {e(p.status)}{where}{message}</li>"
        )
    banner = (
        '<div class="alert alert-danger"><b>Instructor view, not for students:</b> this page shows the hidden tests '
        "and full tracebacks.</div>"
        if full
        else "<div>The tests' own code is not shown: a failed test says what went wrong in its message.</div>"
    )
    return f'<div id="mh-feedback-summary">{banner}<ul>{"".join(items)}</ul></div>'


def scrub(nb: nbformat.NotebookNode, secrets: set[str]) -> nbformat.NotebookNode:
    """The student's view, in place: hidden tests out of the test cells, tracebacks cut, quoting outputs withheld."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if utils.is_grade(cell) or BEGIN_HIDDEN in cell.source:
            cell.source = strip_hidden(cell.source)
        outputs = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                message = error_message(out)
                out.traceback = [WITHHELD.strip() if quotes_secret(message, secrets) else message]
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
TEMPLATE = r"""{%- extends 'nbconvert/templates/classic/index.html.j2' -%}
{# Written by manyheads_grader.feedback: nbgrader's feedback page, offline, phone-width, pending parts. #}
{%- macro mh_score(cell) -%}
  <span class="pull-right">
  {%- if cell.metadata.nbgrader.mh_pending -%}
      not graded yet
  {%- else -%}
      Score: {{ cell.metadata.nbgrader.score | float | round(2) }} / {{ cell.metadata.nbgrader.points | float | round(2) }}
  {%- endif %} <a href="#top">(Top)</a>
  </span>
{%- endmacro -%}
{%- macro mh_toc_score(cell) -%}
  {%- if cell.metadata.nbgrader.mh_pending -%}(not graded yet){%- else -%}(Score: {{ cell.metadata.nbgrader.score | float | round(2) }} / {{ cell.metadata.nbgrader.points | float | round(2) }}){%- endif -%}
{%- endmacro -%}
{%- macro mh_heading(cell) -%}
{%- if cell.metadata.nbgrader.solution or cell.metadata.nbgrader.task -%}
<a name="comment-{{ cell.metadata.nbgrader.grade_id }}"></a>
{%- endif -%}
{%- if cell.metadata.nbgrader.grade -%}
<a name="{{ cell.metadata.nbgrader.grade_id }}"></a>
{%- endif -%}
<div class="panel-heading">
{%- if cell.metadata.nbgrader.solution -%}
  <span class="nbgrader-label">Student's answer</span>
  {%- if cell.metadata.nbgrader.grade -%}{{ mh_score(cell) }}{%- else -%}<span class="pull-right"><a href="#top">(Top)</a></span>{%- endif -%}
{%- elif cell.metadata.nbgrader.task -%}
  <span class="nbgrader-label">Student's task</span>{{ mh_score(cell) }}
{%- elif cell.metadata.nbgrader.grade -%}
  <span class="nbgrader-label">Grade cell: <code>{{ cell.metadata.nbgrader.grade_id }}</code></span>{{ mh_score(cell) }}
{%- endif -%}
</div>
{%- endmacro -%}
{%- macro mh_footer(cell) -%}
{%- if (cell.metadata.nbgrader.solution or cell.metadata.nbgrader.task) and cell.metadata.nbgrader.comment -%}
<div class="panel-footer"><div><b>Comments:</b> {{ cell.metadata.nbgrader.comment | markdown2html | strip_files_prefix }}</div></div>
{%- endif -%}
{%- endmacro -%}

{%- block header -%}
<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<title>{{ resources.nbgrader.notebook }}</title>
{{ resources.include_css('bootstrap.min.css') }}
{% for css in resources.inlining.css -%}
<style type="text/css">
{{ css }}
</style>
{% endfor %}
<style>
body { overflow: visible; font-size: 14px; padding-top: 1em; }
div#notebook { overflow: visible; border-top: none; }
div#notebook-container { width: 100%; max-width: 100%; padding: 0; box-shadow: none; }
div.prompt { min-width: 21ex; }
div.nbgrader_cell { width: 100%; }
div.nbgrader_cell .panel-heading { padding: 0.4em 0.6em; min-height: 37px; height: auto; overflow: hidden; }
div.nbgrader_cell .panel-heading a { color: #595959; }
div.nbgrader_cell .panel-footer { padding: 0.4em 0.6em; }
div.nbgrader_cell .panel-body { padding: 0.4em; }
div.nbgrader_cell .input_area { background: white; border: none; }
li.late-penalty { color: #d2413a; }
span.nbgrader-label { line-height: 25px; }
/* message boxes, outputs and code wrap instead of running off a phone's screen */
pre, .output_area pre, .input_area pre, #mh-feedback-summary pre {
  white-space: pre-wrap; overflow-wrap: anywhere; word-break: break-word; max-width: 100%; }
.output_area, .output_subarea, .inner_cell, .input_area { min-width: 0; max-width: 100%; }
.container { max-width: 100%; }
@media (max-width: 600px) {
  body { font-size: 13px; padding: 0.5em 0 0 0; }
  .container { padding-left: 4px; padding-right: 4px; width: 100%; }
  div.prompt { display: none; }
  div.input, div.output_area { flex-direction: column; display: block; }
  .pull-right { float: none !important; display: block; }
}
@media print { div.cell, div.output_wrapper, div.output { display: block; page-break-inside: avoid; } }
</style>
</head>
{%- endblock header -%}

{% block body %}
<body>
  <a name="top"></a>
  <div class="container">
    <div class="panel panel-default">
      <div class="panel-heading">
        <h4>{{ resources.nbgrader.notebook }} (Score: {{ resources.nbgrader.score | float | round(2) }} / {{ resources.nbgrader.max_score | float | round(2) }}{% if resources.nbgrader.mh_pending %}; {{ resources.nbgrader.mh_pending }} written part(s) not graded yet{% endif %})</h4>
        <div id="toc">
          <ol>
          {% for cell in nb.cells %}
            {% if cell.metadata.nbgrader and cell.metadata.nbgrader.grade and not cell.metadata.nbgrader.solution %}
            <li><a href="#{{ cell.metadata.nbgrader.grade_id }}">Test cell</a> {{ mh_toc_score(cell) }}</li>
            {% elif cell.cell_type == "code" and cell.metadata.nbgrader and cell.metadata.nbgrader.grade %}
            <li><a href="#{{ cell.metadata.nbgrader.grade_id }}">Coding free-response</a> {{ mh_toc_score(cell) }}</li>
            {% elif cell.cell_type == "markdown" and cell.metadata.nbgrader and cell.metadata.nbgrader.grade %}
            <li><a href="#{{ cell.metadata.nbgrader.grade_id }}">Written response</a> {{ mh_toc_score(cell) }}</li>
            {% elif cell.cell_type == "markdown" and cell.metadata.nbgrader and cell.metadata.nbgrader.task %}
            <li><a href="#{{ cell.metadata.nbgrader.grade_id }}">Task</a> {{ mh_toc_score(cell) }}</li>
            {% endif %}
            {% if cell.metadata.nbgrader and cell.metadata.nbgrader.comment %}
            <li><a href="#comment-{{ cell.metadata.nbgrader.grade_id }}">Comment</a></li>
            {% endif %}
          {% endfor %}
          {% if resources.nbgrader.late_penalty > 0 %}
            <li class="late-penalty">Late submission penalty (Score: -{{ resources.nbgrader.late_penalty | float | round(2) }})</li>
          {% endif %}
          </ol>
        </div>
      </div>
      <div class="panel-body">
        <div id="notebook" class="border-box-sizing">
          <div class="container" id="notebook-container">
            {{ super() }}
          </div>
        </div>
      </div>
    </div>
  </div>
</body>
{%- endblock body %}

{% block markdowncell scoped %}
<div class="cell border-box-sizing text_cell rendered">
  {{ self.empty_in_prompt() }}
  {%- if 'nbgrader' in cell.metadata and (cell.metadata.nbgrader.solution or cell.metadata.nbgrader.grade or cell.metadata.nbgrader.task) -%}
  <div class="panel panel-primary nbgrader_cell">
    {{ mh_heading(cell) }}
    <div class="panel-body"><div class="text_cell_render border-box-sizing rendered_html">
      {{ cell.source | markdown2html | strip_files_prefix }}
    </div></div>
    {{ mh_footer(cell) }}
  </div>
  {%- else -%}
  <div class="inner_cell"><div class="text_cell_render border-box-sizing rendered_html">
    {{ cell.source | markdown2html | strip_files_prefix }}
  </div></div>
  {%- endif -%}
</div>
{% endblock markdowncell %}

{% block input %}
  {%- if 'nbgrader' in cell.metadata and (cell.metadata.nbgrader.solution or cell.metadata.nbgrader.grade) -%}
  <div class="panel panel-primary nbgrader_cell">
    {{ mh_heading(cell) }}
    <div class="panel-body"><div class="input_area">{{ cell.source | highlight_code(metadata=cell.metadata) }}</div></div>
    {{ mh_footer(cell) }}
  </div>
  {%- else -%}
  <div class="inner_cell"><div class="input_area">{{ cell.source | highlight_code(metadata=cell.metadata) }}</div></div>
  {%- endif -%}
{% endblock input %}
"""  # noqa: E501 (template lines)


def write_template(folder: Path) -> Path:
    """Write the feedback template under ``folder`` (a template base directory); return ``folder``."""
    target = Path(folder) / TEMPLATE_NAME
    target.mkdir(parents=True, exist_ok=True)
    (target / "index.html.j2").write_text(TEMPLATE, encoding="utf-8")
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
