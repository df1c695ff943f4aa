"""Live views for the chapters: controls plus a figure (or an HTML table) redrawn whenever a control changes.

Why not ``ipywidgets.interact``: ``interact`` prints into an Output widget. When a notebook runs headless (the book
build, the tests, nbgrader), nbclient imitates the browser's Output widget by sending its state back to the kernel
on the shell channel while another task waits on that same channel for the cell's reply; now and then that wait
never wakes up and the whole build hangs with an idle kernel (jupyter/nbclient#312, open). The views here put the
picture into an ``Image`` widget's value (a PNG) and the table into an ``HTML`` widget's value instead, so no
Output widget exists and nothing is sent back. The widgets' state is saved in the executed notebook, so the built
book shows the controls and the first picture without a kernel; in Jupyter or Colab the picture follows the controls.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

__all__ = ["figure_widget", "html_widget"]


def _checked(controls: dict[str, Any]) -> dict[str, widgets.ValueWidget]:
    if not controls:
        raise TypeError("give at least one control, e.g. gap=widgets.FloatSlider(...)")
    for name, control in controls.items():
        if not isinstance(control, widgets.ValueWidget):
            raise TypeError(
                f"control {name!r} must be an ipywidgets control with a value (IntSlider, Dropdown, ...), "
                f"got {type(control).__name__}"
            )
        style = getattr(control, "style", None)
        if style is not None and "description_width" in style.keys and not style.description_width:
            style.description_width = "initial"  # the whole label: the default width cuts "layer (0-based)" short
    return controls


def _error_html(exc: Exception) -> str:
    return (
        f'<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">'
        f"<b>Could not draw this setting.</b> {html.escape(f'{type(exc).__name__}: {exc}')}</div>"
    )


def _live(
    controls: dict[str, widgets.ValueWidget],
    view: widgets.DOMWidget,
    show: Callable[[dict[str, Any]], None],
    message: widgets.HTML,
    extra: tuple[widgets.DOMWidget, ...] = (),
) -> widgets.VBox:
    def refresh(_change: Any = None) -> None:
        values = {name: control.value for name, control in controls.items()}
        try:
            show(values)
            message.value = ""
        except Exception as exc:  # the reader typed a combination the function rejects: say so under the controls
            message.value = _error_html(exc)

    for control in controls.values():
        control.observe(refresh, names="value")
    refresh()
    return widgets.VBox([*controls.values(), view, *extra, message])


# An Image widget has no alt text, and a tooltip on it stops ipywidgets 8's page renderer from drawing it at all
# (DOMWidgetView.updateTooltip reads a "description" the Image model lacks). So the words go in an HTML widget under
# the image, visually hidden; book_static/widgets_offline.js moves them into the image's alt attribute.
ALT_CLASS = "mh-figure-alt"
VISUALLY_HIDDEN = "position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap"


def describe_figure(fig: Any) -> str:
    """A text alternative for a figure, from its own titles and axis labels (what a screen reader says for it)."""
    parts = []
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        words = [ax.get_title() or ax.get_title(loc="left")]
        if ax.get_xlabel():
            words.append(f"x: {ax.get_xlabel()}")
        if ax.get_ylabel():
            words.append(f"y: {ax.get_ylabel()}")
        words = [w for w in words if w]
        if words:
            parts.append(", ".join(words))
    panels = "; ".join(parts)
    if not title and not panels:
        return "A figure that the controls above redraw."
    return f"Figure{': ' + title if title else ''}{' (' + panels + ')' if panels else ''}."


def figure_widget(draw: Callable[..., Any], dpi: int = 100, **controls: widgets.ValueWidget) -> widgets.VBox:
    """Controls (keyword = argument of ``draw``) above the figure ``draw(**values)`` returns, redrawn on change.

    ``draw`` returns a matplotlib Figure; it is rendered to PNG and closed (so the notebook does not show it a second
    time). ``children`` are the controls in the order given, then the image, then the figure in words
    (:func:`describe_figure`, visually hidden: screen readers read it, and the book's pages make it the image's alt
    text), then an error line (empty unless ``draw`` raised).
    """
    import matplotlib.pyplot as plt

    controls = _checked(controls)
    image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
    alt = widgets.HTML()  # the figure in words, for screen readers (Image has no alt text of its own)
    message = widgets.HTML()

    def show(values: dict[str, Any]) -> None:
        before = set(plt.get_fignums())
        try:
            fig = draw(**values)
            if not hasattr(fig, "savefig"):
                raise TypeError(
                    f"{getattr(draw, '__name__', 'draw')} must return a matplotlib Figure, got {type(fig).__name__}"
                )
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=dpi)
            image.value = buffer.getvalue()
            words = html.escape(describe_figure(fig))
            alt.value = f'<span class="{ALT_CLASS}" style="{VISUALLY_HIDDEN}">{words}</span>'
        finally:  # also the figures of a draw that failed half-way, which the notebook would otherwise show
            for number in set(plt.get_fignums()) - before:
                plt.close(number)

    return _live(controls, image, show, message, extra=(alt,))


def html_widget(render: Callable[..., str], **controls: widgets.ValueWidget) -> widgets.VBox:
    """Controls above the HTML ``render(**values)`` returns, re-rendered on change (children as in figure_widget)."""
    controls = _checked(controls)
    view = widgets.HTML()
    message = widgets.HTML()

    def show(values: dict[str, Any]) -> None:
        view.value = render(**values)

    return _live(controls, view, show, message)
