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
