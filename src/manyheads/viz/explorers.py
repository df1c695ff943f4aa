"""Explorers that respond with and without a kernel (issue 27): chapters 3 and 7's head-budget calculator, and the
way to write every later one. Figure explorers (chapters 1, 2, 4, 5 and 6 and the interlude) are the same box with
stored states instead of a port: :func:`figure_explorer`, described in its section below; the attention explorers'
state functions live in :mod:`manyheads.viz.head_explorers`.

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

__all__ = ["explorer_widget", "figure_explorer", "heatmap_panel", "panels_figure"]

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
# (:func:`panels_figure` reads it: bar, scatter, heatmap and line panels, numbers rounded, heatmaps as uint8 levels
# in base64), computed for every point of the
# controls' grid when the widget is made and saved with it in a hidden HTML widget (class ``mh-explorer-states``).
# Under a kernel the picture is matplotlib's drawing of the state for the controls' values, as for any figure_widget;
# on the book's pages ``explorers.js`` draws the stored state for the controls' values as SVG (``drawPanels``).
# A float slider's grid is min, min + step, ..., max (at most MAX_GRID values), an integer slider's the same (a layer,
# a head, a training step: its own values, at most MAX_DISCRETE_GRID), a selection slider's and a dropdown's their
# options. Every combination is stored, so the product of the grids' sizes is what a page pays for.

MAX_GRID = 21  # values per float slider (issue 27: "continuous sliders on a stated grid of at most 21 steps")
# An integer slider, a selection slider or a dropdown has a discrete grid, its own values (a layer, a head, a
# sentence): no 21-step limit, at most MAX_DISCRETE_GRID values (SmolLM2 has 30 layers).
MAX_DISCRETE_GRID = 32
MAX_STATES_BYTES = 2_000_000  # what one explorer may add to its page (the page's budget is 3 MB)
# The controls a stored-state explorer reads, by the kind explorers.js reads them with: a float or integer slider by
# its readout (nearest grid value), a selection slider by its readout (the option's label), a dropdown by position.
STATE_KINDS: dict[str, tuple[type, ...]] = {
    "float": (widgets.FloatSlider,),
    "slider": (widgets.IntSlider,),
    "selection": (widgets.SelectionSlider,),
    "choice": (widgets.Dropdown,),
}


def _state_kind(name: str, control: widgets.ValueWidget) -> str:
    for kind, types in STATE_KINDS.items():
        if isinstance(control, types):
            return kind
    readable = ", ".join(t.__name__ for types in STATE_KINDS.values() for t in types)
    raise TypeError(f"control {name!r} is a {type(control).__name__}; a stored-state explorer reads {readable}")


def _option_values(control: widgets.ValueWidget) -> list:
    options = control.options
    return [value for _label, value in options] if isinstance(options[0], tuple) else list(options)


def _option_labels(control: widgets.ValueWidget) -> list[str]:
    return [str(label) for label in control._options_labels]


def control_grid(name: str, control: widgets.ValueWidget) -> list:
    """The values a control of a stored-state explorer can take, in order (float slider: min to max by step, at most
    MAX_GRID values; integer slider: min to max by step; selection slider and dropdown: their options; these three
    at most MAX_DISCRETE_GRID values)."""
    kind = _state_kind(name, control)
    if kind == "float":
        count = round((control.max - control.min) / control.step) + 1
        grid = [round(control.min + i * control.step, 10) for i in range(count)]
        if abs(grid[-1] - control.max) > 1e-9 or not any(abs(control.value - v) < 1e-9 for v in grid):
            raise ValueError(
                f"slider {name!r}: its max ({control.max}) and value ({control.value}) must lie on the grid "
                f"{control.min}, {control.min} + {control.step}, ..."
            )
        if len(grid) > MAX_GRID:
            raise ValueError(f"slider {name!r} has {len(grid)} values; a stored-state explorer allows {MAX_GRID}")
        return grid
    if kind == "slider":
        grid = list(range(control.min, control.max + 1, control.step))
        if grid[-1] != control.max or control.value not in grid:
            raise ValueError(
                f"slider {name!r}: its max ({control.max}) and value ({control.value}) must lie on the grid "
                f"{control.min}, {control.min} + {control.step}, ..."
            )
    else:
        grid = _option_values(control)
    if len(grid) > MAX_DISCRETE_GRID:
        raise ValueError(f"control {name!r} has {len(grid)} values; a stored-state explorer allows {MAX_DISCRETE_GRID}")
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
        "labels": {
            a: _option_labels(c)
            for a, c in controls.items()
            if isinstance(c, (widgets.Dropdown, widgets.SelectionSlider))
        },
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
        kind = _state_kind(argument, control)
        for css in ("mh-control", f"mh-control--{argument}", f"mh-kind--{kind}"):
            control.add_class(css)
    image.add_class("mh-explorer-view")
    message.add_class("mh-explorer-message")
    box.children = (*inputs, stored, image, alt, message)  # view, words and error line last, as in figure_widget
    box.add_class("mh-explorer")
    box.add_class(f"mh-explorer--{name}")
    return box


# The colour maps a heatmap panel names, as the stops explorers.js interpolates between (matplotlib's own maps sampled
# at nine points), so that the kernel's picture and the page's drawing have the same colours.
COLOUR_MAPS = {
    "viridis": ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"],
    "Blues": ["#f7fbff", "#deebf7", "#c6dbef", "#9dcae1", "#6aaed6", "#4191c6", "#2070b4", "#08509b", "#08306b"],
}


def quantised(values: Any, vmax: float = 1.0, vmin: float = 0.0) -> str:
    """A (rows, cols) array of numbers in [vmin, vmax] as uint8 levels (0-255, ``round(255 (v - vmin) / (vmax -
    vmin))``, clipped), row-major, base64: what a ``heatmap`` panel stores (one byte a cell, four characters per
    three cells)."""
    import base64

    import numpy as np

    array = np.asarray(values, dtype=np.float64)
    span = (vmax - vmin) or 1.0
    levels = np.rint(np.clip((array - vmin) / span, 0.0, 1.0) * 255).astype(np.uint8)
    return base64.b64encode(levels.tobytes()).decode("ascii")


def dequantised(panel: Mapping[str, Any]) -> Any:
    """A ``heatmap`` panel's values as floats (rows, cols): vmin + level / 255 × (vmax - vmin), what both drawings
    show."""
    import base64

    import numpy as np

    levels = np.frombuffer(base64.b64decode(panel["values"]), dtype=np.uint8).astype(np.float64)
    vmin, vmax = panel.get("vmin", 0.0), panel.get("vmax", 1.0)
    return vmin + levels.reshape(panel["shape"]) / 255 * ((vmax - vmin) or 1.0)


def heatmap_panel(values: Any, vmax: float = 1.0, cmap: str = "viridis", vmin: float = 0.0, **options: Any) -> dict:
    """A ``heatmap`` panel for :func:`panels_figure` (and explorers.js) of a (rows, cols) array in [vmin, vmax], stored
    as uint8 levels (:func:`quantised`). ``options``: ``xticks`` / ``yticks`` (labels), ``rotate`` (x labels,
    degrees), ``boxes`` and ``crosses`` ([row, col] cells outlined or crossed out), ``colorbar`` (its label),
    ``title``, ``xlabel``, ``ylabel``."""
    import numpy as np

    if cmap not in COLOUR_MAPS:
        raise ValueError(f"cmap {cmap!r} is not one of {list(COLOUR_MAPS)}")
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"a heatmap's values must be (rows, cols), got shape {array.shape}")
    limits = {"vmax": vmax} if vmin == 0 else {"vmin": vmin, "vmax": vmax}
    return {
        "kind": "heatmap",
        "shape": list(array.shape),
        "values": quantised(array, vmax, vmin),
        **limits,
        "cmap": cmap,
        **options,
    }


def _layout(spec: Mapping[str, Any]) -> list[list[int]]:
    """The panels' places: ``spec["columns"]`` panels a row (default: all in one), a panel with ``span`` k taking k."""
    columns = spec.get("columns", len(spec["panels"]))
    rows: list[list[int]] = [[]]
    for index, panel in enumerate(spec["panels"]):
        span = min(panel.get("span", 1), columns)
        if len(rows[-1]) + span > columns:
            rows.append([])
        rows[-1].extend([index] * span)
    for row in rows:
        row.extend([-1] * (columns - len(row)))  # an empty place, left blank
    return rows


def panels_figure(spec: Mapping[str, Any]) -> Any:
    """The matplotlib figure of a state: ``spec["size"]`` (inches) and ``spec["panels"]``, side by side (or
    ``spec["columns"]`` a row, a panel's ``span`` taking several), each a
    ``bar`` (``x`` labels, ``y`` heights, ``colors``, optional ``notes`` [x, y, text], ``rotate`` the tick labels),
    a ``scatter`` (``points`` [[x, y]], ``colors``, ``labels``, ``rises`` (points above each label), equal
    aspect, axes through 0), a ``heatmap`` (:func:`heatmap_panel`: uint8 levels, tick labels, boxed and crossed
    cells, a colour bar) or a ``line`` (``series`` of {x, y, color, label, width, marker}, optional ``vline`` (x),
    ``point`` [x, y] circled, legend below), with ``title``, ``xlabel``, ``ylabel``, ``ylim``. explorers.js draws
    the same as SVG."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap

    panels = spec["panels"]
    mosaic = _layout(spec)
    fig, named = plt.subplot_mosaic(mosaic, figsize=tuple(spec["size"]), layout="constrained", empty_sentinel=-1)
    for index, panel in enumerate(panels):
        ax = named[index]
        if panel["kind"] == "bar":
            positions = range(len(panel["x"]))
            ax.bar(positions, panel["y"], color=panel["colors"])
            rotate = panel.get("rotate", 0)
            ax.set_xticks(positions, panel["x"], rotation=rotate, ha="right" if rotate else "center", fontsize="small")
            for x, y, text in panel.get("notes", []):
                ax.text(x, y, text, ha="center", fontsize="medium")
        elif panel["kind"] == "scatter":
            ax.axhline(0, color="0.8", lw=0.8)
            ax.axvline(0, color="0.8", lw=0.8)
            for (px, py), colour, label, rise in zip(panel["points"], panel["colors"], panel["labels"], panel["rises"]):
                ax.scatter(px, py, color=colour, s=30)
                ax.annotate(label, (px, py), textcoords="offset points", xytext=(4, 4 + rise), fontsize="small")
            ax.margins(0.2)
            ax.set_aspect("equal", adjustable="datalim")
        elif panel["kind"] == "heatmap":
            cmap = LinearSegmentedColormap.from_list(panel["cmap"], COLOUR_MAPS[panel["cmap"]])
            image = ax.imshow(
                dequantised(panel),
                cmap=cmap,
                vmin=panel.get("vmin", 0.0),
                vmax=panel.get("vmax", 1.0),
                aspect=panel.get("aspect", "equal"),
            )
            rows, cols = panel["shape"]
            rotate = panel.get("rotate", 0)
            ax.set_xticks(
                range(cols),
                panel.get("xticks", range(cols)),
                rotation=rotate,
                ha="right" if rotate else "center",
                fontsize="small",
            )
            ax.set_yticks(range(rows), panel.get("yticks", range(rows)), fontsize="small")
            for r, c in panel.get("boxes", []):
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="white", lw=2))
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="black", lw=0.8))
            if panel.get("crosses"):
                rs, cs = zip(*panel["crosses"])
                ax.scatter(cs, rs, marker="x", s=60, color="white", linewidths=2.2)
                ax.scatter(cs, rs, marker="x", s=60, color="black", linewidths=1.0)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=panel.get("colorbar", ""))
        else:  # line
            for series in panel["series"]:
                ax.plot(
                    series["x"],
                    series["y"],
                    color=series["color"],
                    lw=series.get("width", 1.5),
                    marker="o" if series.get("marker") else None,
                    ms=3,
                    label=series.get("label"),
                )
            if "vline" in panel:
                ax.axvline(panel["vline"], color="black", lw=1)
            if "point" in panel:
                ax.scatter(*panel["point"], s=80, facecolors="none", edgecolors="black", zorder=3)
            ax.grid(alpha=0.3)
            if any(series.get("label") for series in panel["series"]):
                # below the axes, never over the curves (CONTRIBUTING.md, "Figures read on a phone")
                ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2, frameon=False)
        if "ylim" in panel:
            ax.set_ylim(*panel["ylim"])
        ax.set_xlabel(panel.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""))
        ax.set_title(panel.get("title", ""), fontsize="medium")
    return fig
