"""What the reader sees: figures, tables, live views, widgets and bertviz views (its modules import matplotlib
and ipywidgets).

:mod:`~manyheads.viz.style` (the course's font sizes and colour-blind-safe colours),
:mod:`~manyheads.viz.plots` (static figures), :mod:`~manyheads.viz.tables` (HTML tables, number formats),
:mod:`~manyheads.viz.live` (controls + a figure or table redrawn on change, with no Output widget),
:mod:`~manyheads.viz.explorers` (live views that the book's pages compute in the reader's browser, with no kernel),
:mod:`~manyheads.viz.widgets` (the chapters' widgets), :mod:`~manyheads.viz.head_explorers` (the attention
explorers of chapters 4 and 6 and the interlude), :mod:`~manyheads.viz.attention_views` (bertviz views that
work offline, with a static fallback), :mod:`~manyheads.viz.glue` (values handed to the book's text).

Every module's public names (its ``__all__``) are handed on here, each loaded on first use: ``mh.viz.<name>``
and ``mh.<name>`` are the same object.
"""

from manyheads._public_names import hand_on as _hand_on

_NAMES, __all__, __getattr__, __dir__ = _hand_on(globals())
