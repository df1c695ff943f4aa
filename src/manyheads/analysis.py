"""Head statistics for chapter 4 (what heads learn), in the manner of Clark et al. (2019).

Per-head surface statistics (attention to [CLS], [SEP], punctuation, the previous and next token, entropy), a
simple head taxonomy, and the syntax and coreference probes: for each relation the head whose most-attended word
is the gold head most often, beside the best fixed-offset baseline. Heads are named ``layer-head`` counted from 1,
as in the paper (:func:`head_name`).

Shapes: one sentence's attention is (n_layers, n_heads, seq, seq); statistics come back as (n_layers, n_heads).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "head_name", "attention_entropy", "offset_attention", "relation_accuracy", "relation_counts",
    "offset_baseline", "RelationRow", "relation_table", "coreference_accuracy", "coreference_baseline",
    "token_attentions", "surface_statistics", "head_taxonomy", "TAXONOMY",
]


def head_name(layer: int, head: int) -> str:
    """0-based (layer, head) → the paper's name, counted from 1: (7, 10) → '8-11'."""
    return f"{layer + 1}-{head + 1}"


def attention_entropy(weights: Tensor) -> Tensor:
    """weights (..., seq_q, seq_k) → (...): the entropy −Σ w ln w of each query row (0·ln 0 = 0), in nats,
    averaged over the query rows."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1).mean(dim=-1)


def offset_attention(weights: Tensor, offset: int) -> Tensor:
    """weights (..., seq_q, seq_k) → (...): the mean over queries i with 0 ≤ i + offset < seq_k of
    ``weights[..., i, i + offset]`` (offset −1: the previous token, +1: the next). NaN if no query qualifies."""
    seq_q, seq_k = weights.shape[-2:]
    queries = [i for i in range(seq_q) if 0 <= i + offset < seq_k]
    if not queries:
        return torch.full(weights.shape[:-2], float("nan"), dtype=weights.dtype, device=weights.device)
    q = torch.tensor(queries, device=weights.device)
    return weights[..., q, q + offset].mean(dim=-1)


def _predicted_heads(weights: Tensor) -> Tensor:
    """(..., seq, seq) → (..., seq): each word's most-attended other word (itself excluded)."""
    seq = weights.shape[-1]
    eye = torch.eye(seq, dtype=torch.bool, device=weights.device)
    return weights.masked_fill(eye, float("-inf")).argmax(dim=-1)


def relation_accuracy(weights: Tensor, arcs: Sequence[tuple[int, int]]) -> Tensor:
    """weights (n_layers, n_heads, seq, seq) over the words of one sentence; arcs: (dependent, head) pairs →
    (n_layers, n_heads): the fraction of arcs whose dependent's most-attended other word is its head."""
    if not arcs:
        raise ValueError("relation_accuracy needs at least one arc")
    predicted = _predicted_heads(weights)
    deps = torch.tensor([d for d, _ in arcs], device=weights.device)
    heads = torch.tensor([h for _, h in arcs], device=weights.device)
    return (predicted[..., deps] == heads).to(weights.dtype).mean(dim=-1)


def relation_counts(word_attns: Sequence[Tensor], sentences: Sequence, relations: Sequence[str]) -> dict[str, tuple[Tensor, int]]:
    """Over a corpus: for each relation, (correct (n_layers, n_heads) counts, number of arcs)."""
    out = {}
    for relation in relations:
        correct, total = None, 0
        for weights, sentence in zip(word_attns, sentences):
            arcs = sentence.arcs(relation)
            if not arcs:
                continue
            c = relation_accuracy(weights.double(), arcs) * len(arcs)
            correct = c if correct is None else correct + c
            total += len(arcs)
        out[relation] = (correct.round().long() if correct is not None else None, total)
    return out


def offset_baseline(sentences: Sequence, relation: str, max_offset: int = 5) -> tuple[int, float]:
    """The best fixed-offset predictor for ``relation``: (offset, accuracy), where predicting ``head = dependent +
    offset`` for every arc is right that fraction of the time (offsets ±1..±max_offset; ties go to the smaller |offset|)."""
    arcs = [(d, h) for s in sentences for d, h in s.arcs(relation)]
    if not arcs:
        raise ValueError(f"no {relation} arcs")
    offsets = sorted((o for o in range(-max_offset, max_offset + 1) if o), key=lambda o: (abs(o), o))
    scores = {o: sum(h - d == o for d, h in arcs) / len(arcs) for o in offsets}
    best = max(offsets, key=lambda o: scores[o])  # max keeps the first of equal scores
    return best, scores[best]


@dataclass(frozen=True)
class RelationRow:
    relation: str
    n_arcs: int
    best_head: tuple[int, int]  # 0-based (layer, head)
    accuracy: float
    baseline_offset: int
    baseline_accuracy: float

    @property
    def head(self) -> str:
        return head_name(*self.best_head)


def relation_table(word_attns: Sequence[Tensor], sentences: Sequence, relations: Sequence[str]) -> list[RelationRow]:
    """For each relation: the best single head's accuracy over the corpus and the best fixed-offset baseline."""
    rows = []
    for relation, (correct, total) in relation_counts(word_attns, sentences, relations).items():
        if total == 0:
            continue
        flat = int(correct.flatten().argmax())
        layer, head = divmod(flat, correct.shape[1])
        offset, base = offset_baseline(sentences, relation)
        rows.append(RelationRow(relation, total, (layer, head), float(correct[layer, head]) / total, offset, base))
    return rows


def coreference_accuracy(word_attns: Sequence[Tensor], items: Sequence) -> Tensor:
    """(n_layers, n_heads): the fraction of items whose pronoun attends more to the antecedent than to any other
    candidate mention."""
    correct = None
    for weights, item in zip(word_attns, items):
        candidates = torch.tensor(item.candidates)
        pick = candidates[weights[..., item.pronoun, candidates].argmax(dim=-1)]
        hit = (pick == item.antecedent).double()
        correct = hit if correct is None else correct + hit
    return correct / len(items)


def coreference_baseline(items: Sequence) -> float:
    """Accuracy of always choosing the nearest candidate before the pronoun."""
    return sum(item.nearest == item.antecedent for item in items) / len(items)


# ------------------------------------------------------------------------------------------- surface statistics
def token_attentions(encoder, tokenizer, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     batch_size: int = 32) -> tuple[list[Tensor], list[list[str]]]:
    """Run ``encoder`` on texts (optionally as ``[CLS] text [SEP] pair [SEP]``); per input, its unpadded attention
    (n_layers, n_heads, n, n) as a float32 CPU tensor, and its tokens."""
    attns, tokens = [], []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            batch = tokenizer(chunk, pairs=None if pairs is None else list(pairs[start:start + batch_size]))
            stacked = encoder(batch).stacked_attentions().float().cpu()
            for row, n in enumerate(batch.lengths):
                attns.append(stacked[:, row, :, :n, :n])
                tokens.append(batch.tokens[row])
    return attns, tokens


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


def head_taxonomy(stats: dict[str, Tensor], threshold: float = 0.5, broad_entropy: float | None = None) -> list[list[str]]:
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
