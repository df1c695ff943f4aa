"""Single heads as probes for syntax and coreference, against position-only baselines (chapter 4, after Clark et al.).

A head "predicts" the head word of each word as the word it attends to most (itself excluded). For each relation
the best head is reported beside the best fixed-offset baseline; for pronouns, the candidate mention the pronoun
attends to most, beside the nearest-mention baseline.

Direction. Every relation is scored with the dependent attending to its head word, except ``pobj``: as in Clark
et al. (2019, the only relation they score that way), a preposition is scored by attending to its object, the
head word to the dependent. :func:`relation_accuracy` always scores "query attends to target" for the pairs it is
given; :func:`scored_pairs` builds those pairs in each relation's direction for :func:`relation_counts`,
:func:`offset_baseline`, :func:`relation_table` and chapter 4's explorer, so a relation's best head and its
baseline offset are measured from the same word, and the explorer boxes the cells that are scored.

Shapes: one sentence's attention between words is (n_layers, n_heads, n_words, n_words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from manyheads.analysis.heads import head_name

__all__ = [
    "scored_pairs",
    "relation_accuracy",
    "relation_counts",
    "offset_baseline",
    "RelationRow",
    "relation_table",
    "coreference_accuracy",
    "coreference_baseline",
]


def _predicted_heads(weights: Tensor) -> Tensor:
    """(..., seq, seq) → (..., seq): each word's most-attended other word (itself excluded)."""
    seq = weights.shape[-1]
    eye = torch.eye(seq, dtype=torch.bool, device=weights.device)
    return weights.masked_fill(eye, float("-inf")).argmax(dim=-1)


#: Relations scored from the head word to the dependent (Clark et al.: the preposition attends to its object).
_HEAD_ATTENDS_TO_DEPENDENT = frozenset({"pobj"})


def scored_pairs(sentence, relation: str) -> list[tuple[int, int]]:
    """(query, target) pairs for ``relation`` in ``sentence``: (dependent, head), or (head, dependent) for pobj.

    The word that attends comes first: chapter 4's scores and its explorer's boxes (row = query) both use these."""
    arcs = sentence.arcs(relation)
    return [(h, d) for d, h in arcs] if relation in _HEAD_ATTENDS_TO_DEPENDENT else arcs


def relation_accuracy(weights: Tensor, arcs: Sequence[tuple[int, int]]) -> Tensor:
    """weights (n_layers, n_heads, seq, seq) over the words of one sentence; arcs: (dependent, head) pairs →
    (n_layers, n_heads): the fraction of arcs whose dependent's most-attended other word is its head.

    It scores the pairs in the order given (first attends to second); :func:`relation_counts` passes pobj arcs
    reversed, so that the preposition attends to its object."""
    if not arcs:
        raise ValueError("relation_accuracy needs at least one arc")
    predicted = _predicted_heads(weights)
    deps = torch.tensor([d for d, _ in arcs], device=weights.device)
    heads = torch.tensor([h for _, h in arcs], device=weights.device)
    return (predicted[..., deps] == heads).to(weights.dtype).mean(dim=-1)


def relation_counts(
    word_attns: Sequence[Tensor], sentences: Sequence, relations: Sequence[str]
) -> dict[str, tuple[Tensor, int]]:
    """Over a corpus: for each relation, (correct (n_layers, n_heads) counts, number of arcs), each arc scored in
    its relation's direction (dependent → head; head → dependent for pobj)."""
    out = {}
    for relation in relations:
        correct, total = None, 0
        for weights, sentence in zip(word_attns, sentences):
            arcs = scored_pairs(sentence, relation)
            if not arcs:
                continue
            c = relation_accuracy(weights.double(), arcs) * len(arcs)
            correct = c if correct is None else correct + c
            total += len(arcs)
        out[relation] = (correct.round().long() if correct is not None else None, total)
    return out


def offset_baseline(sentences: Sequence, relation: str, max_offset: int = 5) -> tuple[int, float]:
    """The best fixed-offset predictor for ``relation``: (offset, accuracy), where predicting ``target = query +
    offset`` for every arc is right that fraction of the time (offsets ±1..±max_offset; ties go to the smaller
    |offset|). Query and target follow the relation's direction: the dependent and its head, or for pobj the
    preposition and its object, so pobj's offsets count from the preposition (+2 for "in the park")."""
    pairs = [pair for s in sentences for pair in scored_pairs(s, relation)]
    if not pairs:
        raise ValueError(f"no {relation} arcs")
    offsets = sorted((o for o in range(-max_offset, max_offset + 1) if o), key=lambda o: (abs(o), o))
    scores = {o: sum(target - query == o for query, target in pairs) / len(pairs) for o in offsets}
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

    @property
    def direction(self) -> str:
        """Which word attends to which when this relation is scored (the baseline offset counts from the first)."""
        return "head → dependent" if self.relation in _HEAD_ATTENDS_TO_DEPENDENT else "dependent → head"


def relation_table(word_attns: Sequence[Tensor], sentences: Sequence, relations: Sequence[str]) -> list[RelationRow]:
    """For each relation: the best single head's accuracy over the corpus and the best fixed-offset baseline, both
    in the relation's direction (:attr:`RelationRow.direction`)."""
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
