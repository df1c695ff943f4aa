"""The chapters' interactive widgets, each a :mod:`manyheads.viz.live` view that draws its default state when created.

* :func:`one_softmax_widget` (chapter 1): one query's single softmax over the keys and the blend it returns.
* :func:`plane_projection_widget` (chapter 2): a d_head = 2 head as a plane onto which 3-D toy embeddings project.
  Both are :func:`manyheads.viz.explorers.figure_explorer` views: the figure is drawn from a small state
  (:func:`one_softmax_state`, :func:`plane_projection_state`) that is also stored for every step of the sliders, so
  the book's pages move them without a kernel.
* :func:`head_budget_widget` and its static form :func:`head_budget_html` (chapter 3): d_model, n_heads,
  n_kv_heads and sequence length in; d_head, parameters, FLOPs, attention-matrix memory and KV-cache size out,
  with a plain-language message for invalid combinations. The arithmetic lives in :mod:`manyheads.costs`; the widget
  is a :func:`manyheads.viz.explorers.explorer_widget`, so the book's pages compute it without a kernel
  (``book_static/head_budget.js`` ports both functions).
* :func:`pruning_explorer` (chapter 5): choose an importance method and a pruned fraction, see which heads go (a
  layer × head map) and what the metric becomes; the pruning is :func:`manyheads.interventions.prune_mask`. Its
  figure is :func:`pruning_state`, stored for every method and fraction (a figure explorer).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence

import ipywidgets as widgets
import numpy as np
import torch
from torch import Tensor

from manyheads.analysis.circuits import plane_basis, project_onto_plane
from manyheads.costs import head_budget
from manyheads.viz.explorers import explorer_widget, figure_explorer
from manyheads.viz.style import COLOURBLIND_SAFE
from manyheads.viz.tables import format_bytes, format_count

__all__ = [
    "one_softmax_widget",
    "plane_projection_widget",
    "head_budget_html",
    "head_budget_widget",
    "pruning_explorer",
    "pruning_state",
]


def head_budget_html(
    d_model: int, n_heads: int, n_kv_heads: int | None = None, seq_len: int = 512, n_layers: int = 1, batch: int = 1
) -> str:
    """One configuration as an HTML table, or a highlighted message saying why it is invalid.

    ``book_static/head_budget.js`` ports this function (and :func:`manyheads.costs.head_budget`) for the book's pages:
    a change here is a change there (tests/book/test_head_budget_port.py compares the two)."""
    try:
        b = head_budget(d_model, n_heads, n_kv_heads, seq_len=seq_len, n_layers=n_layers, batch=batch)
    except ValueError as exc:
        return (
            f'<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">'
            f"<b>Invalid combination.</b> {html.escape(str(exc))}</div>"
        )
    kind = "multi-head" if b.n_kv_heads == b.n_heads else ("multi-query" if b.n_kv_heads == 1 else "grouped-query")
    bottleneck = (
        f"yes: d_head = {b.d_head} &lt; n − 1 = {b.seq_len - 1}, so some attention patterns cannot be produced"
        if b.low_rank_bottleneck
        else f"no: d_head = {b.d_head} ≥ n − 1 = {b.seq_len - 1}, enough for any pattern if the tokens are independent"
    )
    layers = f" ({n_layers} layers)" if n_layers > 1 else " (one layer)"
    rows = [
        ("d_head = d_model / n_heads", f"{b.d_head}"),
        ("attention type", f"{kind}: {b.n_heads} query heads share {b.n_kv_heads} key/value heads"),
        ("attention parameters, with biases" + layers, f"{b.params:,} ({format_count(b.params)})"),
        ("forward FLOPs" + layers, f"{format_count(b.flops)}, of which softmax {format_count(b.softmax_flops)}"),
        ("attention weights, float32" + layers, format_bytes(b.attention_matrix_bytes)),
        ("KV cache, 16-bit" + layers, format_bytes(b.kv_cache_bytes)),
        (
            "KV cache with one K/V head per query head",
            f"{format_bytes(b.kv_cache_bytes * b.n_heads // b.n_kv_heads)} ({b.n_heads // b.n_kv_heads}× this one)",
        ),
        ("low-rank bottleneck (d_head < n − 1)?", bottleneck),
    ]
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
    caption = (
        f"d_model = {d_model}, n_heads = {n_heads}, n_kv_heads = {b.n_kv_heads}, sequence length n = {seq_len}"
        f", batch {batch}"
    )
    return f'<table class="table"><caption>{caption}</caption><tbody>{body}</tbody></table>'


def head_budget_widget(
    d_model: int = 512, n_heads: int = 8, n_kv_heads: int = 8, seq_len: int = 1024, n_layers: int = 1, batch: int = 1
) -> widgets.VBox:
    """Live explorer: type a configuration and the table updates (chapter 3; chapter 7 starts it at a real decoder's
    shape, with K/V heads, context length and batch). The book's pages compute it in the reader's browser
    (:func:`manyheads.viz.explorers.explorer_widget`)."""
    style = {"description_width": "110px"}

    def box(value, description, maximum):
        return widgets.BoundedIntText(
            value=value, min=0, max=maximum, description=description, style=style, continuous_update=False
        )

    return explorer_widget(
        "head_budget",
        head_budget_html,
        d_model=box(d_model, "d_model", 65536),
        n_heads=box(n_heads, "n_heads", 4096),
        n_kv_heads=box(n_kv_heads, "n_kv_heads", 4096),
        seq_len=box(seq_len, "sequence length", 1_048_576),
        n_layers=box(n_layers, "layers", 256),
        batch=box(batch, "batch", 4096),
    )


# The key positions that matter (orange, as the chapter's text says), the others, and the output (the course's C1,
# grey and C0, written out: a state must not depend on the matplotlib style the process happens to have).
WANTED_COLOUR, OTHER_COLOUR, OUTPUT_COLOUR = COLOURBLIND_SAFE[1], "#8c8c8c", COLOURBLIND_SAFE[0]


def one_softmax_state(gap: float, other: float, vocab: Sequence[str], token_a: int = 0, token_b: int = 1) -> dict:
    """What the chapter-1 explorer shows for one setting, as :func:`manyheads.viz.explorers.panels_figure` reads it:
    the softmax over five key positions i-4 … i (i-1 holds ``token_a``, i-3 ``token_b``, scores +gap/2 and -gap/2,
    the rest ``other``) and the head's output, the weights times one-hot values. Numbers rounded to 4 decimals.
    The other three positions hold tokens that differ from both wanted ones, so that the output's bars for
    ``token_a`` and ``token_b`` show only what the head took from i-1 and i-3."""
    positions = ["i-4", "i-3", "i-2", "i-1", "i"]
    scores = np.array([other, -gap / 2, other, gap / 2, other])
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    fillers = [t for t in range(len(vocab)) if t not in (token_a, token_b)]
    if token_a == token_b or not fillers:
        raise ValueError(f"token_a and token_b must differ and leave a filler token, got {token_a}, {token_b}")
    tokens = np.random.default_rng(0).choice(fillers, size=len(positions))
    tokens[1], tokens[3] = token_b, token_a
    values = np.eye(len(vocab))[tokens]  # one-hot value vector per key position
    output = weights @ values  # the head's output: one convex combination of the values
    colors = [WANTED_COLOUR if p in ("i-1", "i-3") else OTHER_COLOUR for p in positions]
    return {
        "size": [8, 2.8],
        "panels": [
            {
                "kind": "bar",
                "x": positions,
                "y": [round(float(w), 4) for w in weights],
                "colors": colors,
                "notes": [[x, 0.93, vocab[t]] for x, t in enumerate(tokens.tolist())],
                "ylim": [0, 1],
                "ylabel": "attention weight",
                "title": f"one softmax over the keys (w(i-1) = {weights[3]:.2f}, w(i-3) = {weights[1]:.2f})",
            },
            {
                "kind": "bar",
                "x": list(vocab),
                "y": [round(float(o), 4) for o in output],
                "colors": [OUTPUT_COLOUR] * len(vocab),
                "ylim": [0, 1],
                "ylabel": "share in the output",
                "title": "the head's output (weights · one-hot values)",
            },
        ],
    }


def one_softmax_widget(
    vocab: Sequence[str] = ("A", "B", "C", "D", "E", "F"), token_a: int = 0, token_b: int = 1
) -> widgets.VBox:
    """Slider over the score gap between keys i-1 and i-3 (and the score of the other keys) for one query (chapter 1).
    ``token_a`` (at i-1) and ``token_b`` (at i-3) index ``vocab``: chapter 1 uses its text's C and E.

    The figure shows the single softmax distribution and the resulting output, a convex combination of one-hot
    value vectors: the mass given to the token at i-1 is mass taken from the token at i-3
    (:func:`one_softmax_state`). A :func:`manyheads.viz.explorers.figure_explorer`: the book's pages move over its
    stored states, score gap -6 to 6 in steps of 1 and other keys -6 to 2 in steps of 0.5.
    """
    return figure_explorer(
        "one_softmax",
        one_softmax_state,
        fixed={"vocab": list(vocab), "token_a": int(token_a), "token_b": int(token_b)},
        gap=widgets.FloatSlider(
            value=0.0, min=-6.0, max=6.0, step=1.0, description="score gap", continuous_update=False
        ),
        other=widgets.FloatSlider(
            value=-2.0, min=-6.0, max=2.0, step=0.5, description="other keys", continuous_update=False
        ),
    )


QUERY_COLOUR, TOKEN_COLOUR = COLOURBLIND_SAFE[3], COLOURBLIND_SAFE[0]  # vermillion and blue


def _label_rises(points: Tensor, near: float = 0.06, step: float = 11.0) -> list[float]:
    """Extra upward offsets (points) for the labels of 2-D ``points``, so that labels of points that (nearly)
    coincide are stacked instead of drawn over each other. ``near``: a fraction of the larger axis range."""
    xy = points.detach().cpu().double()
    scale = float((xy.max(0).values - xy.min(0).values).max()) or 1.0
    rises: list[float] = []
    for i in range(len(xy)):
        close = [rises[j] for j in range(i) if float((xy[i] - xy[j]).abs().max()) < near * scale]
        rise = 0.0
        while rise in close:
            rise += step
        rises.append(rise)
    return rises


def plane_projection_state(
    embeddings: Sequence[Sequence[float]], labels: Sequence[str], azimuth: float, elevation: float, query_token: int
) -> dict:
    """What the chapter-2 explorer shows for one setting (:func:`manyheads.viz.explorers.panels_figure` reads it):
    the 3-D ``embeddings`` (n, 3) projected onto the plane whose normal has the given angles (degrees), and the
    attention of ``query_token`` under that d_head = 2 head, softmax(x_q P Pᵀ x_jᵀ / √2). Rounded to 4 decimals."""
    x = torch.tensor(embeddings, dtype=torch.float64)
    if x.dim() != 2 or x.shape[1] != 3:
        raise ValueError(f"embeddings must be (n, 3), got {tuple(x.shape)}")
    points = project_onto_plane(x, plane_basis(azimuth, elevation))
    weights = torch.softmax(points[query_token] @ points.T / math.sqrt(2), dim=-1)
    colors = [QUERY_COLOUR if i == query_token else TOKEN_COLOUR for i in range(len(labels))]
    return {
        "size": [9, 3.4],
        "panels": [
            {
                "kind": "scatter",
                "points": [[round(float(px), 4), round(float(py), 4)] for px, py in points.tolist()],
                "colors": colors,
                "labels": list(labels),
                "rises": _label_rises(points),
                "xlabel": "plane direction 1",
                "ylabel": "plane direction 2",
                "title": f"tokens projected onto the head's plane\n(normal at {azimuth:.0f}°, {elevation:.0f}°)",
            },
            {
                "kind": "bar",
                "x": list(labels),
                "y": [round(float(w), 4) for w in weights],
                "colors": colors,
                "rotate": 45,
                "ylim": [0, 1],
                "ylabel": "attention weight",
                "title": f"where the query {labels[query_token]!r} looks\nunder this head",
            },
        ],
    }


def plane_projection_widget(
    embeddings: Tensor, labels: Sequence[str], query: int = 0, azimuth: float = 0.0, elevation: float = 0.0
):
    """Slider widget: choose a plane (a d_head = 2 head with W_q = W_k = the plane's basis) for 3-D toy embeddings.

    Left: the points projected onto the plane. Right: the head's attention of the query token over all tokens
    (:func:`plane_projection_state`). ``azimuth`` and ``elevation`` (degrees, multiples of 15) place the plane's
    normal at the start; the figure for them is drawn when the widget is created. A
    :func:`manyheads.viz.explorers.figure_explorer`: the book's pages move over its stored states (azimuth 0 to 180
    and elevation -90 to 90, both in steps of 15, every query).
    """
    x = embeddings.double()
    if x.dim() != 2 or x.shape[1] != 3:
        raise ValueError(f"embeddings must be (n, 3), got {tuple(x.shape)}")
    return figure_explorer(
        "plane_projection",
        plane_projection_state,
        fixed={"embeddings": x.tolist(), "labels": list(labels)},
        azimuth=widgets.FloatSlider(
            value=azimuth, min=0.0, max=180.0, step=15.0, description="azimuth", continuous_update=False
        ),
        elevation=widgets.FloatSlider(
            value=elevation, min=-90.0, max=90.0, step=15.0, description="elevation", continuous_update=False
        ),
        query_token=widgets.Dropdown(
            options=[(label, i) for i, label in enumerate(labels)], value=query, description="query"
        ),
    )


def pruning_state(
    importances: Mapping[str, Sequence[Sequence[float]]],
    scores: Mapping[str, Sequence[float]],
    fractions: Sequence[float],
    metric: str,
    method: str,
    fraction: float,
    floor: float | None = None,
) -> dict:
    """What chapter 5's pruning explorer shows for one method and fraction (:func:`manyheads.viz.explorers.
    panels_figure` reads it). Left: the layer × head map of ``importances[method]`` (lists (n_layers, n_heads)) with
    the heads :func:`manyheads.interventions.prune_mask` removes at ``fraction`` crossed out; right: every method's
    ``scores`` (one per fraction of ``fractions``) with the chosen point circled. Heads numbered from 1, like the
    chapter's maps and mh.head_name ("6-11" = layer 6, head 11). ``floor``: the score with every head removed, drawn
    as a flat black line and quoted in the title, so that no score is read without it."""
    from manyheads.interventions import prune_mask
    from manyheads.viz.explorers import heatmap_panel

    importance = torch.tensor(importances[method], dtype=torch.float64)
    keep = prune_mask(importance, fraction)
    n_layers, n_heads = importance.shape
    gone = (~keep).nonzero().tolist()
    score = scores[method][list(fractions).index(fraction)]
    width = max(4.0, 0.45 * n_heads + 1.5)
    low, high = float(importance.min()), float(importance.max())
    left = heatmap_panel(
        importance,
        vmin=round(low, 6),
        vmax=round(high, 6) if high > low else round(low, 6) + 1,
        xticks=[str(h) for h in range(1, n_heads + 1)],
        yticks=[str(layer) for layer in range(1, n_layers + 1)],
        crosses=gone,
        xlabel="head",
        ylabel="layer",
        colorbar=f"importance ({method})",
        title=f"{method}: {len(gone)} of {keep.numel()} heads removed (×)",
    )
    curves = {
        "kind": "line",
        "series": [
            {
                "x": list(fractions),
                "y": [round(float(v), 4) for v in scores[name]],
                "color": COLOURBLIND_SAFE[i % len(COLOURBLIND_SAFE)],
                "label": name,
                "width": 1.8 if name == method else 1.0,
                "marker": True,
            }
            for i, name in enumerate(importances)
        ],
        "point": [fraction, round(float(score), 4)],
        "xlabel": "fraction of heads removed",
        "ylabel": metric,
        "title": f"{metric} = {score:.3f} at {fraction:.0%} removed",
    }
    if floor is not None:
        curves["series"].append(
            {
                "x": [0.0, 1.0],
                "y": [round(float(floor), 4)] * 2,
                "color": "#000000",
                "label": "every head removed (floor)",
                "width": 1.0,
                "marker": False,
            }
        )
        curves["title"] += f"; no heads: {floor:.3f}"
    return {"size": [round(width + 4.2, 2), max(3.2, 0.42 * n_layers + 1.9)], "panels": [left, curves]}


def pruning_explorer(
    importances: Mapping[str, Tensor],
    evaluate: Callable[[Tensor], float],
    fractions: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    metric: str = "score",
    method: str | None = None,
    fraction: float | None = None,
    progress: bool = True,
    floor: float | None = None,
) -> widgets.VBox:
    """Choose an importance method and a fraction: see which heads go and the metric that is left (chapter 5).

    ``importances``: method name → scores (n_layers, n_heads), higher = more important. ``evaluate(keep)`` scores
    the model with only the heads where the bool (n_layers, n_heads) ``keep`` is True (e.g. by running it inside
    :func:`manyheads.interventions.ablated`) and returns a float. For every method and fraction the keep-mask is
    :func:`manyheads.interventions.prune_mask` (the floor(fraction × n) lowest heads of the whole model go) and the
    metric is computed once, when the widget is built, so moving the slider only redraws (identical masks, such as
    every method's at 0 %, are evaluated once). ``method`` and ``fraction`` choose the state drawn first. A
    :func:`manyheads.viz.explorers.figure_explorer`: every method × fraction is stored as :func:`pruning_state` of
    the importances and the scores (its ``fixed``), so the book's pages move both controls without a kernel.
    ``floor`` (the score with every head removed, on the same items) is drawn on the curve and quoted in its title.
    """
    from manyheads.interventions import prune_mask
    from manyheads.runtime import progress_bar

    if not importances:
        raise ValueError("importances is empty: give at least one method name → (n_layers, n_heads) scores")
    shapes = {name: tuple(scores.shape) for name, scores in importances.items()}
    for name, shape in shapes.items():
        if len(shape) != 2:
            raise ValueError(f"importances[{name!r}] must be (n_layers, n_heads), got shape {shape}")
    if len(set(shapes.values())) > 1:
        raise ValueError(f"every method must score the same heads, got shapes {shapes}")
    fractions = sorted({float(f) for f in fractions})
    if not fractions or fractions[0] < 0 or fractions[-1] > 1:
        raise ValueError(f"fractions must be a non-empty list of numbers in [0, 1], got {fractions}")
    method = next(iter(importances)) if method is None else method
    if method not in importances:
        raise ValueError(f"method {method!r} is not one of {list(importances)}")
    fraction = fractions[0] if fraction is None else float(fraction)
    if fraction not in fractions:
        raise ValueError(f"fraction {fraction} is not one of the fractions {fractions}")

    masks = {name: {f: prune_mask(scores, f) for f in fractions} for name, scores in importances.items()}
    cache: dict[bytes, float] = {}
    scores: dict[str, dict[float, float]] = {}
    plan = [(name, f) for name in importances for f in fractions]
    for name, f in progress_bar(plan, "evaluating pruned models", show=progress):
        key = masks[name][f].cpu().numpy().tobytes()
        if key not in cache:
            value = evaluate(masks[name][f].clone())  # a clone: an evaluate that edits its mask changes nothing here
            try:
                cache[key] = float(value)
            except (TypeError, ValueError):
                raise TypeError(f"evaluate must return a number, got {type(value).__name__}") from None
        scores.setdefault(name, {})[f] = cache[key]

    return figure_explorer(
        "pruning",
        pruning_state,
        fixed={
            "importances": {name: importances[name].detach().cpu().double().tolist() for name in importances},
            "scores": {name: [scores[name][f] for f in fractions] for name in importances},
            "fractions": fractions,
            "metric": metric,
            "floor": None if floor is None else float(floor),
        },
        method=widgets.Dropdown(options=list(importances), value=method, description="importance"),
        fraction=widgets.SelectionSlider(
            options=[(f"{f:.0%}", f) for f in fractions], value=fraction, description="pruned", continuous_update=False
        ),
    )
