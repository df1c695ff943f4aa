"""Static figures: attention heatmaps (chapters 1, 2, 4) and learning curves (chapter 1).

Plotting functions draw on a matplotlib Axes (or make a new Figure) and return it; they never call ``plt.show()``,
so a notebook decides what is displayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["annotate_cells", "attention_heatmap", "head_heatmaps", "learning_curves"]


def _to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def annotate_cells(ax: Axes, image, fmt: str = "{:.1f}", fontsize: str = "small") -> list:
    """Write each cell's value of the heat map ``image`` (what ``ax.imshow`` returned) in the cell, in white on dark
    cells and in black on light ones, whatever the colour map: text of one colour is unreadable on half the cells
    of a diverging map. Returns the text artists."""
    values = np.ma.getdata(image.get_array())
    red, green, blue, _ = np.moveaxis(image.cmap(image.norm(values)), -1, 0)
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue  # of the cell's colour (sRGB weights)
    return [
        ax.text(
            j,
            i,
            fmt.format(value),
            ha="center",
            va="center",
            fontsize=fontsize,
            color="white" if luminance[i, j] < 0.45 else "black",
        )
        for (i, j), value in np.ndenumerate(values)
    ]


def attention_heatmap(
    weights,
    ax: Axes | None = None,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    title: str | None = None,
    annotate: bool = False,
    colorbar: bool = True,
) -> Axes:
    """Draw one attention pattern, weights (seq_q, seq_k), rows = queries, columns = keys (chapter 1).

    The colour scale is fixed to [0, 1] so that patterns from different heads and models compare directly.
    ``annotate`` writes each weight in its cell (for small matrices). A colour bar is drawn by default, because a
    heat map without one cannot be read (CONTRIBUTING.md, "Figures read on a phone"); ``colorbar=False`` leaves
    it out only for a figure that draws one shared bar itself (``fig.colorbar(ax.get_images()[0], ax=axes)``).
    """
    w = _to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be (seq_q, seq_k), got shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2, 3.0))
    image = ax.imshow(w, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal")
    # Word labels side by side overlap once they are longer than a cell is wide: stand them upright.
    upright = key_labels is not None and max((len(str(label)) for label in key_labels), default=0) > 2
    ax.set_xticks(
        range(w.shape[1]),
        key_labels if key_labels is not None else range(w.shape[1]),
        fontsize="small",
        rotation=90 if upright else 0,
    )
    ax.set_yticks(range(w.shape[0]), query_labels if query_labels is not None else range(w.shape[0]), fontsize="small")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    if title:
        ax.set_title(title, fontsize="medium")
    if annotate:
        annotate_cells(ax, image, "{:.2f}", fontsize="x-small")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def head_heatmaps(
    weights, titles: Sequence[str] | None = None, suptitle: str | None = None, token_labels: Sequence[str] | None = None
) -> Figure:
    """One heatmap per head, two to a row, each with its own colour bar on the shared [0, 1] scale.
    weights: (n_heads, seq_q, seq_k) for one sequence (chapter 1; the interlude and chapter 6 call it too).

    Two panels per row is what a phone (390 px wide) can still read (CONTRIBUTING.md, "Figures read on a phone");
    more heads wrap onto more rows, and the unused slot of an odd last row is removed.
    """
    w = _to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be (n_heads, seq_q, seq_k), got shape {w.shape}")
    n_heads = w.shape[0]
    if n_heads == 1:
        fig, axes = plt.subplots(1, 1, figsize=(3.4, 3.1), squeeze=False, layout="constrained")
    else:
        rows = -(-n_heads // 2)
        fig, axes = plt.subplots(rows, 2, figsize=(6.8, 3.1 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n_heads:]:
        ax.remove()
    for h, ax in enumerate(axes.flat[:n_heads]):
        attention_heatmap(
            w[h],
            ax=ax,
            query_labels=token_labels,
            key_labels=token_labels,
            title=titles[h] if titles is not None else f"head {h}",
        )
    if suptitle:
        fig.suptitle(suptitle, fontsize="medium")
    return fig


# (line style, marker) per configuration of a learning-curve plot, in order: no two alike in either.
CURVE_STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 1, 1, 1, 1, 1)), "v"))


def learning_curves(
    steps: Sequence[int],
    curves: Mapping[str, np.ndarray],
    ax: Axes | None = None,
    ylabel: str = "accuracy",
    title: str | None = None,
) -> Axes:
    """One colour, line style and marker per labelled configuration: a thin line per seed and a thick line for the
    mean (chapter 1).

    steps: (n_points,); each curve: (n_seeds, n_points). Seeds are drawn individually because with a handful of
    them a mean ± band hides what matters (e.g. two seeds at 1.0 and one at chance). Colour alone does not tell the
    configurations apart for every reader (orange and vermillion are the Okabe-Ito pair closest for protan and deutan
    vision), so each also gets its own dash pattern and marker (:data:`CURVE_STYLES`).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    x = np.asarray(steps)
    marks = max(1, len(x) // 8)  # about 8 markers per line
    for k, (label, values) in enumerate(curves.items()):
        v = np.atleast_2d(np.asarray(values, dtype=float))
        if v.shape[1] != len(x):
            raise ValueError(f"curve {label!r} has {v.shape[1]} points but there are {len(x)} steps")
        ls, marker = CURVE_STYLES[k % len(CURVE_STYLES)]
        (line,) = ax.plot(x, v.mean(axis=0), label=label, lw=2.2, ls=ls, marker=marker, ms=5, markevery=marks)
        if len(v) > 1:
            # colour and style both given, so the seeds' lines do not advance the colour cycle: the next
            # configuration gets the next colour, not one of a repeated pair
            ax.plot(x, v.T, color=line.get_color(), ls=line.get_linestyle(), lw=0.8, alpha=0.45)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    return ax
