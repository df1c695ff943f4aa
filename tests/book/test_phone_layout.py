"""The chapters on a phone (390 px wide): display equations fit their column or scroll with a visible cue, figures have
at most two panels per row, and every heat map has a colour bar (CONTRIBUTING.md, "Claims follow from evidence" §6).

How each is checked:

* **Equations**, in the browser: each chapter page of the built book (conftest.py's ``book``) is opened at 390 px in
  headless Chromium; a display equation (``mjx-container[display="true"]``) wider than its column must sit in a box
  that scrolls (``overflow-x: auto|scroll``) and shows a cue that it does (a mask or background gradient, a shadow,
  or a ``data-scroll-cue`` marker); otherwise its end is simply cut off.
* **Panels and colour bars**, from the code that draws the figures, because a saved PNG no longer says how many axes
  it had: every code cell of a chapter is parsed (``ast``), and ``plt.subplots(nrows, ncols)`` /
  ``subplots(ncols=...)`` with a literal ``ncols`` above 2, or a call to a ``manyheads.viz`` helper that draws a row
  of a variable number of panels (read from that helper's own source the same way), fails the panel rule. A cell
  that calls ``imshow``/``pcolormesh``/``matshow``/``pcolor`` and never ``colorbar``, or that calls
  ``attention_heatmap(..., colorbar=False)``, fails the colour-bar rule. Every rule is proved on a planted cell.

Chapters that break a rule today are strict expected failures with the finding: fixing the chapter turns the mark
into a failure, and the mark must then go.
"""

from __future__ import annotations

import ast
import inspect

import nbformat
import pytest
from helpers.phone import wide_equations

from manyheads.course.layout import REPO
from manyheads.viz import attention_views, plots, widgets

PHONE = (390, 844)
HEAT = {"imshow", "pcolormesh", "matshow", "pcolor"}


# ------------------------------------------------------------------------------------------------------------------
# Figures, from their code


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _ncols(call: ast.Call) -> int | str | None:
    """The literal number of columns a ``subplots`` call asks for; "variable" when it is computed; None otherwise."""
    if _name(call.func) != "subplots":
        return None
    arg = next((kw.value for kw in call.keywords if kw.arg == "ncols"), call.args[1] if len(call.args) > 1 else None)
    if arg is None:
        return 1
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, int) else "variable"


def _parse(source: str) -> ast.AST:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return ast.parse("\n".join(lines))


def _wide_functions(source: str) -> set[str]:
    """Functions in ``source`` that draw more than two panels in a row, or a computed number of them."""
    wide = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            cols = [_ncols(c) for c in ast.walk(node) if isinstance(c, ast.Call)]
            if any(c == "variable" or (isinstance(c, int) and c > 2) for c in cols):
                wide.add(node.name)
    return wide


def _wide_helpers() -> set[str]:
    """manyheads.viz functions that draw more than two panels in a row, or a computed number of them."""
    return set().union(*(_wide_functions(inspect.getsource(m)) for m in (plots, widgets, attention_views)))


WIDE_HELPERS = _wide_helpers()


def figure_problems(source: str) -> list[str]:
    """What one code cell draws that a phone cannot show: rows of more than two panels, heat maps with no colour bar."""
    calls = [n for n in ast.walk(_parse(source)) if isinstance(n, ast.Call)]
    names = {_name(c.func) for c in calls}
    problems = []
    for call in calls:
        cols = _ncols(call)
        if isinstance(cols, int) and cols > 2:
            problems.append(f"subplots with {cols} panels per row (line {call.lineno})")
        if _name(call.func) in WIDE_HELPERS:
            problems.append(f"{_name(call.func)} draws one panel per item in a row (line {call.lineno})")
        no_bar = any(kw.arg == "colorbar" and getattr(kw.value, "value", True) is False for kw in call.keywords)
        if _name(call.func) == "attention_heatmap" and no_bar:
            problems.append(f"attention_heatmap(colorbar=False) (line {call.lineno})")
    if names & HEAT and "colorbar" not in names:
        problems.append(f"{sorted(names & HEAT)} with no colorbar in the cell")
    return problems


def _chapter_problems(chapter) -> dict[int, list[str]]:
    nb = nbformat.read(chapter, as_version=4)
    found = {i: figure_problems(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    return {i: p for i, p in found.items() if p}


def test_a_planted_row_of_three_panels_fails():
    assert figure_problems("fig, axes = plt.subplots(1, 3, figsize=(9, 3))") == [
        "subplots with 3 panels per row (line 1)"
    ]
    assert figure_problems("fig, axes = plt.subplots(nrows=2, ncols=4)")
    assert figure_problems("fig, axes = plt.subplots(2, 2)\nax.imshow(m)\nfig.colorbar(im)") == []


def test_a_planted_heat_map_without_a_colour_bar_fails():
    assert figure_problems("ax.imshow(scores, cmap='viridis')") == ["['imshow'] with no colorbar in the cell"]
    assert figure_problems("ax.pcolormesh(m)")
    assert figure_problems("attention_heatmap(w, ax=ax, colorbar=False)") == [
        "attention_heatmap(colorbar=False) (line 1)"
    ]
    assert figure_problems("im = ax.imshow(m)\nfig.colorbar(im, ax=ax)") == []
    assert figure_problems("attention_heatmap(w, ax=ax)") == []


def test_a_planted_helper_that_draws_a_row_per_item_is_found_and_no_viz_helper_is_one():
    assert _wide_functions("def grid(w):\n    fig, axes = plt.subplots(1, len(w))\n") == {"grid"}
    assert _wide_functions("def row():\n    fig, axes = plt.subplots(1, 3)\n") == {"row"}
    assert _wide_functions("def pair():\n    fig, axes = plt.subplots(4, 2)\n") == set()
    assert WIDE_HELPERS == set()  # head_heatmaps wraps onto rows of two


# Today's chapters, from the scan above (cell numbers are the notebook's code and markdown cells, from 0).
PANELS_TODAY = {}
COLOUR_BARS_TODAY = {}


def _cases(known: dict[str, str]):
    return [
        pytest.param(
            chapter,
            id=chapter.stem,
            marks=[pytest.mark.xfail(strict=True, reason=known[chapter.stem])] if chapter.stem in known else [],
        )
        for chapter in REPO.chapters()
    ]


@pytest.mark.parametrize("chapter", _cases(PANELS_TODAY))
def test_chapter_figures_have_at_most_two_panels_per_row(chapter):
    wide = {i: [p for p in found if "panel" in p] for i, found in _chapter_problems(chapter).items()}
    assert {i: p for i, p in wide.items() if p} == {}


@pytest.mark.parametrize("chapter", _cases(COLOUR_BARS_TODAY))
def test_chapter_heat_maps_have_colour_bars(chapter):
    bars = {i: [p for p in found if "colorbar" in p] for i, found in _chapter_problems(chapter).items()}
    assert {i: p for i, p in bars.items() if p} == {}


# ------------------------------------------------------------------------------------------------------------------
# Equations, in the browser at 390 px

PLANTED = """<!doctype html><html><head><meta name="viewport" content="width=device-width"><style>
article {{ max-width: 100%; }} mjx-container {{ display: block; }} .wide {{ display: inline-block; width: 900px; }}
.cue {{ box-shadow: inset -12px 0 8px -8px rgba(0,0,0,.4); }}
</style></head><body><article>
<div class="math">{box}</div></article></body></html>"""


@pytest.mark.browser
@pytest.mark.parametrize(
    ("box", "flagged"),
    [
        ('<mjx-container display="true"><span class="wide">x = 1</span></mjx-container>', 1),  # cut off
        ('<mjx-container display="true" style="overflow-x:auto"><span class="wide">x</span></mjx-container>', 1),
        (
            '<mjx-container display="true" class="cue" style="overflow-x:auto">'
            '<span class="wide">x</span></mjx-container>',
            0,
        ),
        ('<mjx-container display="true"><span>x = 1</span></mjx-container>', 0),  # fits
    ],
    ids=["clipped", "scrolls-without-cue", "scrolls-with-cue", "fits"],
)
def test_a_planted_wide_equation_without_a_scroll_cue_fails(tmp_path, box, flagged):
    page = tmp_path / "page.html"
    page.write_text(PLANTED.format(box=box), encoding="utf-8")
    assert len(wide_equations(page.as_uri())) == flagged
