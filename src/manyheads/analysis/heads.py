"""Per-head statistics of attention weights (chapter 4; chapter 6 adds per-layer summaries).

Entropy, attention at a fixed offset, Clark et al.'s surface statistics (attention to [CLS], [SEP], punctuation,
the previous and next token) and a simple head taxonomy. Heads are named ``layer-head`` counted from 1, as in
Clark et al. (:func:`head_name`).

Shapes: weights are (..., seq_q, seq_k); one sentence's attention is (n_layers, n_heads, seq, seq); statistics come
back as (n_layers, n_heads).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "head_name",
    "attention_entropy",
    "mean_attention_entropy",
    "offset_attention",
    "surface_statistics",
    "head_taxonomy",
    "TAXONOMY",
]


def head_name(layer: int, head: int) -> str:
    """0-based (layer, head) → the paper's name, counted from 1: (7, 10) → '8-11'."""
    return f"{layer + 1}-{head + 1}"


def attention_entropy(weights: Tensor) -> Tensor:
    """weights (..., seq_q, seq_k) → (..., seq_q): the entropy −Σ w ln w of each query's row, in nats
    (0·ln 0 = 0): 0 for a query that looks at one key, ln n for one spread evenly over n keys (chapter 1)."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


def mean_attention_entropy(weights: Tensor) -> Tensor:
    """weights (..., seq_q, seq_k) → (...): :func:`attention_entropy` averaged over the query rows, one number per
    head (chapter 4)."""
    return attention_entropy(weights).mean(dim=-1)


def offset_attention(weights: Tensor, offset: int) -> Tensor:
    """weights (..., seq_q, seq_k) → (...): the mean over queries i with 0 ≤ i + offset < seq_k of
    ``weights[..., i, i + offset]`` (offset −1: the previous token, +1: the next). NaN if no query qualifies."""
    seq_q, seq_k = weights.shape[-2:]
    queries = [i for i in range(seq_q) if 0 <= i + offset < seq_k]
    if not queries:
        return torch.full(weights.shape[:-2], float("nan"), dtype=weights.dtype, device=weights.device)
    q = torch.tensor(queries, device=weights.device)
    return weights[..., q, q + offset].mean(dim=-1)


_PUNCTUATION = set(string.punctuation)


def surface_statistics(attns: Sequence[Tensor], tokens: Sequence[Sequence[str]]) -> dict[str, Tensor]:
    """Clark et al.'s surface statistics for every head, averaged over every query token of every input.

    Returns (n_layers, n_heads) tensors: ``cls``, ``sep``, ``punct`` (mean attention given to those tokens),
    ``prev`` and ``next`` (to the token just before / after), ``self``, and ``entropy`` (nats).
    """
    sums: dict[str, Tensor] = {}
    n_queries = 0
    for weights, toks in zip(attns, tokens):
        weights = weights.double()
        n = len(toks)
        is_cls = torch.tensor([t == "[CLS]" for t in toks], dtype=torch.double)
        is_sep = torch.tensor([t == "[SEP]" for t in toks], dtype=torch.double)
        is_punct = torch.tensor([len(t) > 0 and all(ch in _PUNCTUATION for ch in t) for t in toks], dtype=torch.double)
        idx = torch.arange(n)
        prev = torch.zeros(weights.shape[:-2], dtype=torch.double)
        nxt = torch.zeros_like(prev)
        if n > 1:
            prev = weights[..., idx[1:], idx[1:] - 1].sum(-1)
            nxt = weights[..., idx[:-1], idx[:-1] + 1].sum(-1)
        parts = {
            "cls": (weights @ is_cls).sum(-1),
            "sep": (weights @ is_sep).sum(-1),
            "punct": (weights @ is_punct).sum(-1),
            "prev": prev,
            "next": nxt,
            "self": weights.diagonal(dim1=-2, dim2=-1).sum(-1),
            "entropy": -torch.special.xlogy(weights, weights).sum(-1).sum(-1),
        }
        for key, value in parts.items():
            sums[key] = value if key not in sums else sums[key] + value
        n_queries += n
    return {key: value / n_queries for key, value in sums.items()}


#: Taxonomy labels in priority order, as :func:`head_taxonomy` assigns them.
TAXONOMY = ("[CLS]", "[SEP]", "punctuation", "previous token", "next token", "self", "broad", "mixed")


def head_taxonomy(
    stats: dict[str, Tensor], threshold: float = 0.5, broad_entropy: float | None = None
) -> list[list[str]]:
    """One label per head: the first of [CLS], [SEP], punctuation, previous token, next token, self that receives
    more than ``threshold`` of its attention on average; else 'broad' if its mean entropy exceeds
    ``broad_entropy`` (default: the 75th percentile over all heads), else 'mixed'."""
    keys = ("cls", "sep", "punct", "prev", "next", "self")
    entropy = stats["entropy"]
    if broad_entropy is None:
        broad_entropy = float(torch.quantile(entropy.flatten(), 0.75))
    labels = []
    for layer in range(entropy.shape[0]):
        row = []
        for head in range(entropy.shape[1]):
            label = next((TAXONOMY[i] for i, k in enumerate(keys) if float(stats[k][layer, head]) > threshold), None)
            if label is None:
                label = "broad" if float(entropy[layer, head]) > broad_entropy else "mixed"
            row.append(label)
        labels.append(row)
    return labels
