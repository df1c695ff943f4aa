"""Figures, tables and widgets for the chapters: attention heatmaps, learning curves, HTML tables, and the
one-softmax widget (chapter 1).

Plotting functions draw on a matplotlib Axes (or make a new Figure) and return it; they never call ``plt.show()``,
so a notebook decides what is displayed. Widgets are :mod:`manyheads.live` views (no Output widget, so headless
execution cannot hang on them) and draw their default state when created.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from manyheads.live import figure_widget

__all__ = ["attention_heatmap", "head_heatmaps", "learning_curves", "html_table", "one_softmax_widget"]


def _to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


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
    ``annotate`` writes each weight in its cell (for small matrices); ``colorbar=False`` leaves out the colour bar
    (for grids of small panels that share the one scale).
    """
    w = _to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(f"weights must be (seq_q, seq_k), got shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2, 3.0))
    image = ax.imshow(w, vmin=0.0, vmax=1.0, cmap="viridis", aspect="equal")
    ax.set_xticks(range(w.shape[1]), key_labels if key_labels is not None else range(w.shape[1]), fontsize=7)
    ax.set_yticks(range(w.shape[0]), query_labels if query_labels is not None else range(w.shape[0]), fontsize=7)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    if title:
        ax.set_title(title, fontsize=9)
    if annotate:
        for (i, j), value in np.ndenumerate(w):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6, color="white" if value < 0.6 else "black")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def head_heatmaps(
    weights,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    token_labels: Sequence[str] | None = None,
) -> Figure:
    """One heatmap per head, side by side. weights: (n_heads, seq_q, seq_k) for one sequence (chapter 1)."""
    w = _to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"weights must be (n_heads, seq_q, seq_k), got shape {w.shape}")
    n_heads = w.shape[0]
    fig, axes = plt.subplots(1, n_heads, figsize=(3.3 * n_heads, 3.1), squeeze=False, layout="constrained")
    for h, ax in enumerate(axes[0]):
        attention_heatmap(
            w[h], ax=ax, query_labels=token_labels, key_labels=token_labels,
            title=titles[h] if titles is not None else f"head {h}",
        )
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def learning_curves(
    steps: Sequence[int],
    curves: Mapping[str, np.ndarray],
    ax: Axes | None = None,
    ylabel: str = "accuracy",
    title: str | None = None,
) -> Axes:
    """One colour per labelled configuration: a thin line per seed and a thick line for the mean (chapter 1).

    steps: (n_points,); each curve: (n_seeds, n_points). Seeds are drawn individually because with a handful of
    them a mean ± band hides what matters (e.g. two seeds at 1.0 and one at chance).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    x = np.asarray(steps)
    for label, values in curves.items():
        v = np.atleast_2d(np.asarray(values, dtype=float))
        if v.shape[1] != len(x):
            raise ValueError(f"curve {label!r} has {v.shape[1]} points but there are {len(x)} steps")
        (line,) = ax.plot(x, v.mean(axis=0), label=label, lw=2.2)
        if len(v) > 1:
            ax.plot(x, v.T, color=line.get_color(), lw=0.8, alpha=0.45)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return ax


def html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str | None = None) -> str:
    """A plain HTML table (no pandas needed). Cells are converted with ``str`` and escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<table class="table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _draw_one_softmax(gap: float, other: float, vocab: Sequence[str], token_a: int, token_b: int) -> Figure:
    # Five key positions i-4 … i; the two that matter are i-1 (holding token_a) and i-3 (holding token_b).
    positions = ["i-4", "i-3", "i-2", "i-1", "i"]
    scores = np.array([other, -gap / 2, other, gap / 2, other])
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    rng = np.random.default_rng(0)
    tokens = rng.integers(len(vocab), size=len(positions))
    tokens[1], tokens[3] = token_b, token_a
    values = np.eye(len(vocab))[tokens]  # one-hot value vector per key position
    output = weights @ values  # the head's output: one convex combination of the values
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 2.8), layout="constrained")
    colors = ["tab:orange" if p in ("i-1", "i-3") else "tab:gray" for p in positions]
    left.bar(positions, weights, color=colors)
    left.set_ylim(0, 1)
    left.set_ylabel("attention weight")
    left.set_title(f"one softmax over the keys (w(i-1) = {weights[3]:.2f}, w(i-3) = {weights[1]:.2f})", fontsize=9)
    for x, t in enumerate(tokens):
        left.text(x, 0.93, vocab[t], ha="center", fontsize=9)
    right.bar(vocab, output, color="tab:blue")
    right.set_ylim(0, 1)
    right.set_ylabel("share in the output")
    right.set_title("the head's output (weights · one-hot values)", fontsize=9)
    return fig


def one_softmax_widget(vocab: Sequence[str] = ("A", "B", "C", "D", "E", "F")) -> widgets.VBox:
    """Slider over the score gap between keys i-1 and i-3 (and the score of the other keys) for one query (chapter 1).

    The figure shows the single softmax distribution and the resulting output, a convex combination of one-hot
    value vectors: the mass given to the token at i-1 is mass taken from the token at i-3.
    """

    def draw(gap: float, other: float) -> Figure:
        return _draw_one_softmax(gap, other, vocab, token_a=0, token_b=1)

    return figure_widget(
        draw,
        gap=widgets.FloatSlider(value=0.0, min=-6.0, max=6.0, step=0.25, description="score gap",
                                continuous_update=False),
        other=widgets.FloatSlider(value=-2.0, min=-6.0, max=2.0, step=0.25, description="other keys",
                                  continuous_update=False),
    )
