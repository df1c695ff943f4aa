"""Visible checks of exercise 6 (chapter 6, the layer hierarchy and induction heads), reached as ``mh.checks.<name>``.

Like every module of :mod:`manyheads.checks`: each ``check_*`` takes the student's function, runs it on small fixed
inputs, prints a one-line success message or raises ``AssertionError`` naming the likely bug;
``NotImplementedError`` from an unanswered stub passes through unchanged. The graded hidden tests use other, random
inputs. Each check tries every input form the contract allows (a batch of one, a single head, a single token or
half-length 1, a single layer, causal and bidirectional weights, float32 and float64), so that passing it and then
losing hidden points means a real bug.

Contract (exercise 6): :func:`check_mean_attention_distance` (Σ_j w_ij·|i − j| averaged over queries and batch, per
head), :func:`check_induction_score` (mean weight of the second copy's queries i on key i − half + 1, per head;
ValueError unless seq = 2·half + 1), :func:`check_attention_rollout` (A_{L−1} @ … @ A_0 with
A_l = 0.5·mean over heads + 0.5·I). Every result is in the dtype of ``weights``, which must not change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from manyheads.checks.core import (
    FormInput,
    call_student,
    check_forms,
    close_to,
    expect_value_error,
    fixed_randn,
    max_abs_diff,
    report_passed,
    require_tensor,
)

__all__ = ["check_mean_attention_distance", "check_induction_score", "check_attention_rollout"]


def _attention(*shape: int, seed: int, causal: bool = False, sharpness: float = 2.0) -> Tensor:
    """float64 attention weights of ``shape`` (..., seq, seq): softmax rows, lower-triangular when ``causal``."""
    scores = fixed_randn(*shape, seed=seed) * sharpness
    if causal:
        seq = shape[-1]
        scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, dim=-1)


def _run(fn: Callable[..., Any], what: str, weights: Tensor, *args: Any) -> Tensor:
    """Call the answer on a copy of ``weights`` (call_student fails it if the copy changes); the result must be a
    tensor."""
    return require_tensor(f"{fn.__name__}'s result", call_student(fn, what, weights.clone(), *args))


def _shape(name: str, got: Tensor, want: tuple[int, ...], what: str, hint: str) -> None:
    if tuple(got.shape) != want:
        raise AssertionError(f"{name} returned shape {tuple(got.shape)} for {what}, expected {want}: {hint}")


def _run_form(fn: Callable[..., Any], form: FormInput) -> Tensor:
    return _run(fn, form.what, *form.args)


_NO_SQUEEZE_HEADS = (
    "{name} returned shape {got} for {what}, expected {want}: (n_heads,): keep the heads' axis even when there is a "
    "single head or batch item (no squeeze)"
)


def _same(got: Tensor, want: Tensor) -> bool:
    return got.shape == want.shape and close_to(got, want)


# ------------------------------------------------------------------------------------------------------------------
# Part 1: mean_attention_distance


def _gaps(seq: int, signed: bool = False) -> Tensor:
    positions = torch.arange(seq, dtype=torch.float64)
    gaps = positions[:, None] - positions[None, :]  # (query i, key j): i − j
    return gaps if signed else gaps.abs()


def _reference_distance(weights: Tensor, signed: bool = False) -> Tensor:
    """The contract: (batch, n_heads, seq, seq) → (n_heads,), Σ_j w_ij·|i − j| averaged over queries and batch."""
    return (weights.double() * _gaps(weights.shape[-1], signed)).sum(-1).mean(-1).mean(0)


def check_mean_attention_distance(mean_attention_distance: Callable[[Tensor], Tensor]) -> None:
    """Part 1: ``mean_attention_distance(weights)`` (batch, n_heads, seq, seq) → (n_heads,): for each query i the
    expected distance Σ_j weights[..., i, j]·|i − j|, averaged over all queries and the batch."""
    weights = _attention(2, 3, 5, 5, seed=61)  # bidirectional: keys on both sides of each query
    what = "bidirectional weights (batch 2, n_heads 3, seq 5)"
    got = _run(mean_attention_distance, what, weights)
    if got.dim() == 0:
        raise AssertionError(
            f"mean_attention_distance returned a single number for {what}: keep one distance per head, shape "
            "(n_heads,) = (3,); average over the batch (axis 0) and the queries, not over the heads"
        )
    if tuple(got.shape) == (2,):
        raise AssertionError(
            f"mean_attention_distance returned shape (2,) = (batch,) for {what}: average over the batch (axis 0) and "
            "keep the heads (axis 1), shape (n_heads,) = (3,)"
        )
    _shape(
        "mean_attention_distance",
        got,
        (3,),
        what,
        "one number per head: sum over the keys (last axis), then average over the queries and over the batch",
    )
    want = _reference_distance(weights)
    rows = (weights * _gaps(5)).sum(-1)  # (batch, n_heads, seq): each query's expected distance
    wrong = {
        "the distance is the absolute value |i − j|: a key after the query (j > i) is as far as one before it "
        "(i − j alone lets keys on the two sides cancel)": _reference_distance(weights, signed=True),
        "you averaged over the keys: each query's expected distance is the weighted SUM Σ_j w_ij·|i − j| (the "
        "weights already sum to 1), then you average over the queries": rows.mean(0).mean(-1) / 5,
        "the result does not depend on the weights: weight each distance |i − j| by weights[..., i, j]": (
            _gaps(5).mean(-1).mean(-1).expand(3)
        ),
        "you summed over the queries: average them (each query's expected distance, then the mean)": (
            rows.sum(-1).mean(0)
        ),
        "you summed over the batch: average over it": rows.mean(-1).sum(0),
    }
    for hint, value in wrong.items():
        if _same(got, value) and not _same(got, want):
            raise AssertionError(f"wrong distances for {what}: {hint}")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong distances for {what}: expected {[round(float(v), 4) for v in want]}, got "
            f"{[round(float(v), 4) for v in got.detach().double()]} (off by up to {max_abs_diff(got, want):.3g})"
        )

    # The other forms the contract allows and the hidden tests use.
    self_only = torch.eye(4, dtype=torch.float64).expand(2, 2, 4, 4)
    to_first = torch.zeros(1, 2, 6, 6, dtype=torch.float64)
    to_first[..., 0] = 1.0  # every query on the first token: query i is i tokens away
    forms = [
        ("a batch of one, weights (1, 4, 6, 6)", _attention(1, 4, 6, 6, seed=62)),
        ("one head, weights (3, 1, 5, 5)", _attention(3, 1, 5, 5, seed=63)),
        ("a single token, weights (2, 3, 1, 1) (distance 0)", torch.ones(2, 3, 1, 1, dtype=torch.float64)),
        ("as many heads as batch items, weights (3, 3, 4, 4)", _attention(3, 3, 4, 4, seed=64)),
        ("causal (decoder) weights (2, 2, 7, 7)", _attention(2, 2, 7, 7, seed=65, causal=True)),
        ("weights of heads that attend only to themselves (distance 0)", self_only),
        ("every query on the first token (query i is i tokens away)", to_first),
        ("uniform rows over 5 keys", torch.full((2, 2, 5, 5), 0.2, dtype=torch.float64)),
        ("float32 weights (2, 3, 6, 6)", _attention(2, 3, 6, 6, seed=66).float()),
    ]
    check_forms(
        mean_attention_distance,
        [FormInput(what, (form,)) for what, form in forms],
        _reference_distance,
        run=_run_form,
        shape_message=_NO_SQUEEZE_HEADS,
        wrong_message="wrong distances for {what}: expected {want_values}, got {got_values} (a weight on key j counts "
        "|i − j| for query i, whatever the dtype; average over every query and batch item)",
    )
    report_passed("check_mean_attention_distance")


# ------------------------------------------------------------------------------------------------------------------
# Part 2: induction_score


def _reference_induction(
    weights: Tensor, half: int, first: int | None = None, last: int | None = None, target: int = 1
) -> Tensor:
    """The contract (first = half + 1, last = 2·half, target = 1): mean over queries i = first … last of
    weights[..., i, i − half + target], then over the batch. Other values give the classic off-by-one answers."""
    first = half + 1 if first is None else first
    last = 2 * half if last is None else last
    queries = torch.arange(first, last + 1)
    return weights.double()[..., queries, queries - half + target].mean(-1).mean(0)


def _pattern(batch: int, half: int, columns: list[Callable[[int], int]]) -> Tensor:
    """Causal one-hot weights for [BOS] + r + r: head h's query i in the second copy on key columns[h](i), every
    other query on BOS."""
    seq = 2 * half + 1
    weights = torch.zeros(batch, len(columns), seq, seq, dtype=torch.float64)
    weights[..., 0] = 1.0
    for h, column in enumerate(columns):
        for i in range(half + 1, seq):
            weights[:, h, i] = 0.0
            weights[:, h, i, column(i)] = 1.0
    return weights


def check_induction_score(induction_score: Callable[[Tensor, int], Tensor]) -> None:
    """Part 2: ``induction_score(weights, half)`` (batch, n_heads, seq, seq) with seq = 2·half + 1 → (n_heads,): the
    mean over the batch and the queries i = half + 1 … 2·half of weights[..., i, i − half + 1]; ValueError when
    seq ≠ 2·half + 1."""
    half = 3
    weights = _pattern(2, half, [lambda i: i - half + 1, lambda i: i - half, lambda i: i - 1])
    what = (
        "one-hot heads on [BOS] + r + r with half 3: an induction head, a duplicate-token head, a previous-token head"
    )
    got = _run(induction_score, what, weights, half)
    if got.dim() == 0:
        raise AssertionError(
            f"induction_score returned a single number for {what}: keep one score per head, shape (n_heads,) = (3,)"
        )
    _shape("induction_score", got, (3,), what, "one score per head: average over the batch and the queries")
    if close_to(got, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)):
        raise AssertionError(
            "you read weights[..., i, i − half], the earlier copy of the current token itself (a duplicate-token "
            "head scores 1 that way): the induction target is the token right AFTER that copy, i − half + 1"
        )
    one_hot, one_hot_what, one_hot_got = weights, what, got  # judged after the common bugs below

    weights = _attention(2, 3, 11, 11, seed=71, causal=True)  # half 5
    what = "random causal weights (batch 2, n_heads 3, seq 11), half 5"
    got = _run(induction_score, what, weights, 5)
    want = _reference_induction(weights, 5)
    _shape("induction_score", got, (3,), what, "one score per head: average over the batch and the queries")
    wrong = {
        "the queries start one too early: position half (= 5 here) is the last token of the FIRST copy; the second "
        "copy's queries are i = half + 1 … 2·half": _reference_induction(weights, 5, first=5, last=9),
        "the queries include position half (= 5 here), the last token of the FIRST copy: the second copy's queries "
        "are i = half + 1 … 2·half": _reference_induction(weights, 5, first=5),
        "you skipped the second copy's first query i = half + 1: average over every i = half + 1 … 2·half": (
            _reference_induction(weights, 5, first=7)
        ),
        "the target column is i − half, the earlier copy of the current token: the induction target is the token "
        "right after it, i − half + 1": _reference_induction(weights, 5, target=0),
        "the target column is i − half + 2: the token right after the earlier copy of token i is i − half + 1": (
            _reference_induction(weights, 5, target=2)
        ),
        "that is the first batch item only: average over the whole batch": _reference_induction(weights[:1], 5),
    }
    for hint, value in wrong.items():
        if _same(got, value) and not _same(got, want):
            raise AssertionError(f"wrong scores for {what}: {hint}")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong scores for {what}: expected {[round(float(v), 4) for v in want]}, got "
            f"{[round(float(v), 4) for v in got.detach().double()]} (off by up to {max_abs_diff(got, want):.3g})"
        )
    if not close_to(one_hot_got, _reference_induction(one_hot, half)):
        raise AssertionError(
            f"expected [1, 0, 0] for {one_hot_what} (only head 0 puts its weight on i − half + 1 at every query of the "
            f"second copy), got {[round(float(v), 4) for v in one_hot_got.detach().double()]}"
        )

    # The other forms the contract allows and the hidden tests use.
    forms = [
        ("a batch of one, weights (1, 4, 9, 9), half 4", _attention(1, 4, 9, 9, seed=72, causal=True), 4),
        ("one head, weights (3, 1, 7, 7), half 3", _attention(3, 1, 7, 7, seed=73, causal=True), 3),
        (
            "half 1, weights (2, 2, 3, 3): [BOS] a a, the one query i = 2 scores its weight on key 2 (itself)",
            _attention(2, 2, 3, 3, seed=74, causal=True),
            1,
        ),
        ("half 2, bidirectional weights (2, 3, 5, 5)", _attention(2, 3, 5, 5, seed=75), 2),
        ("as many heads as batch items, weights (3, 3, 9, 9), half 4", _attention(3, 3, 9, 9, seed=76), 4),
        ("float32 weights (2, 2, 13, 13), half 6", _attention(2, 2, 13, 13, seed=77, causal=True).float(), 6),
    ]
    check_forms(
        induction_score,
        [FormInput(what, (form, form_half)) for what, form, form_half in forms],
        _reference_induction,
        run=_run_form,
        shape_message=_NO_SQUEEZE_HEADS,
        wrong_message="wrong scores for {what}: expected {want_values}, got {got_values} (queries i = half + 1 … "
        "2·half, key i − half + 1, averaged over those queries and the batch)",
    )

    base = _attention(1, 2, 7, 7, seed=78, causal=True)
    for what, form, form_half in (
        ("seq 7 with half 2 (2·half + 1 = 5)", base, 2),
        ("seq 7 with half 4 (2·half + 1 = 9)", base, 4),
        ("seq 8 with half 3 (2·half + 1 = 7)", _attention(1, 2, 8, 8, seed=79, causal=True), 3),
        ("seq 6 with half 3, no BOS (2·half + 1 = 7)", _attention(1, 2, 6, 6, seed=80, causal=True), 3),
    ):
        expect_value_error(
            induction_score, what, "the weights must come from [BOS] + r + r, seq = 2·half + 1", form.clone(), form_half
        )
    report_passed("check_induction_score")


# ------------------------------------------------------------------------------------------------------------------
# Part 3: attention_rollout


def _reference_mixes(weights: Tensor, residual: float = 0.5, heads: str = "mean") -> list[Tensor]:
    """Each layer's A_l = (1 − residual)·(heads' mean, or sum) + residual·I, float64; the contract: 0.5 and mean."""
    eye = torch.eye(weights.shape[-1], dtype=torch.float64)
    pooled = [layer.double().mean(1) if heads == "mean" else layer.double().sum(1) for layer in weights]
    return [(1 - residual) * p + residual * eye for p in pooled]


def _reference_product(mixes: list[Tensor], reverse: bool = False) -> Tensor:
    """A_{L−1} @ … @ A_0 (the contract), or A_0 @ … @ A_{L−1} when ``reverse``."""
    out = mixes[0]
    for a in mixes[1:]:
        out = out @ a if reverse else a @ out
    return out


def _reference_rollout(weights: Tensor) -> Tensor:
    return _reference_product(_reference_mixes(weights))


def check_attention_rollout(attention_rollout: Callable[[Tensor], Tensor]) -> None:
    """Part 3: ``attention_rollout(weights)`` (n_layers, batch, n_heads, seq, seq) → (batch, seq, seq) =
    A_{L−1} @ … @ A_1 @ A_0 with A_l = 0.5·(mean over heads of weights[l]) + 0.5·I."""
    weights = _attention(3, 2, 2, 4, 4, seed=91)  # 3 layers, batch 2, 2 heads, seq 4
    what = "weights (n_layers 3, batch 2, n_heads 2, seq 4)"
    got = _run(attention_rollout, what, weights)
    if tuple(got.shape) == (4, 4):
        raise AssertionError(
            f"attention_rollout returned shape (4, 4) for {what}: keep the batch, one (seq, seq) matrix per input, "
            "shape (batch, seq, seq) = (2, 4, 4)"
        )
    if tuple(got.shape) == (2, 2, 4, 4):
        raise AssertionError(
            f"attention_rollout returned shape (2, 2, 4, 4) for {what}: average each layer's weights over the heads "
            "(axis 1 of weights[l]) first, shape (batch, seq, seq) = (2, 4, 4)"
        )
    _shape("attention_rollout", got, (2, 4, 4), what, "(batch, seq, seq): one rollout matrix per input")
    want = _reference_rollout(weights)
    mixes = _reference_mixes(weights)
    wrong = {
        "the product is in the wrong order: the first layer acts first, so it stands RIGHTMOST, "
        "A_2 @ A_1 @ A_0 (a later layer multiplies from the left: rollout = A_l @ rollout)": _reference_product(
            mixes, True
        ),
        "the residual connection is missing: A_l = 0.5 · (mean over heads of weights[l]) + 0.5 · I": (
            _reference_product(_reference_mixes(weights, residual=0.0))
        ),
        "each A_l must keep rows summing to 1: A_l = 0.5 · mean + 0.5 · I (the mean plus I has rows summing to "
        "2, and the product grows with every layer)": _reference_product([2 * a for a in mixes]),
        "average the heads, do not sum them: A_l = 0.5 · (mean over heads of weights[l]) + 0.5 · I": (
            _reference_product(_reference_mixes(weights, heads="sum"))
        ),
        "that is A_{L−1} alone: the rollout multiplies every layer's A_l": mixes[-1],
        "that is A_0 alone: the rollout multiplies every layer's A_l": mixes[0],
        "that multiplies element by element (*): the rollout is a matrix product (@ or torch.matmul)": (
            mixes[0] * mixes[1] * mixes[2]
        ),
    }
    for hint, value in wrong.items():
        if _same(got, value) and not _same(got, want):
            raise AssertionError(f"wrong rollout for {what}: {hint}")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong rollout for {what} (off by up to {max_abs_diff(got, want):.3g}): "
            + (
                "its rows should sum to 1, as every A_l's do"
                if not close_to(got.detach().double().sum(-1), torch.ones(2, 4, dtype=torch.float64))
                else "the rows sum to 1 but the entries differ from A_2 @ A_1 @ A_0"
            )
        )

    # The other forms the contract allows and the hidden tests use.
    forms = [
        ("a single layer, weights (1, 2, 3, 5, 5): the rollout is A_0 itself", _attention(1, 2, 3, 5, 5, seed=92)),
        ("a batch of one, weights (2, 1, 3, 5, 5)", _attention(2, 1, 3, 5, 5, seed=93)),
        ("one head, weights (3, 2, 1, 4, 4)", _attention(3, 2, 1, 4, 4, seed=94)),
        (
            "a single token, weights (2, 2, 2, 1, 1): the rollout is [[1]]",
            torch.ones(2, 2, 2, 1, 1, dtype=torch.float64),
        ),
        ("causal (decoder) weights (4, 3, 2, 6, 6)", _attention(4, 3, 2, 6, 6, seed=95, causal=True)),
        ("as many layers as heads and batch items, weights (2, 2, 2, 3, 3)", _attention(2, 2, 2, 3, 3, seed=96)),
        ("float32 weights (3, 2, 2, 5, 5)", _attention(3, 2, 2, 5, 5, seed=97).float()),
    ]
    check_forms(
        attention_rollout,
        [FormInput(what, (form,)) for what, form in forms],
        _reference_rollout,
        run=_run_form,
        shape_message="{name} returned shape {got} for {what}, expected {want}: (batch, seq, seq): keep the batch "
        "axis even for a batch of one or a single token (no squeeze)",
        wrong_message="wrong rollout for {what} (off by up to {diff:.3g}): A_l = 0.5 · (mean over heads of "
        "weights[l]) + 0.5 · I for every layer, multiplied as A_{{L−1}} @ … @ A_0, in the weights' dtype "
        "(torch.eye(seq) alone is float32)",
    )
    report_passed("check_attention_rollout")
