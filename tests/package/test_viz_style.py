"""The course's figure style: sizes that survive a phone's width, colours that colour-blind readers tell apart."""

from __future__ import annotations

import re

import matplotlib as mpl
import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgb

from manyheads.course.layout import REPO
from manyheads.viz import style


@pytest.fixture
def course_style():
    with mpl.rc_context():
        style.use_course_style()
        yield


def test_no_text_is_smaller_than_x_small_of_an_11_point_base(course_style):
    fig, ax = plt.subplots()
    ax.set(title="t", xlabel="x", ylabel="y")
    ax.plot([0, 1], label="a")
    legend = ax.legend()
    sizes = [ax.title.get_fontsize(), ax.xaxis.label.get_fontsize()]
    sizes += [t.get_fontsize() for t in ax.get_xticklabels() + legend.get_texts()]
    plt.close(fig)
    assert mpl.rcParams["font.size"] >= 11 and min(sizes) >= 9


def test_the_first_eight_series_have_eight_okabe_ito_colours_and_no_two_series_share_colour_and_style(course_style):
    cycle = list(mpl.rcParams["axes.prop_cycle"])
    assert [to_rgb(c["color"]) for c in cycle[:8]] == [to_rgb(c) for c in style.COLOURBLIND_SAFE]
    assert all(c["linestyle"] == "-" for c in cycle[:8])
    assert len({(c["color"], c["linestyle"]) for c in cycle}) == len(cycle) >= 32


SOURCES = [*(REPO.root / "src" / "manyheads" / "viz").glob("*.py"), *(REPO.root / "chapters").glob("*.ipynb")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_figures_give_relative_font_sizes_so_the_style_sets_them(path):
    """A number (fontsize=7) ignores the course style and shrinks with the figure on a phone; "small" follows it."""
    text = path.read_text(encoding="utf-8")
    assert re.findall(r"fontsize=\d", text) == [], f"{path.name}: use fontsize='small' etc., not a number"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_figures_name_colours_by_the_style_s_cycle_not_matplotlib_s_default_palette(path):
    """ "tab:blue" is the old default palette whatever the style says; "C0" is the course style's first colour."""
    assert re.findall(r"tab:[a-z]+", path.read_text(encoding="utf-8")) == [], path.name


@pytest.mark.parametrize("path", sorted((REPO.root / "chapters").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_chapter_uses_the_course_style(path):
    assert "mh.use_course_style()" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("cmap", ["RdBu_r", "viridis", "Greys"])
def test_cell_values_are_written_in_white_on_dark_cells_and_black_on_light_ones(cmap):
    """Chapter 2's score maps wrote black numbers on dark red and dark blue cells: unreadable."""
    import numpy as np
    from matplotlib.colors import to_rgb

    from manyheads.viz.plots import annotate_cells

    values = np.array([[-5.7, 0.0], [5.7, 2.0]])
    fig, ax = plt.subplots()
    image = ax.imshow(values, cmap=cmap, vmin=-5.7, vmax=5.7)
    texts = annotate_cells(ax, image)
    assert [t.get_text() for t in texts] == ["-5.7", "0.0", "5.7", "2.0"]
    for text, value in zip(texts, values.ravel()):
        r, g, b, _ = image.cmap(image.norm(value))
        cell_is_dark = 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.45
        assert to_rgb(text.get_color()) == ((1.0, 1.0, 1.0) if cell_is_dark else (0.0, 0.0, 0.0)), (cmap, value)
    if cmap == "RdBu_r":  # the ends of a diverging map are dark, its middle is light
        assert [to_rgb(t.get_color()) for t in texts[:2]] == [(1.0, 1.0, 1.0), (0.0, 0.0, 0.0)]
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------------------
# Phones (CONTRIBUTING.md, "Figures read on a phone"): at most two panels per row, a colour bar on every heat map,
# legends outside the data.


def _heat_axes(fig):
    return [ax for ax in fig.axes if ax.get_images() and ax.get_label() != "<colorbar>"]


def test_attention_heatmap_draws_a_colour_bar_unless_asked_not_to():
    import numpy as np

    from manyheads.viz.plots import attention_heatmap

    ax = attention_heatmap(np.full((3, 3), 1 / 3))
    assert [a.get_label() for a in ax.figure.axes].count("<colorbar>") == 1
    plt.close(ax.figure)
    fig, ax = plt.subplots()
    attention_heatmap(np.eye(3), ax=ax, colorbar=False)
    assert len(fig.axes) == 1
    plt.close(fig)


@pytest.mark.parametrize(("n_heads", "rows"), [(1, 1), (2, 1), (3, 2), (4, 2), (12, 6)])
def test_head_heatmaps_wraps_to_two_panels_per_row_each_with_a_colour_bar(n_heads, rows):
    import numpy as np

    from manyheads.viz.plots import head_heatmaps

    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=(n_heads, 5))
    fig = head_heatmaps(weights, titles=[f"h{h}" for h in range(n_heads)], token_labels=list("abcde"))
    fig.canvas.draw()
    heat = _heat_axes(fig)
    assert [ax.get_title() for ax in heat] == [f"h{h}" for h in range(n_heads)]
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == n_heads  # one bar per panel
    # panels per row: axes whose vertical centres coincide
    centres = [round(ax.get_position().y0 + ax.get_position().height / 2, 3) for ax in heat]
    per_row = {c: centres.count(c) for c in centres}
    assert max(per_row.values()) <= 2 and len(per_row) == rows
    plt.close(fig)


def test_the_pruning_explorer_s_legend_sits_outside_the_curves():
    from manyheads.viz.explorers import panels_figure
    from manyheads.viz.widgets import pruning_state

    importances = {"gradient": [[0.1, 0.5, 0.3], [0.9, 0.2, 0.7]], "random": [[0.4, 0.8, 0.6], [0.1, 0.3, 0.2]]}
    scores = {"gradient": [1.0, 0.5], "random": [1.0, 0.4]}
    fig = panels_figure(pruning_state(importances, scores, [0.0, 0.5], "score", "gradient", 0.5))
    fig.canvas.draw()
    right = fig.axes[-1] if fig.axes[-1].get_legend() else next(a for a in fig.axes if a.get_legend())
    legend = right.get_legend().get_window_extent()
    assert not legend.overlaps(right.get_window_extent())
    plt.close(fig)


def test_learning_curves_give_each_configuration_its_own_colour(course_style):
    """The seeds' thin lines used to advance the colour cycle, so "1 head" and "2 heads" came out blue and sky blue."""
    import numpy as np

    from manyheads.viz.plots import learning_curves

    curves = {name: np.random.default_rng(0).random((3, 4)) for name in ("a", "b", "c", "d")}
    ax = learning_curves([0, 1, 2, 3], curves)
    means = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert [to_rgb(line.get_color()) for line in means] == [to_rgb(c) for c in style.COLOURBLIND_SAFE[:4]]
    plt.close(ax.figure)


def test_learning_curves_give_each_configuration_its_own_line_style_and_marker(course_style):
    """Colour alone did not tell orange from vermillion apart for protan and deutan readers (review finding 1-8)."""
    import numpy as np

    from manyheads.viz.plots import learning_curves

    curves = {name: np.random.default_rng(0).random((3, 16)) for name in ("a", "b", "c", "d")}
    ax = learning_curves(list(range(16)), curves)
    means = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert len({line.get_linestyle() for line in means}) == 4
    assert len({line.get_marker() for line in means}) == 4
    plt.close(ax.figure)
