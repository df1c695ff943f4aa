"""manyheads.viz.live: controls plus a figure or HTML view, redrawn on change, with no Output widget."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from manyheads import viz  # noqa: E402
from manyheads.viz import live  # noqa: E402
from manyheads.viz import widgets as course_widgets  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def line(slope: float):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, slope])
    return fig


def test_figure_widget_draws_now_redraws_on_change_and_leaves_no_figure_open():
    open_before = plt.get_fignums()
    slope = widgets.FloatSlider(value=1.0, min=-2, max=2, description="slope")
    view = live.figure_widget(line, slope=slope)
    controls, image, alt, message = view.children
    assert controls is slope and isinstance(image, widgets.Image) and message.value == ""
    assert live.ALT_CLASS in alt.value and "A figure that the controls above redraw." in alt.value  # no labels
    first = bytes(image.value)  # ipywidgets keeps bytes as a memoryview
    assert first.startswith(PNG)
    slope.value = -1.5
    assert bytes(image.value).startswith(PNG) and bytes(image.value) != first
    assert plt.get_fignums() == open_before, "figures are closed after rendering (else the notebook shows them too)"


def test_the_figure_in_words_follows_the_figure_and_the_image_has_no_tooltip():
    def labelled(gap: float):
        fig, ax = plt.subplots()
        ax.set(title=f"gap {gap:g}", xlabel="position", ylabel="weight")
        return fig

    gap = widgets.FloatSlider(value=1.0, description="gap")
    view = live.figure_widget(labelled, gap=gap)
    image, alt = view.children[1], view.children[2]
    assert ">Figure (gap 1, x: position, y: weight).</span>" in alt.value, alt.value
    gap.value = 2.0
    assert "gap 2" in alt.value and "gap 1" not in alt.value
    # A tooltip on an Image stops ipywidgets 8's page renderer from drawing it ("Could not create a view").
    assert not getattr(image, "tooltip", None)


def test_figure_widget_reports_a_failing_draw_under_the_controls_and_recovers():
    def picky(n: int):
        fig = plt.figure()
        if n == 0:
            raise ValueError("n must be positive")
        return fig

    open_before = plt.get_fignums()
    n = widgets.IntSlider(value=1, min=0, max=3, description="n")
    view = live.figure_widget(picky, n=n)
    n.value = 0
    assert "ValueError: n must be positive" in view.children[-1].value
    assert plt.get_fignums() == open_before, "the half-drawn figure is closed"
    n.value = 2
    assert view.children[-1].value == ""


def test_figure_widget_says_what_draw_must_return_and_what_a_control_is():
    view = live.figure_widget(lambda a: None, a=widgets.IntSlider(1))
    assert "must return a matplotlib Figure, got NoneType" in view.children[-1].value
    with pytest.raises(TypeError, match="control 'a' must be an ipywidgets control"):
        live.figure_widget(line, a=3)
    with pytest.raises(TypeError, match="at least one control"):
        live.figure_widget(line)


def test_html_widget_follows_its_controls():
    name = widgets.Text(value="<heads>", description="name")
    view = live.html_widget(lambda name: f"<b>{name}</b>", name=name)
    assert view.children[1].value == "<b><heads></b>"
    name.value = "two"
    assert view.children[1].value == "<b>two</b>"


@pytest.mark.parametrize(
    "build",
    [
        viz.one_softmax_widget,
        lambda: course_widgets.plane_projection_widget(torch.eye(3), ["x", "y", "z"]),
        course_widgets.head_budget_widget,
    ],
    ids=["one_softmax", "plane_projection", "head_budget"],
)
def test_course_widgets_hold_no_output_widget(build):
    view = build()
    inside = [view]
    while inside:  # no Output widget anywhere inside: that is what nbclient's headless execution can hang on
        w = inside.pop()
        assert not isinstance(w, widgets.Output), type(w)
        inside.extend(getattr(w, "children", ()))
    assert view.children[-1].value == "", view.children[-1].value
    plt.close("all")


def test_head_budget_widget_explains_an_invalid_combination():
    view = course_widgets.head_budget_widget(d_model=512, n_heads=8)
    view.children[1].value = 6  # n_heads
    assert "Invalid combination" in view.children[-2].value and "does not divide" in view.children[-2].value


def test_a_control_s_label_is_shown_whole():
    layer = widgets.IntSlider(0, 0, 5, description="layer (0-based)")
    narrow = widgets.IntSlider(0, 0, 5, description="n", style={"description_width": "40px"})
    live.figure_widget(lambda layer, n: plt.figure(), layer=layer, n=narrow)
    assert layer.style.description_width == "initial"  # ipywidgets' default width cuts long labels
    assert narrow.style.description_width == "40px", "a width the caller chose is kept"


def test_labels_of_points_that_coincide_are_stacked_not_drawn_over_each_other():
    import torch

    from manyheads.viz.widgets import _label_rises

    points = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 0.01], [0.001, 0.0], [0.5, 0.5]])
    rises = _label_rises(points)
    assert rises[1] == rises[4] == 0.0  # far from the others
    assert sorted(rises[i] for i in (0, 2, 3)) == [0.0, 11.0, 22.0]
