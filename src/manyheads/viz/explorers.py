"""Explorers that respond with and without a kernel (issue 27): chapters 3 and 7's head-budget calculator, and the
way to write every later one. Figure explorers (chapters 1 and 2) are the same box with stored states instead of a
port: :func:`figure_explorer`, described in its section below.

:func:`explorer_widget` is a :func:`manyheads.viz.live.html_widget` (controls above an HTML view, then an error line)
whose parts carry class names that the built book's ``book_static/explorers.js`` looks for. Under a kernel (Jupyter,
Colab with ipywidgets 7.7.1, or ipywidgets 8) Python renders the view on every change, as for any live view, and the
page script is not there. On the book's pages no kernel runs: the widget manager draws the saved state (the controls
and the first view), and when the reader changes a control, ``explorers.js`` reads every control of that explorer
and writes into the view what the JavaScript registered under the explorer's name returns for those values
(``window.manyheadsExplorers[name](values)``, an HTML string). That function is a port of ``render``: for the
head-budget calculator, ``book_static/head_budget.js`` ports :func:`manyheads.costs.head_budget` and
:func:`manyheads.viz.widgets.head_budget_html`, and ``tests/book/test_head_budget_port.py`` compares the two on
random configurations in Chromium.

The class names (a widget's ``_dom_classes``, saved with its state in both ipywidgets 7 and 8):

* the box: ``mh-explorer`` and ``mh-explorer--<name>``;
* each control: ``mh-control``, ``mh-control--<argument of render>`` and ``mh-kind--<kind>``, the way the page reads
  its value (``int``: an integer box, read as the widget does, with ``parseInt`` after it clamps to its bounds);
* the view ``mh-explorer-view``; the error line ``mh-explorer-message``.

To add an explorer: write ``render`` in Python, its port in a file of ``book_static/`` that registers it under the
explorer's name (listed in ``_config.yml``'s ``html_js_files``), and a test that compares the two; a control of
another kind needs its reading in ``explorers.js`` first (:data:`CONTROL_KINDS` lists what the page can read).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from manyheads.viz.live import figure_widget, html_widget

__all__ = ["explorer_widget", "figure_explorer", "panels_figure"]

# The controls explorers.js can read in a page, by kind (a subclass counts: BoundedIntText is an IntText).
CONTROL_KINDS: dict[str, tuple[type, ...]] = {"int": (widgets.IntText, widgets.BoundedIntText)}


def _kind(name: str, control: object) -> str:
    for kind, types in CONTROL_KINDS.items():
        if isinstance(control, types):
            return kind
    readable = ", ".join(t.__name__ for types in CONTROL_KINDS.values() for t in types)
    raise TypeError(
        f"control {name!r} is a {type(control).__name__}, which the book's explorers.js cannot read yet "
        f"(it reads {readable}): add its reading there and to CONTROL_KINDS first"
    )


def explorer_widget(name: str, render: Callable[..., str], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Controls (keyword = argument of ``render``) above the HTML ``render(**values)`` returns, re-rendered on change
    by Python under a kernel and, on the book's pages, by the JavaScript port registered as ``name`` (module
    docstring). ``children``: the controls in the order given, the view, the error line (as html_widget)."""
    if not name.isidentifier():
        raise ValueError(f"an explorer's name is a JavaScript-safe identifier such as 'head_budget', got {name!r}")
    kinds = {argument: _kind(argument, control) for argument, control in controls.items()}
    box = html_widget(render, **controls)
    *inputs, view, message = box.children
    for (argument, kind), control in zip(kinds.items(), inputs):
        for css in ("mh-control", f"mh-control--{argument}", f"mh-kind--{kind}"):
            control.add_class(css)
    view.add_class("mh-explorer-view")
    message.add_class("mh-explorer-message")
    box.add_class("mh-explorer")
    box.add_class(f"mh-explorer--{name}")
    return box


# ---------------------------------------------------------------------------------------------------------------------
# Figure explorers with stored states: the same way, for figures whose controls have few values.
#
# A figure explorer's picture comes from ``state(**fixed, **values)``, a small JSON-able description of the figure
# (:func:`panels_figure` reads it: bar and scatter panels, numbers rounded), computed for every point of the
# controls' grid when the widget is made and saved with it in a hidden HTML widget (class ``mh-explorer-states``).
# Under a kernel the picture is matplotlib's drawing of the state for the controls' values, as for any figure_widget;
# on the book's pages ``explorers.js`` draws the stored state for the controls' values as SVG (``drawPanels``).
# A float slider's grid is min, min + step, ..., max (at most MAX_GRID values), a dropdown's grid its options.

MAX_GRID = 21  # values per control (issue 27: "continuous sliders on a stated grid of at most 21 steps")
MAX_STATES_BYTES = 2_000_000  # what one explorer may add to its page (the page's budget is 3 MB)
STATE_KINDS: dict[str, tuple[type, ...]] = {"float": (widgets.FloatSlider,), "choice": (widgets.Dropdown,)}


def control_grid(name: str, control: widgets.ValueWidget) -> list:
    """The values a control of a stored-state explorer can take, in order (float slider: min to max by step)."""
    if isinstance(control, widgets.FloatSlider):
        count = round((control.max - control.min) / control.step) + 1
        grid = [round(control.min + i * control.step, 10) for i in range(count)]
        if abs(grid[-1] - control.max) > 1e-9 or not any(abs(control.value - v) < 1e-9 for v in grid):
            raise ValueError(
                f"slider {name!r}: its max ({control.max}) and value ({control.value}) must lie on the grid "
                f"{control.min}, {control.min} + {control.step}, ..."
            )
    elif isinstance(control, widgets.Dropdown):
        grid = (
            [value for _label, value in control.options]
            if isinstance(control.options[0], tuple)
            else list(control.options)
        )
    else:
        readable = ", ".join(t.__name__ for types in STATE_KINDS.values() for t in types)
        raise TypeError(f"control {name!r} is a {type(control).__name__}; a stored-state explorer reads {readable}")
    if len(grid) > MAX_GRID:
        raise ValueError(f"control {name!r} has {len(grid)} values; a stored-state explorer allows {MAX_GRID}")
    return grid


def _distance(a: Any, b: Any) -> float:
    return abs(a - b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else float(a != b)


def state_key(indices: Sequence[int]) -> str:
    """The key of a state in the stored table: the controls' grid positions, comma-separated ("3,0,5")."""
    return ",".join(str(i) for i in indices)


def stored_states(
    state: Callable[..., dict], fixed: Mapping[str, Any], grids: Mapping[str, Sequence]
) -> dict[str, dict]:
    """``state(**fixed, **values)`` for every point of the grids, by :func:`state_key`."""
    names = list(grids)
    table = {}
    for indices in itertools.product(*(range(len(grids[n])) for n in names)):
        values = {n: grids[n][i] for n, i in zip(names, indices)}
        table[state_key(indices)] = state(**fixed, **values)
    return table


def figure_explorer(
    name: str,
    state: Callable[..., dict],
    fixed: Mapping[str, Any] | None = None,
    dpi: int = 100,
    **controls: widgets.ValueWidget,
) -> widgets.VBox:
    """A figure_widget drawing :func:`panels_figure` of ``state(**fixed, **values)``, whose states on the controls'
    grids are saved with it for the book's pages (section comment above). ``state`` is importable (``module.name``)
    and ``fixed`` JSON-able, so a test can recompute any stored state. ``children``: the controls, the stored states
    (hidden), the image, the figure in words, the error line."""
    if not name.isidentifier():
        raise ValueError(f"an explorer's name is a JavaScript-safe identifier such as 'one_softmax', got {name!r}")
    fixed = dict(fixed or {})
    grids = {argument: control_grid(argument, control) for argument, control in controls.items()}
    table = stored_states(state, fixed, grids)
    data = {
        "function": f"{state.__module__}.{state.__qualname__}",
        "fixed": fixed,
        "controls": list(grids),
        "grids": grids,
        "labels": {a: [str(o[0]) for o in c.options] for a, c in controls.items() if isinstance(c, widgets.Dropdown)},
        "initial": state_key(
            [min(range(len(g)), key=lambda i, g=g, a=a: _distance(g[i], controls[a].value)) for a, g in grids.items()]
        ),
        "states": table,
    }
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    if len(text) > MAX_STATES_BYTES:
        raise ValueError(f"explorer {name!r} stores {len(text):,} bytes of states; at most {MAX_STATES_BYTES:,}")
    box = figure_widget(lambda **values: panels_figure(state(**fixed, **values)), dpi=dpi, **controls)
    # inert data in the page (a script of type application/json never runs); "<" escaped so no "</script>" ends it
    stored = widgets.HTML(
        '<script type="application/json" class="mh-states-data">' + text.replace("<", "\\u003c") + "</script>",
        layout=widgets.Layout(display="none"),
    )
    stored.add_class("mh-explorer-states")
    *inputs, image, alt, message = box.children
    for argument, control in zip(grids, inputs):
        kind = "float" if isinstance(control, widgets.FloatSlider) else "choice"
        for css in ("mh-control", f"mh-control--{argument}", f"mh-kind--{kind}"):
            control.add_class(css)
    image.add_class("mh-explorer-view")
    message.add_class("mh-explorer-message")
    box.children = (*inputs, stored, image, alt, message)  # view, words and error line last, as in figure_widget
    box.add_class("mh-explorer")
    box.add_class(f"mh-explorer--{name}")
    return box


def panels_figure(spec: Mapping[str, Any]) -> Any:
    """The matplotlib figure of a state: ``spec["size"]`` (inches) and ``spec["panels"]``, side by side, each a
    ``bar`` (``x`` labels, ``y`` heights, ``colors``, optional ``notes`` [x, y, text], ``rotate`` the tick labels)
    or a ``scatter`` (``points`` [[x, y]], ``colors``, ``labels``, ``rises`` (points above each label), equal
    aspect, axes through 0), with ``title``, ``xlabel``, ``ylabel``, ``ylim``. explorers.js draws the same as SVG."""
    import matplotlib.pyplot as plt

    panels = spec["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=tuple(spec["size"]), layout="constrained", squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel["kind"] == "bar":
            positions = range(len(panel["x"]))
            ax.bar(positions, panel["y"], color=panel["colors"])
            rotate = panel.get("rotate", 0)
            ax.set_xticks(positions, panel["x"], rotation=rotate, ha="right" if rotate else "center", fontsize="small")
            for x, y, text in panel.get("notes", []):
                ax.text(x, y, text, ha="center", fontsize="medium")
        else:
            ax.axhline(0, color="0.8", lw=0.8)
            ax.axvline(0, color="0.8", lw=0.8)
            for (px, py), colour, label, rise in zip(panel["points"], panel["colors"], panel["labels"], panel["rises"]):
                ax.scatter(px, py, color=colour, s=30)
                ax.annotate(label, (px, py), textcoords="offset points", xytext=(4, 4 + rise), fontsize="small")
            ax.margins(0.2)
            ax.set_aspect("equal", adjustable="datalim")
        if "ylim" in panel:
            ax.set_ylim(*panel["ylim"])
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.set_title(panel.get("title", ""), fontsize="medium")
    return fig
