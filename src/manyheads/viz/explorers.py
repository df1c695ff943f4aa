"""Explorers that respond with and without a kernel (issue 27): chapters 3 and 7's head-budget calculator, and the
way to write every later one.

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

from collections.abc import Callable

import ipywidgets as widgets

from manyheads.viz.live import html_widget

__all__ = ["explorer_widget"]

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
