"""Visible checks of exercise 4 (chapter 4, what heads learn), reached as ``mh.checks.<name>``.

Like every module of :mod:`manyheads.checks`: each ``check_*`` takes the student's function, runs it on small fixed
inputs, prints a one-line success message or raises ``AssertionError`` naming the likely bug;
``NotImplementedError`` from an unanswered stub passes through unchanged. The graded hidden tests use other, random
inputs. Every function returns its numbers in the dtype of the weights it is given (core's rule: the first inputs
test it here, :func:`~manyheads.checks.core.check_forms` on the other forms, float32 among them) and leaves its inputs
as they were (:func:`~manyheads.checks.core.call_student`).

Contract (exercise 4): :func:`check_mean_attention_entropy` (mean over query rows of −Σ w ln w),
:func:`check_offset_attention`, :func:`check_relation_accuracy`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from manyheads.checks.core import (
    DTYPE_MESSAGE,
    FormInput,
    call_student,
    check_forms,
    close_to,
    fixed_randn,
    max_abs_diff,
    report_passed,
    require_tensor,
)

__all__ = ["check_mean_attention_entropy", "check_offset_attention", "check_relation_accuracy"]


def _shape(name: str, got: Tensor, want: tuple[int, ...], hint: str) -> None:
    if tuple(got.shape) != want:
        raise AssertionError(f"{name} returned shape {tuple(got.shape)}, expected {want}: {hint}")


def _keeps_dtype(name: str, got: Tensor, weights: Tensor, what: str) -> None:
    """The dtype rule on a first input, after the diagnoses of named bugs and before the plain comparison of numbers
    (check_forms applies it to the other forms)."""
    if got.dtype != weights.dtype:
        fields = {"name": name, "kind": "", "got": got.dtype, "want": weights.dtype, "what": what}
        raise AssertionError(DTYPE_MESSAGE.format(**fields, why="the dtype of its inputs"))


# ------------------------------------------------------------------------------------------------------------------
# Part 1: mean_attention_entropy

_AXIS_NAMES = {-1: "the keys", -2: "the queries"}
_ENTROPY_RULE = (
    "the entropy of a row sums −w ln w over the keys (axis -1, the last), and an attention head's value averages "
    "those row entropies over its queries (axis -2)"
)


def _axis(axis: int) -> str:
    return f"axis {axis} ({_AXIS_NAMES.get(axis, 'a leading axis')})"


def _reductions(terms: Tensor) -> list[tuple[dict[int, str], Tensor]]:
    """Every way of summing or averaging −w ln w over one to three of the four axes of ``terms``: ({axis counted
    from the end: "sum" or "mean"}, result)."""
    found = []
    for count in (1, 2, 3):
        for axes in itertools.combinations(range(-terms.dim(), 0), count):
            for ops in itertools.product(("sum", "mean"), repeat=count):
                result = terms.sum(dim=axes)
                for axis, op in zip(axes, ops):
                    result = result / terms.shape[axis] if op == "mean" else result
                found.append((dict(zip(axes, ops)), result))
    return found


def _reduced_axes(ops: dict[int, str]) -> str:
    """The reductions in the order of the axes, e.g. 'summed over axis -2 (the queries) and averaged over axis -1
    (the keys)'."""
    verb = {"sum": "summed", "mean": "averaged"}
    axes = sorted(ops)
    if len(axes) == 1:
        return f"{verb[ops[axes[0]]]} over {_axis(axes[0])} only"
    if len(set(ops.values())) == 1:
        listed = " and ".join(_axis(a) for a in axes)
        return f"{verb[ops[axes[0]]]} over {'both ' if len(axes) == 2 else ''}{listed}"
    parts = [f"{verb[ops[a]]} over {_axis(a)}" for a in axes]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _entropy_axes(got: Tensor, terms: Tensor) -> str | None:
    """The message naming the axes the answer reduced, if its result is −w ln w (or w ln w, or in bits) summed or
    averaged over other axes than the keys (sum) and the queries (mean); None otherwise."""
    right = {-2: "mean", -1: "sum"}
    for ops, result in _reductions(terms):
        if ops == right:
            continue
        if not any(close_to(got, result * factor) for factor in (1, -1, 1 / math.log(2), -1 / math.log(2))):
            continue
        if ops == {-2: "sum", -1: "sum"}:
            return (
                "you summed over the query rows (axis -2) as well as over the keys (axis -1): average the row "
                f"entropies over the queries instead: {_ENTROPY_RULE}"
            )
        want = tuple(terms.shape[:-2])
        shape = "" if tuple(got.shape) == want else f", which gives shape {tuple(got.shape)}, not {want}"
        message = f"your answer {_reduced_axes(ops)}{shape}: {_ENTROPY_RULE}"
        if min(ops) < -2:
            message += (
                ". A leading axis (a head, a layer, a sentence) stays; axes counted from the front (such as dim=1 "
                "or dim=2) name other axes as soon as weights have another number of leading axes: count from the end "
                "(dim=-1 for the keys, then dim=-1 again for the queries)"
            )
        return message
    return None


def check_mean_attention_entropy(mean_attention_entropy: Callable[[Tensor], Tensor]) -> None:
    """Part 1: ``mean_attention_entropy(weights)`` (..., seq_q, seq_k) → (...), mean over queries of −Σ w ln w, in
    the dtype of weights."""
    weights = torch.softmax(fixed_randn(2, 3, 4, 5, seed=41), dim=-1)  # four axes of four sizes: shapes name axes
    terms = -torch.special.xlogy(weights, weights)
    rows = terms.sum(-1)
    what = "weights of shape (2, 3, 4, 5)"
    got = require_tensor("mean_attention_entropy's result", call_student(mean_attention_entropy, what, weights))
    if not close_to(got, rows.mean(-1)):  # other axes reduced (a shape of its own, or the right shape)
        diagnosis = _entropy_axes(got, terms)
        if diagnosis is not None:
            raise AssertionError(diagnosis)
    _shape(
        "mean_attention_entropy",
        got,
        (2, 3),
        "one number per head: sum over keys (last axis), then average over queries (the axis before)",
    )
    if close_to(got, -rows.mean(-1)):
        raise AssertionError("the entropy came out negative: it is −Σ w ln w")
    if close_to(got, rows.mean(-1) / math.log(2)):
        raise AssertionError("that is in bits: use the natural logarithm (nats)")
    _keeps_dtype("mean_attention_entropy", got, weights, what)
    if not close_to(got, rows.mean(-1)):
        raise AssertionError(
            f"mean_attention_entropy differs from the mean row entropy by up to {max_abs_diff(got, rows.mean(-1)):.3g}"
        )
    one_hot = torch.eye(3, dtype=torch.float64)
    got = require_tensor(
        "mean_attention_entropy's result", call_student(mean_attention_entropy, "one-hot weights", one_hot)
    )
    _keeps_dtype("mean_attention_entropy", got, one_hot, "one-hot weights")
    if torch.isnan(got).any():
        raise AssertionError("NaN for weights containing zeros: 0 · ln 0 counts as 0 (torch.special.xlogy(w, w))")
    if not close_to(got, torch.tensor(0.0, dtype=torch.float64)):
        raise AssertionError(f"one-hot rows have entropy 0, got {got.tolist()}")

    # The other forms the spec allows and the hidden tests use: one leading axis, a leading axis of size 1,
    # seq_q ≠ seq_k, exact zeros, float32.
    scores = fixed_randn(2, 1, 3, 5, seed=44) * 2
    scores[..., 2::3] = float("-inf")  # exact zeros in every row
    weights = torch.softmax(scores, dim=-1)
    float32 = ": float32 must work too (a constant such as 1e-300 is 0 in float32)"
    check_forms(
        mean_attention_entropy,
        [
            FormInput("weights of shape (2, 1, 3, 5) with zeros", (weights,)),
            FormInput("float32 weights of shape (2, 1, 3, 5) with zeros", (weights.float(),), hint=float32),
            FormInput("3-D weights of shape (2, 3, 5) with zeros", (weights[:, 0],)),
        ],
        lambda w: -torch.special.xlogy(w, w).sum(-1).mean(-1),
        shape_message="{name} returned shape {got}, expected {want}: for {what} the result keeps every leading "
        "axis, even one of size 1 (no squeeze): reduce only the last two axes",
        wrong_message="wrong mean entropy for {what} (off by up to {diff:.3g}){hint}",
    )
    report_passed("check_mean_attention_entropy")


# ------------------------------------------------------------------------------------------------------------------
# Part 2: offset_attention


def _diagonal_of_other_axes(got: Tensor, weights: Tensor, offset: int, what: str) -> str | None:
    """The message for an answer that averaged the diagonal of two axes other than the last two (NaN where that
    diagonal is empty); None if it did not."""
    last = (weights.dim() - 2, weights.dim() - 1)
    for dims in itertools.combinations(range(weights.dim()), 2):
        other = weights.diagonal(offset=offset, dim1=dims[0], dim2=dims[1]).mean(-1)
        if dims == last or got.shape != other.shape:
            continue
        if not torch.allclose(got.detach().double(), other, equal_nan=True):
            continue
        said = f"offset_attention returned shape {tuple(got.shape)} for {what}, expected {tuple(weights.shape[:-2])}"
        if dims == (0, 1):
            return (
                f"{said}: that is the diagonal of axes 0 and 1, which torch's diagonal reads by default; name the "
                "last two axes (dim1=-2, dim2=-1)"
            )
        return (
            f"{said}: that is the diagonal of axes {dims[0]} and {dims[1]}, counted from the front, which are the "
            f"last two only for {dims[1] + 1}-D weights; count from the end (dim1=-2, dim2=-1)"
        )
    return None


def _works_on_4d(offset_attention: Callable[[Tensor, int], Tensor], w: Tensor, offset: int) -> bool:
    """Whether the answer that failed on 3-D ``w`` gets 4-D weights (one more leading axis) right."""
    weights = w.unsqueeze(0)
    try:
        got = call_student(offset_attention, "4-D weights", weights, offset)
    except AssertionError:
        return False
    want = weights.diagonal(offset=offset, dim1=-2, dim2=-1).mean(-1)
    return isinstance(got, Tensor) and close_to(got, want)


def check_offset_attention(offset_attention: Callable[[Tensor, int], Tensor]) -> None:
    """Part 2: ``offset_attention(weights, offset)`` → (...), mean of weights[..., i, i + offset] over valid i, in
    the dtype of weights."""
    w = torch.arange(20, dtype=torch.float64).reshape(1, 4, 5) / 100  # seq_q 4, seq_k 5
    cases = {
        -1: (w[0, 1, 0] + w[0, 2, 1] + w[0, 3, 2]) / 3,
        1: (w[0, 0, 1] + w[0, 1, 2] + w[0, 2, 3] + w[0, 3, 4]) / 4,
        2: (w[0, 0, 2] + w[0, 1, 3] + w[0, 2, 4]) / 3,
    }
    for offset, want in cases.items():
        what = f"offset {offset}"
        try:
            got = require_tensor("offset_attention's result", call_student(offset_attention, what, w, offset))
        except AssertionError as failure:
            if isinstance(failure.__cause__, IndexError) and _works_on_4d(offset_attention, w, offset):
                raise AssertionError(
                    f"offset_attention works on 4-D weights but raised IndexError on 3-D weights {tuple(w.shape)}: "
                    "axes counted from the front (2 and 3) exist only for 4-D weights; count from the end "
                    "(dim1=-2, dim2=-1, the last two axes whatever the number of leading axes)"
                ) from failure
            raise
        diagnosis = _diagonal_of_other_axes(got, w, offset, what)
        if diagnosis is not None:
            raise AssertionError(diagnosis)
        _shape("offset_attention", got, (1,), "drop the last two axes (one number per head)")
        if offset == -1 and close_to(got, cases[1].reshape(1)):
            raise AssertionError("offset −1 means the previous token: weights[..., i, i - 1], not i + 1")
        _keeps_dtype("offset_attention", got, w, what)
        if not close_to(got, want.reshape(1)):
            raise AssertionError(
                f"offset {offset}: expected {float(want):.4f}, got {got.tolist()} -- average only over queries i with "
                "0 ≤ i + offset < seq_k (the matrix is 4 × 5 here: seq_q ≠ seq_k)"
            )
    weights = torch.softmax(fixed_randn(3, 2, 6, 6, seed=42), dim=-1)
    what = "weights of shape (3, 2, 6, 6)"
    got = require_tensor("offset_attention's result", call_student(offset_attention, what, weights, -1))
    want = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
    diagnosis = _diagonal_of_other_axes(got, weights, -1, what)
    if diagnosis is not None:
        raise AssertionError(diagnosis)
    _shape("offset_attention", got, (3, 2), "one number per head")
    _keeps_dtype("offset_attention", got, weights, what)
    if not close_to(got, want):
        raise AssertionError(
            f"wrong previous-token attention on (3, 2, 6, 6) weights (max diff {max_abs_diff(got, want):.3g})"
        )

    # The other forms the spec allows and the hidden tests use: more queries than keys, no leading axes, offset 0,
    # float32.
    tall = torch.softmax(fixed_randn(2, 5, 4, seed=45), dim=-1)  # seq_q 5 > seq_k 4
    table = [
        FormInput(what, (w, offset))
        for w, offset, what in (
            (tall, -3, "weights (2, 5, 4): more queries than keys, offset −3"),
            (tall, 2, "weights (2, 5, 4): more queries than keys, offset +2"),
            (
                torch.softmax(fixed_randn(4, 6, seed=46), dim=-1),
                1,
                "2-D weights (4, 6) with no leading axes, offset +1",
            ),
            (torch.softmax(fixed_randn(2, 6, 9, seed=47), dim=-1), 0, "weights (2, 6, 9), offset 0 (the token itself)"),
            (tall.float(), -1, "float32 weights (2, 5, 4), offset −1"),
        )
    ]
    check_forms(
        offset_attention,
        table,
        lambda weights, offset: weights.diagonal(offset=offset, dim1=-2, dim2=-1).mean(-1),
        shape_message="{name} returned shape {got}, expected {want}: for {what} drop the last two axes and keep the "
        "others (none for 2-D weights: a 0-dimensional tensor)",
        wrong_message="wrong result for {what}: expected {want_values}, got {got_values}. Average weights[..., i, "
        "i + offset] over every query i with 0 ≤ i < seq_q and 0 ≤ i + offset < seq_k (seq_q may be larger or "
        "smaller than seq_k; offset may be 0)",
    )
    report_passed("check_offset_attention")


# ------------------------------------------------------------------------------------------------------------------
# Part 3: relation_accuracy


def _predicted(weights: Tensor, *, skip_self: bool = True, axis: int = -1) -> Tensor:
    """(..., seq): for each word, the word it attends to most (axis -1); along axis -2, the word that attends most
    to it (the wrong axis)."""
    w = weights if axis == -1 else weights.transpose(-2, -1)
    if skip_self:
        w = w.masked_fill(torch.eye(w.shape[-1], dtype=torch.bool), float("-inf"))
    return w.argmax(dim=-1)


def _scored(predicted: Tensor, arcs: Sequence[tuple[int, int]], *, reversed_arcs: bool = False) -> Tensor:
    """(n_layers, n_heads): the fraction of (dependent, head) arcs where the dependent's prediction is the head."""
    pairs = [(h, d) for d, h in arcs] if reversed_arcs else list(arcs)
    return torch.stack([predicted[..., d] == h for d, h in pairs], dim=-1).double().mean(dim=-1)


def _reference_relation_accuracy(weights: Tensor, arcs: list[tuple[int, int]]) -> Tensor:
    """(n_layers, n_heads): the fraction of arcs whose dependent's most-attended other word is its head."""
    return _scored(_predicted(weights), arcs)


# The likely bugs, each as a computation and what it means; an answer is diagnosed when it matches the computation
# on both examples of the check (on the first alone, the argmax over axis -2 with the word itself kept and the arcs
# read the wrong way round give the same numbers).
_RELATION_BUGS: tuple[tuple[Callable[[Tensor, Sequence[tuple[int, int]]], Tensor], str], ...] = (
    (
        lambda w, arcs: _scored(_predicted(w, skip_self=False), arcs),
        "a word that attends most to itself predicts itself: exclude the dependent itself before the argmax (its "
        "own weight must never win)",
    ),
    (
        lambda w, arcs: _scored(_predicted(w, axis=-2), arcs),
        "that is the argmax over axis -2 (for each word, the word that attends most to it): the prediction for a "
        "dependent is the other word its own row attends to most, the argmax over the keys (axis -1, the last)",
    ),
    (
        lambda w, arcs: _scored(_predicted(w, skip_self=False, axis=-2), arcs),
        "that is the argmax over axis -2 (for each word, the word that attends most to it), with the word itself "
        "kept: the prediction for a dependent is the other word its own row attends to most, the argmax over the "
        "keys (axis -1, the last) with the diagonal excluded",
    ),
    (
        lambda w, arcs: _scored(_predicted(w), arcs, reversed_arcs=True),
        "the arcs were read the wrong way round: each arc is (dependent, head), and the dependent's row (the "
        "attending word) must point at the head",
    ),
    (
        lambda w, arcs: _reference_relation_accuracy(w, arcs) * len(arcs),
        "that is the number of arcs each head gets right: divide by the number of arcs (a fraction)",
    ),
)


def _rounded(accuracies: Tensor) -> list[list[float]]:
    return [[round(float(a), 4) for a in row] for row in accuracies.detach().double()]


def _relation_examples() -> list[tuple[str, Tensor, list[tuple[int, int]]]]:
    w = torch.zeros(1, 2, 3, 3, dtype=torch.float64)
    w[0, 0] = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.4, 0.6], [0.2, 0.7, 0.1]])
    w[0, 1] = torch.tensor([[0.2, 0.0, 0.8], [0.7, 0.2, 0.1], [0.15, 0.05, 0.8]])
    # Two layers of one head over four words, no ties: it separates the bugs the first example confuses.
    v = torch.zeros(2, 1, 4, 4, dtype=torch.float64)
    v[0, 0] = torch.tensor([[0.6, 0.3, 0.0, 0.1], [0.2, 0.0, 0.0, 0.8], [0.1, 0.8, 0.1, 0.0], [0.0, 0.1, 0.9, 0.0]])
    v[1, 0] = torch.tensor([[0.3, 0.0, 0.1, 0.6], [0.0, 0.1, 0.0, 0.9], [0.1, 0.3, 0.0, 0.6], [0.6, 0.1, 0.3, 0.0]])
    return [
        ("weights of shape (1, 2, 3, 3)", w, [(0, 1), (1, 2), (2, 1)]),
        ("weights of shape (2, 1, 4, 4)", v, [(3, 2), (0, 1), (2, 1)]),  # not sorted: sorting them changes them
    ]


def check_relation_accuracy(relation_accuracy: Callable[[Tensor, Any], Tensor]) -> None:
    """Part 3: ``relation_accuracy(weights, arcs)`` → (n_layers, n_heads), fraction of arcs whose dependent's
    most-attended other word is its head, in the dtype of weights."""
    examples = _relation_examples()
    results = []
    for what, w, arcs in examples:
        given = list(arcs)
        got = require_tensor("relation_accuracy's result", call_student(relation_accuracy, what, w, given))
        if given != arcs:
            raise AssertionError(
                f"relation_accuracy changed its input arcs on {what}: the spec says inputs are not modified (sort or "
                "reorder a copy, sorted(arcs), not arcs itself)"
            )
        _shape("relation_accuracy", got, tuple(w.shape[:2]), f"one accuracy per (layer, head) for {what}")
        results.append(got)
    wants = [_reference_relation_accuracy(w, arcs) for _, w, arcs in examples]
    if not all(close_to(got, want) for got, want in zip(results, wants)):
        for bug, message in _RELATION_BUGS:
            if all(close_to(got, bug(w, arcs)) for got, (_, w, arcs) in zip(results, examples)):
                raise AssertionError(
                    f"expected {_rounded(wants[0])} for {examples[0][0]}, got {_rounded(results[0])}: {message}"
                )
    for got, (what, w, _) in zip(results, examples):
        _keeps_dtype("relation_accuracy", got, w, what)
    if not close_to(results[0], wants[0]):
        raise AssertionError(
            f"expected [[1.0, 0.0]] (head 1-1 gets all three arcs, head 1-2 none), got {_rounded(results[0])}"
        )
    if not close_to(results[1], wants[1]):
        raise AssertionError(
            f"expected {_rounded(wants[1])} for {examples[1][0]} (layer 1 gets all three arcs, layer 2 none), got "
            f"{_rounded(results[1])}"
        )

    # The other forms the hidden tests use: several layers, a single arc, float32, words that attend most to
    # themselves.
    weights = torch.softmax(fixed_randn(3, 2, 5, 5, seed=47) * 2, dim=-1) + 0.5 * torch.eye(5, dtype=torch.float64)
    four_arcs = [(0, 2), (1, 4), (3, 0), (4, 3)]
    table = [
        FormInput(what, (weights.to(dtype), list(arcs)))
        for arcs, dtype, what in (
            (four_arcs, torch.float64, "weights (3, 2, 5, 5): three layers, four arcs"),
            ([(2, 1)], torch.float64, "weights (3, 2, 5, 5) and a single arc"),
            (four_arcs, torch.float32, "float32 weights (3, 2, 5, 5)"),
        )
    ]
    check_forms(
        relation_accuracy,
        table,
        _reference_relation_accuracy,
        shape_message="{name} returned shape {got}, expected {want}: one accuracy per (layer, head) for {what}",
        wrong_message="wrong accuracies for {what}: expected {want_values}, got {got_values} (in layer-major order; "
        "every word here attends most to itself, so the argmax must skip the diagonal; every layer counts, not only "
        "the first)",
    )
    report_passed("check_relation_accuracy")
