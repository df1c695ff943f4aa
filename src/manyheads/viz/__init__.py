"""What the reader sees: figures, tables, live views, widgets and bertviz views (imports matplotlib and ipywidgets).

:mod:`~manyheads.viz.style` (the course's font sizes and colour-blind-safe colours),
:mod:`~manyheads.viz.plots` (static figures), :mod:`~manyheads.viz.tables` (HTML tables, number formats),
:mod:`~manyheads.viz.live` (controls + a figure or table redrawn on change, with no Output widget),
:mod:`~manyheads.viz.widgets` (the chapters' widgets), :mod:`~manyheads.viz.attention_views` (bertviz views that
work offline, with a static fallback), :mod:`~manyheads.viz.glue` (values handed to the book's text).
"""

from manyheads.viz.attention_views import head_view, localize, model_view, static_head_view
from manyheads.viz.glue import glue
from manyheads.viz.live import figure_widget, html_widget
from manyheads.viz.plots import annotate_cells, attention_heatmap, head_heatmaps, learning_curves
from manyheads.viz.style import COLOURBLIND_SAFE, use_course_style
from manyheads.viz.tables import format_bytes, format_count, html_table, mean_sd, show_table
from manyheads.viz.widgets import (
    head_budget_html,
    head_budget_widget,
    one_softmax_widget,
    plane_projection_widget,
    pruning_explorer,
)

__all__ = [
    "COLOURBLIND_SAFE",
    "use_course_style",
    "annotate_cells",
    "attention_heatmap",
    "glue",
    "head_heatmaps",
    "learning_curves",
    "html_table",
    "show_table",
    "mean_sd",
    "format_count",
    "format_bytes",
    "figure_widget",
    "html_widget",
    "one_softmax_widget",
    "plane_projection_widget",
    "head_budget_html",
    "head_budget_widget",
    "pruning_explorer",
    "head_view",
    "model_view",
    "static_head_view",
    "localize",
]
