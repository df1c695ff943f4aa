"""Visible checks of exercise 1 (chapter 1, the single-head bottleneck), reached as ``mh.checks.<name>``.

Each ``check_*`` function takes the student's function, runs it on small fixed inputs and either prints a one-line
success message or raises ``AssertionError`` with a message that names the likely bug ("did you transpose?").
``NotImplementedError`` from an unanswered stub is let through unchanged, so an untouched exercise fails with
nothing but ``NotImplementedError``. These checks are hints, not grades: the hidden tests that grade an exercise
use other (random) inputs.

Exercise 1 (the single-head bottleneck): :func:`check_softmax`, :func:`check_scaled_dot_product_attention`,
:func:`check_attention_entropy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from manyheads.attention import scaled_dot_product_attention as _reference_attention
from manyheads.checks.core import (
    ATOL,
    FormInput,
    call_student,
    check_forms,
    close_to,
    fixed_randn,
    max_abs_diff,
    report_passed,
    require_tensor,
)

__all__ = ["check_softmax", "check_scaled_dot_product_attention", "check_attention_entropy"]


def _dropped_axis(exc: AssertionError) -> AssertionError | None:
    """The student's function failed with a size mismatch: name the likely cause, a reduction without keepdim."""
    cause = exc.__cause__
    if not (isinstance(cause, RuntimeError) and "must match the size" in str(cause)):
        return None
    return AssertionError(
        f"{exc}. Likely cause: a max or sum over the last axis without keepdim=True drops that axis, so the "
        "subtraction or division that follows no longer goes row by row"
    )


def check_softmax(softmax: Callable[[Tensor], Tensor]) -> None:
    """Visible test for exercise 1, part 1: ``softmax(scores)`` over the last axis, stable, with -inf entries; it
    leaves ``scores`` as it was and keeps its dtype. Torch's own softmax routines are refused by the own-work rule
    (``CodePart.forbidden``), with ``OwnWorkError``."""
    scores = fixed_randn(2, 3, 5, seed=1) * 3
    try:
        weights = require_tensor("softmax's result", call_student(softmax, "scores of shape (2, 3, 5)", scores))
    except AssertionError as exc:
        better = _dropped_axis(exc)
        if better is None:
            raise
        raise better from exc.__cause__  # the student's error stays the cause: the message shows their line
    if tuple(weights.shape) != (2, 3, 5):
        raise AssertionError(f"softmax returned shape {tuple(weights.shape)} but should keep the shape (2, 3, 5)")
    if weights.dtype != scores.dtype:  # float64 scores are graded to float64 precision
        raise AssertionError(
            f"softmax returned {weights.dtype} weights for {scores.dtype} scores: keep the input's dtype "
            "(no .float() inside), so float64 scores get float64 precision"
        )
    if torch.isnan(weights).any():
        raise AssertionError("softmax returned NaN on ordinary scores")
    if (weights < 0).any():
        raise AssertionError("softmax returned negative weights: exp(x) is never negative")
    if close_to(weights.sum(dim=-2), torch.ones(2, 5, dtype=torch.float64)) and not close_to(
        weights.sum(dim=-1), torch.ones(2, 3, dtype=torch.float64)
    ):
        raise AssertionError("the columns sum to 1, not the rows: normalise over the last axis (dim=-1)")
    if not close_to(weights.sum(dim=-1), torch.ones(2, 3, dtype=torch.float64)):
        raise AssertionError(
            f"each row should sum to 1, but the sums range from {float(weights.sum(-1).min()):.4f} to "
            f"{float(weights.sum(-1).max()):.4f}: divide by the sum over the last axis (keepdim=True)"
        )
    if not close_to(weights, torch.softmax(scores, dim=-1)):
        raise AssertionError(
            f"softmax differs from exp(x) / sum(exp(x)) by up to {max_abs_diff(weights, torch.softmax(scores, -1)):.3g}"
        )

    big = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]], dtype=torch.float64)
    weights = require_tensor("softmax's result", call_student(softmax, "large scores like 1000", big))
    if not torch.isfinite(weights).all():
        raise AssertionError(
            "softmax returned inf or NaN for scores around ±1000: exp overflows (or every exp underflows to 0). "
            "Subtract each row's maximum before exp; it does not change the result."
        )
    if not close_to(weights, torch.softmax(big, dim=-1)):
        raise AssertionError(
            f"softmax is off by up to {max_abs_diff(weights, torch.softmax(big, -1)):.3g} on large scores"
        )

    masked = torch.tensor([[0.5, float("-inf"), 1.5, float("-inf")]], dtype=torch.float64)
    weights = require_tensor("softmax's result", call_student(softmax, "scores containing -inf", masked))
    if torch.isnan(weights).any():
        raise AssertionError("softmax returned NaN when a row contains -inf (a masked key); exp(-inf) = 0 should work")
    if weights[0, 1] != 0 or weights[0, 3] != 0:
        raise AssertionError("a score of -inf must get a weight of exactly 0")
    if not close_to(weights, torch.softmax(masked, dim=-1)):
        raise AssertionError("softmax is wrong on a row that contains -inf")

    # The other forms the spec allows (and the hidden tests use): no leading axes at all, and float32 scores,
    # large ones and -inf included.
    vector = fixed_randn(6, seed=9)
    weights = require_tensor(
        "softmax's result", call_student(softmax, "a 1-D tensor of shape (6,) (no leading axes)", vector)
    )
    if tuple(weights.shape) != (6,) or not close_to(weights, torch.softmax(vector, dim=-1)):
        raise AssertionError(
            f"softmax is wrong on a 1-D tensor of shape (6,) (got shape {tuple(weights.shape)}): the spec allows any "
            "number of leading axes, including none; work on the last axis only (dim=-1, keepdim=True)"
        )
    offsets = torch.tensor([[800.0], [0.0], [-900.0]], dtype=torch.float64)
    scores32 = (fixed_randn(3, 5, seed=10) * 30 + offsets).float()
    scores32[1, 1] = scores32[2, 3] = float("-inf")
    weights = require_tensor(
        "softmax's result",
        call_student(softmax, "float32 scores of shape (3, 5) (rows near 800, 0 and -900, some -inf)", scores32),
    )
    want = torch.softmax(scores32.double(), dim=-1)
    if tuple(weights.shape) != (3, 5) or torch.isnan(weights).any() or not close_to(weights, want):
        raise AssertionError(
            "softmax is wrong on float32 scores (rows near 800, 0 and -900, some -inf): keep the "
            "computation in the input's dtype (a constant such as -1e300 does not fit in float32)"
        )
    if weights.dtype != torch.float32:
        raise AssertionError(
            f"softmax returned {weights.dtype} weights for float32 scores: the weights must have the scores' dtype "
            "(float32 in, float32 out). Likely cause: a .double() on the way, or a tensor made without "
            "dtype=scores.dtype"
        )
    report_passed("check_softmax")


def check_scaled_dot_product_attention(attention: Callable[..., tuple[Tensor, Tensor]]) -> None:
    """Visible test for exercise 1, part 2: ``scaled_dot_product_attention(q, k, v, mask=None)``, returning
    ``(output, weights)``."""
    batch, seq_q, seq_k, d_k, d_v = 2, 3, 5, 4, 6
    q, k, v = (
        fixed_randn(batch, seq_q, d_k, seed=2),
        fixed_randn(batch, seq_k, d_k, seed=3),
        fixed_randn(batch, seq_k, d_v, seed=4),
    )
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    result = call_student(attention, shapes, q, k, v)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(
            f"scaled_dot_product_attention should return a tuple (output, weights), got {type(result).__name__}"
        )
    output, weights = require_tensor("output", result[0]), require_tensor("weights", result[1])
    want_output, want_weights = _reference_attention(q, k, v)

    if tuple(weights.shape) != (batch, seq_q, seq_k):
        hint = "did you transpose?" if tuple(weights.shape) == (batch, seq_k, seq_q) else "expected (..., seq_q, seq_k)"
        raise AssertionError(
            f"weights have shape {tuple(weights.shape)} but should be {(batch, seq_q, seq_k)} for {shapes}: {hint}"
        )
    if tuple(output.shape) != (batch, seq_q, d_v):
        raise AssertionError(
            f"output has shape {tuple(output.shape)} but should be {(batch, seq_q, d_v)} (..., seq_q, d_v) for {shapes}"
        )
    rows, cols = weights.sum(dim=-1), weights.sum(dim=-2)
    if not close_to(rows, torch.ones_like(rows)):
        if close_to(cols, torch.ones_like(cols)):
            raise AssertionError(
                "each column of weights sums to 1, not each row: the softmax runs over the wrong axis. "
                "Every query (row) needs a distribution over the keys: softmax(..., dim=-1)"
            )
        raise AssertionError("each row of weights (one query) should be a probability distribution summing to 1")
    if not close_to(weights, want_weights):
        scores = q @ k.transpose(-2, -1)
        if close_to(weights, torch.softmax(scores, dim=-1)):
            raise AssertionError("weights match softmax(q kᵀ) without scaling: divide the scores by √d_k")
        if close_to(weights, torch.softmax(scores / d_k, dim=-1)):
            raise AssertionError("weights match softmax(q kᵀ / d_k): divide by the square root of d_k, not d_k")
        raise AssertionError(
            f"weights differ from softmax(q kᵀ / √d_k) by up to {max_abs_diff(weights, want_weights):.3g}"
        )
    if not close_to(output, want_output):
        raise AssertionError(
            f"weights are right but output differs from weights @ v by up to {max_abs_diff(output, want_output):.3g}"
        )

    # A causal mask (True = may attend): query i sees keys 0..i+2, so no row is fully masked.
    mask = torch.ones(seq_q, seq_k, dtype=torch.bool).tril(diagonal=2)
    result = call_student(attention, f"{shapes} and a ({seq_q}, {seq_k}) boolean mask", q, k, v, mask)
    output, weights = require_tensor("output", result[0]), require_tensor("weights", result[1])
    want_output, want_weights = _reference_attention(q, k, v, mask)
    if not close_to(weights, want_weights):
        w = weights.detach().double().nan_to_num(0.0)
        if close_to(w, _reference_attention(q, k, v)[1]):
            raise AssertionError(
                "the mask is ignored: keys where the mask is False still get weight. Set their scores to -inf "
                "before the softmax, e.g. scores.masked_fill(~mask, float('-inf'))"
            )
        if float((w * ~mask).sum()) > float((w * mask).sum()):
            raise AssertionError(
                "the mask is inverted: True means 'may attend' (as in torch's scaled_dot_product_attention), so set "
                "the scores to -inf where the mask is False: scores.masked_fill(~mask, float('-inf'))"
            )
        if close_to(w, _reference_attention(q, k, v)[1].masked_fill(~mask, 0.0)):
            raise AssertionError(
                "the mask is applied after the softmax: the masked weights are 0, but each row no longer sums to 1. "
                "Put -inf into the scores where the mask is False *before* the softmax, so that the softmax "
                "shares each query's weight among the keys it may attend to"
            )
        if torch.isnan(weights).any() or (w[..., ~mask].abs() > ATOL).any():
            raise AssertionError("with a mask, keys where the mask is False must get weight exactly 0 (and no NaN)")
        raise AssertionError(
            f"with a mask, weights differ from the reference by up to {max_abs_diff(weights, want_weights):.3g}"
        )
    if not close_to(output, want_output):
        raise AssertionError("with a mask, the weights are right but the output is not weights @ v")

    # Extra leading axes (batch, heads) and a padding mask that broadcasts over heads and queries.
    q4, k4, v4 = (
        fixed_randn(2, 3, seq_q, d_k, seed=5),
        fixed_randn(2, 3, seq_k, d_k, seed=6),
        fixed_randn(2, 3, seq_k, d_v, seed=7),
    )
    pad = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])[:, None, None, :]
    result = call_student(
        attention,
        "4-D inputs (batch, heads, seq, d) with a (2, 1, 1, 5) padding mask; use k.transpose(-2, -1), not k.T",
        q4,
        k4,
        v4,
        pad,
    )
    output, weights = require_tensor("output", result[0]), require_tensor("weights", result[1])
    want_output, want_weights = _reference_attention(q4, k4, v4, pad)
    if tuple(weights.shape) != tuple(want_weights.shape) or tuple(output.shape) != tuple(want_output.shape):
        raise AssertionError(
            f"with 4-D inputs (2, 3, seq, d) the shapes should be output {tuple(want_output.shape)} and weights "
            f"{tuple(want_weights.shape)}, got {tuple(output.shape)} and {tuple(weights.shape)}: work on the last two "
            "axes only (k.transpose(-2, -1), softmax(dim=-1))"
        )
    if not (close_to(weights, want_weights) and close_to(output, want_output)):
        raise AssertionError("wrong result on 4-D inputs with a broadcast padding mask of shape (2, 1, 1, 5)")

    # Every other form the spec allows and the hidden tests use: no leading axes, float32, masks of every rank.
    causal = torch.ones(seq_q, seq_k, dtype=torch.bool).tril(diagonal=2)
    per_query = torch.rand(batch, seq_q, seq_k, generator=torch.Generator().manual_seed(11)) < 0.5
    per_query[..., -1] = True  # every query may attend to at least one key
    full = torch.rand(2, 1, seq_q, seq_k, generator=torch.Generator().manual_seed(12)) < 0.5
    full[..., 0] = True
    q1, k1, v1 = (
        fixed_randn(2, 1, seq_q, d_k, seed=13),
        fixed_randn(2, 1, seq_k, d_k, seed=14),
        fixed_randn(2, 1, seq_k, d_v, seed=15),
    )
    leading = "the leading axes can be none at all: use k.transpose(-2, -1) and dim=-1, and do not assume a batch axis"
    forms = [
        FormInput(
            "2-D inputs with no leading axes, q (3, 4), k (5, 4), v (5, 6), no mask", (q[0], k[0], v[0]), hint=leading
        ),
        FormInput("2-D inputs with no leading axes and a (3, 5) mask", (q[0], k[0], v[0], causal), hint=leading),
        FormInput(
            "float32 inputs q (2, 3, 4), k (2, 5, 4), v (2, 5, 6) with a (3, 5) mask",
            (q.float(), k.float(), v.float(), causal),
            hint="float32 must work as well as float64: keep the input's dtype (a constant such as -1e300 does not fit "
            "in float32; use float('-inf'))",
        ),
        FormInput(
            "3-D inputs with a 3-D mask of shape (2, 3, 5), one mask per sequence",
            (q, k, v, per_query),
            hint="a mask with the same leading axes as the inputs must be applied as it is, element by element",
        ),
        FormInput(
            "4-D inputs (2, 3, seq, d) with a 2-D (3, 5) mask shared by every batch and head",
            (q4, k4, v4, causal),
            hint="a (seq_q, seq_k) mask broadcasts over all leading axes",
        ),
        FormInput(
            "inputs with leading axes (2, 1) and a full mask of shape (2, 1, 3, 5)",
            (q1, k1, v1, full),
            hint="a mask of the weights' own shape is applied element by element; do not squeeze axes of size 1",
        ),
        FormInput(
            "4-D inputs (2, 3, seq, d) with a (2, 1, 3, 5) mask that broadcasts over the heads",
            (q4, k4, v4, full),
            hint="a size-1 axis of the mask broadcasts over that axis of the inputs",
        ),
    ]
    check_forms(attention, forms, _reference_attention, returns=("output", "weights"))
    report_passed("check_scaled_dot_product_attention")


def check_attention_entropy(attention_entropy: Callable[[Tensor], Tensor]) -> None:
    """Visible test for exercise 1, part 3: ``attention_entropy(weights)``, −Σ w log w over the last axis, in nats."""
    weights = torch.softmax(fixed_randn(2, 3, 5, seed=8), dim=-1)
    want = -(weights * weights.log()).sum(dim=-1)
    got = require_tensor(
        "attention_entropy's result", call_student(attention_entropy, "weights of shape (2, 3, 5)", weights)
    )
    if tuple(got.shape) != (2, 3):
        raise AssertionError(
            f"attention_entropy returned shape {tuple(got.shape)} but should return one number per query, (2, 3) "
            "for weights of shape (2, 3, 5): sum over the last axis only"
        )
    if close_to(got, -want):
        raise AssertionError("the entropy came out negative: it is −Σ w log w (mind the minus sign)")
    if close_to(got, want / math.log(2)):
        raise AssertionError("that is the entropy in bits: use the natural logarithm (nats), torch.log")
    if not close_to(got, want):
        raise AssertionError(f"attention_entropy differs from −Σ w log w by up to {max_abs_diff(got, want):.3g}")

    special = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    got = require_tensor(
        "attention_entropy's result", call_student(attention_entropy, "weights containing zeros", special)
    )
    if torch.isnan(got).any():
        raise AssertionError(
            "NaN for rows containing zero weights: 0 · log 0 is nan in floating point but counts as 0 in the entropy "
            "(torch.special.xlogy(w, w) or torch.where handle it)"
        )
    want = torch.tensor([0.0, math.log(2), math.log(4)], dtype=torch.float64)
    if not close_to(got, want):
        raise AssertionError(
            f"expected entropies 0 (one-hot), log 2 (two halves) and log 4 (uniform over 4), got {got.tolist()}"
        )

    # 4-D weights (batch, heads, seq_q, seq_k) with exact zeros, in float64 and in float32 (the hidden tests use both).
    scores = fixed_randn(2, 3, 4, 6, seed=16) * 2
    scores[..., 1::3] = float("-inf")
    weights = torch.softmax(scores, dim=-1)
    float32 = ": float32 must work too; a constant such as 1e-300 is 0 in float32, so log(0) comes back"
    check_forms(
        attention_entropy,
        [
            FormInput(
                f"{str(dtype).removeprefix('torch.')} weights of shape (2, 3, 4, 6) with zeros",
                (weights.to(dtype),),
                hint=hint,
            )
            for dtype, hint in ((torch.float64, ""), (torch.float32, float32))
        ],
        lambda w: -torch.special.xlogy(w, w).sum(dim=-1),
        shape_message="{name} returned shape {got} for {what}, expected {want}: any number of leading axes, sum over "
        "the last one only (dim=-1)",
        wrong_message="wrong entropies for {what} (off by up to {diff:.3g}){hint}",
    )
    report_passed("check_attention_entropy")
