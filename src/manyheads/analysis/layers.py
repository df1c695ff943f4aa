"""Per-layer and per-head metrics of attention weights, and attention rollout (chapter 6).

What changes from early to late layers, measured rather than assumed: how far each head looks (mean attention
distance), how spread its attention is (entropy, from :mod:`~manyheads.analysis.heads`), how much of it lands on the
first or special tokens (attention sinks; Xiao et al. 2023), and what share of a layer's heads are previous-token
or positional heads. :func:`layer_summary` turns any (n_layers, n_heads) map into per-layer mean and spread over
heads, for plots by layer. :func:`attention_rollout` (Abnar & Zuidema 2020) is the simplest view across layers.

Inputs come in two forms. The exercise-style functions take one batch, ``weights`` (batch, n_heads, seq, seq),
and return (n_heads,). :func:`layer_metrics` takes a whole model's attention, either a stacked tensor
(n_layers, batch, n_heads, seq, seq) (the toy models, the decoder on equal-length inputs) or a list of per-input
tensors (n_layers, n_heads, n, n) of different lengths (:func:`~manyheads.analysis.collect.token_attentions`),
and returns (n_layers, n_heads) maps, each input weighing by its length (its number of queries).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from manyheads.analysis.heads import attention_entropy

__all__ = [
    "check_attention_weights",
    "PREVIOUS_TOKEN_THRESHOLD",
    "POSITIONAL_OFFSETS",
    "mean_attention_distance",
    "previous_token_score",
    "sink_share",
    "positional_score",
    "attention_rollout",
    "LayerMetrics",
    "layer_metrics",
    "layer_summary",
]

#: A head is a previous-token head when its mean weight on the previous token is at least this (see
#: :func:`previous_token_score`).
PREVIOUS_TOKEN_THRESHOLD = 0.5

#: Relative positions a positional head may lock onto (see :func:`positional_score`): up to three tokens either side.
POSITIONAL_OFFSETS = (-3, -2, -1, 1, 2, 3)


def check_attention_weights(weights: Tensor, name: str = "weights") -> None:
    if not isinstance(weights, Tensor) or not weights.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor of attention weights, got {_describe(weights)}")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"{name} must be (batch, n_heads, seq, seq) self-attention weights, got shape {tuple(weights.shape)}; "
            "take one layer of a stacked (n_layers, batch, n_heads, seq, seq) tensor with weights[layer], and give "
            "one input as weights[None]"
        )


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def _distance(weights: Tensor) -> Tensor:
    """(..., seq, seq) → (...): the expected |i − j| of each query's row, averaged over the queries."""
    seq = weights.shape[-1]
    positions = torch.arange(seq, device=weights.device)
    gaps = (positions[:, None] - positions[None, :]).abs().to(weights.dtype)  # (seq_q, seq_k): |i − j|
    return (weights * gaps).sum(-1).mean(-1)


def _previous(weights: Tensor) -> Tensor:
    """(..., seq, seq) → (...): the weight on key i − 1, averaged over the queries i = 1 … seq − 1."""
    if weights.shape[-1] < 2:
        raise ValueError("the previous-token score needs sequences of at least 2 tokens")
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def _sink(weights: Tensor, sinks: Tensor) -> Tensor:
    """(..., seq, seq), sinks (seq,) or broadcastable bool → (...): weight on the sink keys, averaged over queries."""
    return (weights * sinks.to(weights.dtype)[..., None, :]).sum(-1).mean(-1)


def _positional(weights: Tensor, offsets: Sequence[int]) -> Tensor:
    """(..., seq, seq) → (...): the largest, over ``offsets``, of the mean weight on key i + offset."""
    seq = weights.shape[-1]
    usable = [o for o in offsets if abs(o) < seq]
    if not usable:
        raise ValueError(f"no offset in {tuple(offsets)} fits sequences of {seq} tokens")
    return torch.stack([weights.diagonal(offset=o, dim1=-2, dim2=-1).mean(-1) for o in usable]).amax(0)


def mean_attention_distance(weights: Tensor) -> Tensor:
    """How far each head looks, in tokens: weights (batch, n_heads, seq, seq) → (n_heads,) (chapter 6).

    For each query i the expected distance Σ_j weights[..., i, j]·|i − j|, averaged over all queries and the batch.
    0 for a head that attends only to itself; about (seq − 1)/3 for one spread evenly over a whole bidirectional
    input. Each row should be a distribution over keys (rows sum to 1).
    """
    check_attention_weights(weights)
    return _distance(weights).mean(0)


def previous_token_score(weights: Tensor) -> Tensor:
    """Mean attention weight on the previous token: weights (batch, n_heads, seq, seq) → (n_heads,) (chapter 6).

    The mean over the batch and the queries i = 1 … seq − 1 of ``weights[..., i, i − 1]``: Olsson et al. (2022)'s
    previous-token evaluator ("the mean attention from i to i−1"). A head *is* a previous-token head when the score
    is at least :data:`PREVIOUS_TOKEN_THRESHOLD` = 0.5, the criterion by which Clark et al. (2019, §3.1) count
    BERT's previous-token heads ("on average >50% of their attention" on the previous token).
    """
    check_attention_weights(weights)
    return _previous(weights).mean(0)


def sink_share(weights: Tensor, sinks: Tensor | None = None) -> Tensor:
    """Share of attention that lands on sink keys: weights (batch, n_heads, seq, seq) → (n_heads,) (chapter 6).

    ``sinks``: bool (seq,) or (batch, seq), True for the keys that count (special tokens such as [CLS] and [SEP],
    or a decoder's BOS); default: the first token only. The mean over the batch and every query of the summed
    weight on those keys. Xiao et al. (2023) call such tokens attention sinks: they collect much attention whatever
    their content.
    """
    check_attention_weights(weights)
    batch, _, seq, _ = weights.shape
    sinks = _sink_mask(sinks, seq, weights.device)
    if sinks.dim() == 2:
        if sinks.shape[0] != batch:
            raise ValueError(f"sinks of shape {tuple(sinks.shape)} must be (seq,) or (batch={batch}, seq={seq})")
        sinks = sinks[:, None]  # (batch, 1, seq): the same keys for every head
    return _sink(weights, sinks).mean(0)


def _sink_mask(sinks: Tensor | None, seq: int, device) -> Tensor:
    if sinks is None:
        sinks = torch.zeros(seq, dtype=torch.bool, device=device)
        sinks[0] = True
        return sinks
    if not isinstance(sinks, Tensor) or sinks.dtype != torch.bool or sinks.shape[-1] != seq or sinks.dim() > 2:
        raise ValueError(
            f"sinks must be a bool tensor (seq,) or (batch, seq) with seq={seq}, True = a sink key; got "
            f"{_describe(sinks)}"
        )
    return sinks.to(device)


def positional_score(weights: Tensor, offsets: Sequence[int] = POSITIONAL_OFFSETS) -> Tensor:
    """How strongly each head attends to a fixed relative position: (batch, n_heads, seq, seq) → (n_heads,).

    The largest, over ``offsets`` (default ±1, ±2, ±3), of the head's mean weight on key i + offset (queries
    where that key exists; see :func:`~manyheads.analysis.heads.offset_attention`). The course counts a head as
    *positional* when this is at least 0.5: more than half its attention goes to one relative position, whatever
    the tokens are (Clark et al. 2019, §3.1, count previous- and next-token heads the same way). Previous-token
    heads are the positional heads whose offset is −1.
    """
    check_attention_weights(weights)
    return _positional(weights, offsets).mean(0)


def attention_rollout(weights: Tensor) -> Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each output position draws on each input position.

    weights: (n_layers, batch, n_heads, seq, seq), each layer's attention weights (rows sum to 1), layers in order.
    Per layer A_l = 0.5·(mean over heads of weights[l]) + 0.5·I: the identity stands for the residual connection,
    and the halves keep each row a distribution. Returns (batch, seq, seq) = A_{L−1} @ … @ A_1 @ A_0: the first
    layer is applied first, so it stands rightmost (rows: output positions, columns: input tokens). It ignores
    what the values and W_o do to the mixed vectors, so it is a view of where attention flows, not an explanation.
    """
    if not isinstance(weights, Tensor) or not weights.is_floating_point():
        raise TypeError(f"weights must be a floating-point tensor of attention weights, got {_describe(weights)}")
    if weights.dim() != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must be (n_layers, batch, n_heads, seq, seq), got shape {tuple(weights.shape)}; stack the "
            "layers with torch.stack(list_of_layers) and give one input as weights[:, None]"
        )
    seq = weights.shape[-1]
    identity = torch.eye(seq, dtype=weights.dtype, device=weights.device)
    rollout = identity.expand(weights.shape[1], seq, seq)
    for layer in weights:
        rollout = (0.5 * layer.mean(1) + 0.5 * identity) @ rollout  # a later layer multiplies from the left
    return rollout


@dataclass
class LayerMetrics:
    """Per-head metrics of a model's attention, each (n_layers, n_heads) (chapter 6). ``n_queries``: queries averaged.

    distance: mean attention distance (tokens); entropy: mean row entropy (nats); sink: share of attention on the
    sink keys; previous: previous-token score; positional: positional score (see the functions of the same names).
    """

    distance: Tensor
    entropy: Tensor
    sink: Tensor
    previous: Tensor
    positional: Tensor
    n_queries: int

    def previous_token_heads(self, threshold: float = PREVIOUS_TOKEN_THRESHOLD) -> Tensor:
        """bool (n_layers, n_heads): previous-token score ≥ threshold."""
        return self.previous >= threshold

    def positional_heads(self, threshold: float = 0.5) -> Tensor:
        """bool (n_layers, n_heads): positional score ≥ threshold."""
        return self.positional >= threshold

    def share_previous_token_heads(self, threshold: float = PREVIOUS_TOKEN_THRESHOLD) -> Tensor:
        """(n_layers,): the share of each layer's heads that are previous-token heads."""
        return self.previous_token_heads(threshold).float().mean(1)

    def share_positional_heads(self, threshold: float = 0.5) -> Tensor:
        """(n_layers,): the share of each layer's heads that are positional heads."""
        return self.positional_heads(threshold).float().mean(1)


def layer_metrics(
    attentions: Tensor | Sequence[Tensor],
    sinks: Tensor | Sequence[Tensor] | None = None,
    offsets: Sequence[int] = POSITIONAL_OFFSETS,
) -> LayerMetrics:
    """Every head's metrics over a set of inputs: a :class:`LayerMetrics` of (n_layers, n_heads) maps (chapter 6).

    ``attentions``: a stacked (n_layers, batch, n_heads, seq, seq) tensor, or a list of per-input
    (n_layers, n_heads, n, n) tensors (lengths may differ). ``sinks``: the sink keys, bool (seq,) for a stacked
    tensor, or one bool (n,) per input for a list (e.g. True at [CLS] and [SEP]); default: the first token.
    Each input's per-head means are weighted by its length n, so a longer input weighs more. Scores that skip
    queries (the previous-token score has none at the first position) are still weighted by n, an approximation
    that makes no difference for inputs of equal length.
    """
    if isinstance(attentions, Tensor):
        if attentions.dim() != 5:
            raise ValueError(
                f"a stacked attention tensor must be (n_layers, batch, n_heads, seq, seq), got shape "
                f"{tuple(attentions.shape)}; pass per-input tensors (n_layers, n_heads, n, n) as a list"
            )
        if sinks is not None and (not isinstance(sinks, Tensor) or sinks.dim() != 1):
            raise ValueError("with a stacked attention tensor, sinks must be one bool (seq,) tensor")
        attentions = [a for a in attentions.transpose(0, 1)]  # per input: (n_layers, n_heads, seq, seq)
        sinks = None if sinks is None else [sinks] * len(attentions)
    attentions = list(attentions)
    if not attentions:
        raise ValueError("attentions is empty: give at least one input's attention")
    if sinks is not None and len(sinks) != len(attentions):
        raise ValueError(f"got {len(sinks)} sink masks for {len(attentions)} inputs; give one per input")
    totals: dict[str, Tensor] = {}
    n_queries = 0
    for index, weights in enumerate(attentions):
        if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2] or not weights.is_floating_point():
            raise ValueError(
                f"input {index}: attention must be a floating-point (n_layers, n_heads, n, n) tensor, got "
                f"{_describe(weights)}"
            )
        weights = weights.double()
        n = weights.shape[-1]
        sink = _sink_mask(None if sinks is None else sinks[index], n, weights.device)
        # Each metric is a mean over the input's queries; weighting it by n counts every query about the same.
        parts = {
            "distance": _distance(weights),
            "entropy": attention_entropy(weights).mean(-1),
            "sink": _sink(weights, sink),
            "previous": _previous(weights),
            "positional": _positional(weights, offsets),
        }
        for key, value in parts.items():
            totals[key] = value * n if key not in totals else totals[key] + value * n
        n_queries += n
    return LayerMetrics(**{key: (value / n_queries).float() for key, value in totals.items()}, n_queries=n_queries)


def layer_summary(values: Tensor) -> dict[str, Tensor]:
    """A (n_layers, n_heads) map → per layer, over its heads: ``mean``, ``std`` (population), ``min``, ``max``,
    each (n_layers,): what a plot by layer with the spread over heads needs (chapter 6)."""
    if not isinstance(values, Tensor) or values.dim() != 2:
        raise ValueError(f"values must be a (n_layers, n_heads) tensor, got {_describe(values)}")
    values = values.float()
    return {"mean": values.mean(1), "std": values.std(1, correction=0), "min": values.amin(1), "max": values.amax(1)}
