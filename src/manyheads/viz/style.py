"""The course's figure style (every chapter calls :func:`use_course_style` in its imports cell).

Two things the published pages need that matplotlib's defaults do not give: text that stays readable when a figure
is shrunk to a phone's width (a base size of 11 pt; nothing the chapters draw goes below ``"x-small"``), and colours
that readers with a colour-vision deficiency can tell apart: the Okabe–Ito palette (Okabe & Ito 2008, "Color
Universal Design"), with the line style changing after every eight series, so two series never share both colour
and style.
"""

from __future__ import annotations

__all__ = ["COLOURBLIND_SAFE", "use_course_style"]

# Okabe & Ito's eight colours, black last (kept for reference lines and text).
COLOURBLIND_SAFE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#56B4E9",  # sky blue
    "#CC79A7",  # reddish purple
    "#F0E442",  # yellow
    "#000000",  # black
)

_SIZES = {
    "font.size": 11,
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "xtick.labelsize": "small",
    "ytick.labelsize": "small",
    "legend.fontsize": "small",
    "legend.title_fontsize": "small",
    "figure.titlesize": "large",
}


def use_course_style() -> None:
    """Set matplotlib's defaults to the course's sizes and colour-blind-safe colours (for this session)."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(_SIZES)
    mpl.rcParams["axes.prop_cycle"] = cycler(linestyle=["-", "--", "-.", ":"]) * cycler(color=COLOURBLIND_SAFE)
    mpl.rcParams["image.cmap"] = "viridis"  # perceptually uniform and colour-blind safe (matplotlib's default too)
