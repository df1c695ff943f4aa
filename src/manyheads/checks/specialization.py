"""Visible checks of exercise 4 (chapter 4, what heads learn), reached as ``mh.checks.<name>``.

Like every module of :mod:`manyheads.checks`: each ``check_*`` takes the student's function, runs it on small fixed
inputs, prints a one-line success message or raises ``AssertionError`` naming the likely bug;
``NotImplementedError`` from an unanswered stub passes through unchanged. The graded hidden tests use other, random
inputs.

Contract (exercise 4): :func:`check_mean_attention_entropy` (mean over query rows of −Σ w ln w),
:func:`check_offset_attention`, :func:`check_relation_accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from manyheads.checks.core import (
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


def check_mean_attention_entropy(mean_attention_entropy: Callable[[Tensor], Tensor]) -> None:
    """Part 1: ``mean_attention_entropy(weights)`` (..., seq_q, seq_k) → (...), mean over queries of −Σ w ln w."""
    weights = torch.softmax(fixed_randn(2, 3, 4, 5, seed=41), dim=-1)
    rows = -(weights * weights.log()).sum(-1)
    got = require_tensor(
        "mean_attention_entropy's result",
        call_student(mean_attention_entropy, "weights of shape (2, 3, 4, 5)", weights),
    )
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
    if close_to(got, rows.sum(-1)):
        raise AssertionError("you summed over the query rows: average them instead")
    if not close_to(got, rows.mean(-1)):
        raise AssertionError(
            f"mean_attention_entropy differs from the mean row entropy by up to {max_abs_diff(got, rows.mean(-1)):.3g}"
        )
    one_hot = torch.eye(3, dtype=torch.float64)
    got = require_tensor(
        "mean_attention_entropy's result", call_student(mean_attention_entropy, "one-hot weights", one_hot)
    )
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


def check_offset_attention(offset_attention: Callable[[Tensor, int], Tensor]) -> None:
    """Part 2: ``offset_attention(weights, offset)`` → (...), mean of weights[..., i, i + offset] over valid i."""
    w = torch.arange(20, dtype=torch.float64).reshape(1, 4, 5) / 100  # seq_q 4, seq_k 5
    cases = {
        -1: (w[0, 1, 0] + w[0, 2, 1] + w[0, 3, 2]) / 3,
        1: (w[0, 0, 1] + w[0, 1, 2] + w[0, 2, 3] + w[0, 3, 4]) / 4,
        2: (w[0, 0, 2] + w[0, 1, 3] + w[0, 2, 4]) / 3,
    }
    for offset, want in cases.items():
        got = require_tensor("offset_attention's result", call_student(offset_attention, f"offset {offset}", w, offset))
        _shape("offset_attention", got, (1,), "drop the last two axes (one number per head)")
        if offset == -1 and close_to(got, cases[1].reshape(1)):
            raise AssertionError("offset −1 means the previous token: weights[..., i, i - 1], not i + 1")
        if not close_to(got, want.reshape(1)):
            raise AssertionError(
                f"offset {offset}: expected {float(want):.4f}, got {got.tolist()} -- average only over queries i with "
                "0 ≤ i + offset < seq_k (the matrix is 4 × 5 here: seq_q ≠ seq_k)"
            )
    weights = torch.softmax(fixed_randn(3, 2, 6, 6, seed=42), dim=-1)
    got = require_tensor(
        "offset_attention's result", call_student(offset_attention, "weights of shape (3, 2, 6, 6)", weights, -1)
    )
    want = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)
    _shape("offset_attention", got, (3, 2), "one number per head")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong previous-token attention on (3, 2, 6, 6) weights (max diff {max_abs_diff(got, want):.3g})"
        )

    # The other forms the spec allows and the hidden tests use: more queries than keys, no leading axes, offset 0.
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


def check_relation_accuracy(relation_accuracy: Callable[[Tensor, Any], Tensor]) -> None:
    """Part 3: ``relation_accuracy(weights, arcs)`` → (n_layers, n_heads), fraction of arcs whose dependent's
    most-attended other word is its head."""
    w = torch.zeros(1, 2, 3, 3, dtype=torch.float64)
    w[0, 0] = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.4, 0.6], [0.2, 0.7, 0.1]])
    w[0, 1] = torch.tensor([[0.2, 0.0, 0.8], [0.7, 0.2, 0.1], [0.15, 0.05, 0.8]])
    arcs = [(0, 1), (1, 2), (2, 1)]
    got = require_tensor(
        "relation_accuracy's result", call_student(relation_accuracy, "weights of shape (1, 2, 3, 3)", w, arcs)
    )
    _shape("relation_accuracy", got, (1, 2), "one accuracy per (layer, head)")
    want = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    if close_to(got, torch.tensor([[2 / 3, 0.0]], dtype=torch.float64)):
        raise AssertionError(
            "word 0 attends most to itself in head 1-1: exclude the dependent itself before the argmax"
        )
    if not close_to(got, want):
        raise AssertionError(f"expected [[1.0, 0.0]] (head 1-1 gets all three arcs, head 1-2 none), got {got.tolist()}")

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


def _reference_relation_accuracy(weights: Tensor, arcs: list[tuple[int, int]]) -> Tensor:
    """(n_layers, n_heads): the fraction of arcs whose dependent's most-attended other word is its head."""
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    predicted = weights.masked_fill(eye, float("-inf")).argmax(dim=-1)
    hits = [predicted[..., d] == h for d, h in arcs]
    return torch.stack(hits, dim=-1).double().mean(dim=-1)
