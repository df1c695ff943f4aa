"""Visible checks of exercise 3 (chapter 3, head size d_head = d_model / n_heads), reached as ``mh.checks.<name>``.

Each ``check_*`` runs the student's function on small fixed inputs and prints a success line or raises
``AssertionError`` naming the likely bug; ``NotImplementedError`` from an unanswered stub passes through unchanged.
The graded hidden tests use other, random inputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from manyheads.attention import merge_heads as _merge
from manyheads.attention import scaled_dot_product_attention as _sdpa
from manyheads.attention import split_heads as _split
from manyheads.checks.core import (
    FormInput,
    call_student,
    check_forms,
    close_to,
    fixed_randn,
    keeps_dtype,
    max_abs_diff,
    report_passed,
    require_int,
    require_tensor,
)

__all__ = [
    "check_head_dim",
    "check_split_heads",
    "check_merge_heads",
    "check_mha_param_count",
    "check_multi_head_attention",
    "reference_multi_head_attention",
]


def reference_multi_head_attention(
    x: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, n_heads: int, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Exercise 3's contract: x (batch, seq, d_model), each w (d_model, d_model) applied as ``x @ w``.

    Returns output (batch, seq, d_model) and weights (batch, n_heads, seq, seq).
    """
    q, k, v = (_split(x @ w, n_heads) for w in (w_q, w_k, w_v))
    heads, weights = _sdpa(q, k, v, mask)
    return _merge(heads) @ w_o, weights


# What torch and Python say when a size is a float: reshape/view, a slice, range(), torch.chunk.
_FLOAT_SIZE = re.compile(r"tuple of ints|slice indices must be integers|interpreted as an integer|must be int, not")


def _call_sized(fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
    """:func:`call_student`, and where the answer crashed on a size that is a float, a message saying why it is one."""
    try:
        return call_student(fn, what, *args, **kwargs)
    except AssertionError as failure:
        cause = failure.__cause__
        if isinstance(cause, TypeError) and _FLOAT_SIZE.search(str(cause)):
            raise AssertionError(
                f"{failure}. Likely cause: a size computed with /, which gives a float even when it divides "
                "(12 / 3 is 4.0): d_head = d_model // n_heads"
            ) from cause
        raise


def _moved_exactly(got: Tensor, want: Tensor) -> bool:
    """Splitting and merging only move numbers: the hidden tests compare them exactly, so this check does too."""
    return torch.equal(got.detach().double(), want.double())


_MOVED_MESSAGE = (
    "{name} changed the numbers for {what} (largest change {diff:.3g}): it must only move them. Reshape, transpose, "
    "chunk or cat keep them exactly; copying them into a new tensor of another dtype (torch.zeros(...) is float32) "
    "rounds them"
)
_NO_SQUEEZE = (
    "{name} returned shape {got} for {what}, expected {want}: keep every axis, even those of size 1 (no squeeze)"
)


def _check_moved(fn: Callable[..., Any], table: list[FormInput], reference: Callable[..., Tensor]) -> None:
    check_forms(fn, table, reference, compare=_moved_exactly, shape_message=_NO_SQUEEZE, wrong_message=_MOVED_MESSAGE)


def _reference_head_dim(d_model: int, n_heads: int) -> int:
    if any(type(v) is not int for v in (d_model, n_heads)) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
        raise ValueError(f"head_dim({d_model!r}, {n_heads!r}) is not defined")
    return d_model // n_heads


def check_head_dim(head_dim: Callable[[int, int], int]) -> None:
    """Visible test for exercise 3, part 1: ``head_dim(d_model, n_heads)`` → an ``int``; ``ValueError`` for invalid
    combinations and for arguments that are not ``int`` (bool, float, str)."""
    valid = ((1024, 16), (512, 8), (384, 12), (6, 6), (6, 1), (1, 1))
    first = "check that both arguments are ints (isinstance(x, int) and not a bool) and greater than 0 first"
    invalid = (
        ((512, 3), "3 does not divide 512"),
        ((3, 6), "6 heads cannot share a width of 3"),
        ((0, 4), "d_model = 0 is not positive"),
        ((64, -2), "n_heads = -2 is not positive"),
        ((8, 0), "n_heads = 0 is not positive"),
        ((-6, -3), "neither is positive, although -6 % -3 == 0"),
        ((1024.0, 16), "d_model is a float, not an int (even though 1024.0 is a whole number)"),
        ((1024, 16.0), "n_heads is a float, not an int"),
        ((10, 2.5), "n_heads = 2.5 is not an integer"),
        (("1024", 16), "d_model is a str, not an int"),
        ((64, True), "n_heads is a bool, not an int (True == 1 in Python)"),
    )
    table = [FormInput(f"head_dim{args!r}", args) for args in valid]
    table += [FormInput(f"head_dim{args!r}", args, hint=f"{why}; {first}") for args, why in invalid]
    float_hint = "use integer division, d_model // n_heads: d_model / n_heads is a float even when it divides"
    check_forms(
        head_dim,
        table,
        _reference_head_dim,
        run=lambda fn, form: require_int(call_student(fn, form.what, *form.args), form.what, float_hint),
        wrong_message="{what} returned {got}, expected {want}",
    )
    report_passed("check_head_dim")


def check_split_heads(split_heads: Callable[[Tensor, int], Tensor]) -> None:
    """Visible test for exercise 3, part 2: (batch, seq, d_model) → (batch, n_heads, seq, d_head)."""
    batch, seq, d_model, n_heads = 2, 6, 12, 3  # seq ≠ d_model: an answer that reads the wrong axis shows it
    d_head = d_model // n_heads
    x = fixed_randn(batch, seq, d_model, seed=31)
    what = f"x of shape {(batch, seq, d_model)}, n_heads=3"
    got = require_tensor("split_heads's result", _call_sized(split_heads, what, x, n_heads))
    want = _split(x, n_heads)
    if tuple(got.shape) != tuple(want.shape):
        hint = {
            (batch, seq, n_heads, d_head): ": the head axis must come before the sequence axis, transpose(1, 2)",
            (batch, n_heads, seq // n_heads, d_model): ": that splits the positions (the sequence axis); split the "
            "features, the last axis",
            (batch, n_heads, d_model, seq // n_heads): ": the sizes were read from the wrong axes. x is "
            "(batch, seq, d_model), so d_head = d_model // n_heads comes from its last axis, x.shape[-1]",
            (batch, n_heads * seq, d_head): ": torch.cat joins the heads along an axis that exists already; "
            "torch.stack(..., dim=1) puts them on a new head axis",
        }.get(tuple(got.shape), "")
        raise AssertionError(
            f"split_heads returned shape {tuple(got.shape)}, expected {tuple(want.shape)} "
            f"(batch, n_heads, seq, d_head){hint}"
        )
    keeps_dtype("split_heads", got, x.dtype, f"float64 {what}")
    if not close_to(got, want):
        if close_to(got, x.reshape(batch, n_heads, seq, d_head)):
            raise AssertionError(
                "the shape is right but the numbers are not: reshaping straight to "
                "(batch, n_heads, seq, d_head) mixes positions between heads. Reshape to "
                "(batch, seq, n_heads, d_head) first, then transpose(1, 2)"
            )
        raise AssertionError(
            f"split_heads puts the wrong features in the heads: head i should hold features "
            f"[i·d_head, (i+1)·d_head) of every position (max difference {max_abs_diff(got, want):.3g})"
        )
    if not _moved_exactly(got, want):
        raise AssertionError(
            _MOVED_MESSAGE.format(
                name="split_heads", what=f"x of shape {(batch, seq, d_model)} in float64", diff=max_abs_diff(got, want)
            )
        )

    # The other forms the hidden tests use: a batch of one, one head, heads of width 1, a single position, float32.
    table = [
        FormInput(what, (fixed_randn(*shape, seed=35).to(dtype), heads))
        for shape, heads, dtype, what in (
            ((1, 4, 6), 1, torch.float32, "one head and a batch of one, x (1, 4, 6) float32"),
            ((2, 3, 8), 8, torch.float32, "heads of width 1, x (2, 3, 8), n_heads=8"),
            ((3, 1, 6), 2, torch.float64, "a single position, x (3, 1, 6), n_heads=2"),
        )
    ]
    _check_moved(split_heads, table, _split)
    report_passed("check_split_heads")


def check_merge_heads(merge_heads: Callable[[Tensor], Tensor]) -> None:
    """Visible test for exercise 3, part 3: (batch, n_heads, seq, d_head) → (batch, seq, n_heads·d_head)."""
    x = fixed_randn(2, 3, 5, 4, seed=32)
    got = require_tensor("merge_heads's result", call_student(merge_heads, "x of shape (2, 3, 5, 4)", x))
    want = _merge(x)
    if tuple(got.shape) != (2, 5, 12):
        hint = ""
        if tuple(got.shape) == (2, 15, 4):
            hint = ": the heads were joined along the sequence axis; join them along the features, the last axis"
        raise AssertionError(
            f"merge_heads returned shape {tuple(got.shape)}, expected (2, 5, 12) = (batch, seq, n_heads·d_head){hint}"
        )
    keeps_dtype("merge_heads", got, x.dtype, "float64 x of shape (2, 3, 5, 4)")
    if not close_to(got, want):
        if close_to(got, x.reshape(2, 5, 12)):
            raise AssertionError(
                "the shape is right but the numbers are not: move the head axis next to d_head "
                "first (transpose(1, 2)), then reshape"
            )
        if close_to(got, x.permute(0, 2, 3, 1).reshape(2, 5, 12)):
            raise AssertionError(
                "the features come out interleaved (head 0's first feature, head 1's first feature, ...): head 0's "
                "d_head features must come first, so the axes before the reshape are (batch, seq, n_heads, d_head)"
            )
        raise AssertionError(
            f"merge_heads is not the inverse of split_heads (max difference {max_abs_diff(got, want):.3g})"
        )
    if not _moved_exactly(got, want):
        raise AssertionError(
            _MOVED_MESSAGE.format(
                name="merge_heads", what="x of shape (2, 3, 5, 4) in float64", diff=max_abs_diff(got, want)
            )
        )

    # The other forms the hidden tests use: one head and a batch of one, one position with heads of width 1, float32.
    table = [
        FormInput(what, (fixed_randn(*shape, seed=36).to(dtype),))
        for shape, dtype, what in (
            ((1, 1, 7, 3), torch.float32, "one head and a batch of one, x (1, 1, 7, 3) float32"),
            ((2, 5, 1, 1), torch.float32, "one position and heads of width 1, x (2, 5, 1, 1)"),
            ((3, 4, 6, 2), torch.float64, "x (3, 4, 6, 2)"),
        )
    ]
    _check_moved(merge_heads, table, _merge)
    report_passed("check_merge_heads")


def _reference_param_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def _param_count_hint(got: int, d_model: int, n_heads: int, bias: bool) -> str:
    """Why ``got`` differs from the count, when a known mistake explains it."""
    d_head, biases = d_model // n_heads, 4 * d_model if bias else 0
    if got == 3 * d_model * d_model + (3 * d_model if bias else 0):
        return "that counts Q, K and V only: the output projection W_o is a (d_model, d_model) matrix too"
    if bias and got == 4 * d_model * d_model:
        return "that leaves out the biases (bias=True is the default): one vector of d_model per projection"
    if not bias and got == 4 * d_model * d_model + 4 * d_model:
        return "with bias=False there are no bias vectors: add the 4 · d_model biases only when bias is True"
    if got == n_heads * 3 * d_head + d_model * d_model + biases:
        return (
            "that counts d_head numbers per head in each of W_q, W_k and W_v: a head's slice of W_q is a "
            "(d_model, d_head) matrix, d_model · d_head numbers"
        )
    if got == n_heads * 3 * d_head * d_head + d_model * d_model + biases:
        return (
            "that gives each head (d_head, d_head) blocks: a head's slice of W_q reads all d_model features of the "
            "input, so it is (d_model, d_head)"
        )
    return "four (d_model, d_model) projections, W_q, W_k, W_v and W_o, each with a bias of d_model when bias is True"


def check_mha_param_count(mha_param_count: Callable[..., int]) -> None:
    """Visible test for exercise 3, part 4: parameters of the four (d_model, d_model) projections, with biases, as
    an ``int``."""
    table = [
        FormInput(f"mha_param_count({d}, {h})", (d, h), hint=lambda got, d=d, h=h: _param_count_hint(got, d, h, True))
        for d, h in ((512, 8), (512, 1), (12, 3))
    ]
    # bias by keyword, as the hidden tests pass it: the parameter must be called bias, as in the spec
    table += [
        FormInput(
            f"mha_param_count(512, 8, bias={bias}) (keep the parameter name bias)",
            (512, 8),
            {"bias": bias},
            lambda got, bias=bias: _param_count_hint(got, 512, 8, bias),
        )
        for bias in (False, True)
    ]
    float_hint = (
        "count with integer arithmetic (products of ints, and // to divide): d_model / n_heads, like math.pow, "
        "gives a float even when the result is whole"
    )
    check_forms(
        mha_param_count,
        table,
        _reference_param_count,
        run=lambda fn, form: require_int(call_student(fn, form.what, *form.args, **form.kwargs), form.what, float_hint),
        wrong_message="{what} returned {got}, expected {want}: {hint}",
    )
    report_passed("check_mha_param_count")


def _mask_diagnosis(weights: Tensor, x: Tensor, w_q: Tensor, w_k: Tensor, n_heads: int, mask: Tensor) -> str:
    """What is wrong with weights that were right without the mask and are wrong with a causal one."""
    q, k = _split(x @ w_q, n_heads), _split(x @ w_k, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    start = "wrong result with a causal mask (True = may attend)"
    if close_to(weights, torch.softmax(scores, -1).masked_fill(~mask, 0.0)):
        return (
            f"{start}: the mask was applied after the softmax, so the rows no longer sum to 1. Set the masked scores "
            "to -inf before the softmax, which then shares each row among the keys that may be attended"
        )
    if close_to(weights, torch.softmax(scores.masked_fill(~mask, 0.0), -1)):
        return (
            f"{start}: the masked scores were set to 0, and a score of 0 still gets weight (exp(0) = 1): set them "
            'to -inf, float("-inf")'
        )
    if bool(weights.detach().isnan().any()):
        return (
            f"{start}: the weights hold nan, as they do where a query has every key masked. With a causal mask that "
            "happens only if the mask is read the wrong way round: masked_fill fills where its condition is True, so "
            "fill where the mask is False (~mask)"
        )
    return f"{start}: set the scores where the mask is False to -inf before the softmax (the same mask for every head)"


def check_multi_head_attention(multi_head_attention: Callable[..., tuple[Tensor, Tensor]]) -> None:
    """Visible test for exercise 3, part 5: ``multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None)``."""
    batch, seq, d_model, n_heads = 2, 5, 6, 3
    x = fixed_randn(batch, seq, d_model, seed=33)
    w_q, w_k, w_v, w_o = (fixed_randn(d_model, d_model, seed=34 + i) for i in range(4))
    shapes = f"x {(batch, seq, d_model)}, weights ({d_model}, {d_model}), n_heads={n_heads}"
    result = _call_sized(multi_head_attention, shapes, x, w_q, w_k, w_v, w_o, n_heads)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(
            f"multi_head_attention should return a tuple (output, weights), got {type(result).__name__}"
        )
    output, weights = require_tensor("output", result[0]), require_tensor("weights", result[1])
    want_out, want_w = reference_multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)
    if tuple(weights.shape) != tuple(want_w.shape):
        raise AssertionError(
            f"weights have shape {tuple(weights.shape)}, expected {tuple(want_w.shape)} "
            "(batch, n_heads, seq, seq): one seq × seq pattern per head"
        )
    if tuple(output.shape) != tuple(want_out.shape):
        raise AssertionError(f"output has shape {tuple(output.shape)}, expected {tuple(want_out.shape)}")
    for name, tensor in (("output", output), ("weights", weights)):
        keeps_dtype("multi_head_attention", tensor, x.dtype, f"float64 {shapes}", returned=name)
    if not close_to(weights.sum(-1), torch.ones(batch, n_heads, seq, dtype=torch.float64)):
        raise AssertionError("each row of weights should sum to 1: softmax over the keys, the last axis (dim=-1)")
    if not close_to(weights, want_w):
        q, k = _split(x @ w_q, n_heads), _split(x @ w_k, n_heads)
        scores = q @ k.transpose(-2, -1)
        if close_to(weights, torch.softmax(scores, -1)):
            raise AssertionError("weights match softmax(q kᵀ) without scaling: divide by √d_head")
        if close_to(weights, torch.softmax(scores / math.sqrt(d_model), -1)):
            raise AssertionError(
                "the scores are divided by √d_model: each head divides by the square root of its own width, √d_head"
            )
        raise AssertionError(
            f"weights differ from the reference by up to {max_abs_diff(weights, want_w):.3g}: check "
            "how the heads are split (reshape, then transpose)"
        )
    if not close_to(output, want_out):
        if close_to(output, want_out @ torch.linalg.inv(w_o)):
            raise AssertionError(
                "the weights are right but the output is not: apply the output projection w_o after merging the heads"
            )
        raise AssertionError(
            f"the weights are right but the output differs by up to {max_abs_diff(output, want_out):.3g}: "
            "merge the heads (transpose back, then reshape) and apply w_o"
        )
    mask = torch.ones(seq, seq, dtype=torch.bool).tril()
    result = call_student(
        multi_head_attention,
        shapes + " and a causal (5, 5) mask passed as mask=",
        x,
        w_q,
        w_k,
        w_v,
        w_o,
        n_heads,
        mask=mask,
    )
    want_out, want_w = reference_multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask)
    weights = require_tensor("weights", result[1])
    if not (close_to(weights, want_w) and close_to(require_tensor("output", result[0]), want_out)):
        raise AssertionError(_mask_diagnosis(weights, x, w_q, w_k, n_heads, mask))

    # Every other form the spec allows: a batch of one, one head, heads of width 1, float32, and masks of every
    # rank that broadcasts to (batch, n_heads, seq, seq). (A per-sequence mask must come as (batch, 1, seq, seq):
    # a 3-D mask lines up with (n_heads, seq, seq), as broadcasting always aligns the last axes.)
    def random_mask(*shape: int, seed: int) -> Tensor:
        m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < 0.5
        m[..., 0] = True  # every query may attend to at least one key
        return m

    broadcast = "a size-1 axis of the mask broadcasts; let masked_fill (or torch.where) broadcast it for you"
    cases = [
        (
            (1, 5, 6),
            1,
            torch.float32,
            None,
            "a batch of one and one head, x (1, 5, 6) float32, n_heads=1",
            "keep the batch and head axes even when they have size 1 (no squeeze); with one head, d_head = d_model",
        ),
        (
            (3, 4, 6),
            6,
            torch.float64,
            None,
            "heads of width 1, x (3, 4, 6), n_heads=6",
            "with d_head = 1 keep the last axis of size 1 (no squeeze), and divide by √1",
        ),
        (
            (2, 5, 6),
            3,
            torch.float64,
            random_mask(2, 1, 1, 5, seed=37),
            "a padding mask of shape (2, 1, 1, 5)",
            f"(batch, 1, 1, seq) hides the same keys from every head and query of a sequence: {broadcast}",
        ),
        (
            (2, 5, 6),
            3,
            torch.float64,
            random_mask(2, 1, 5, 5, seed=38),
            "a mask of shape (2, 1, 5, 5)",
            f"(batch, 1, seq, seq) is one mask per sequence, shared by the heads: {broadcast}",
        ),
        (
            (2, 5, 6),
            3,
            torch.float64,
            random_mask(2, 3, 5, 5, seed=39),
            "a mask of shape (2, 3, 5, 5), one per head",
            "(batch, n_heads, seq, seq) gives every head its own mask: head i uses mask[:, i], not mask[:, 0]",
        ),
        (
            (2, 5, 6),
            3,
            torch.float64,
            random_mask(3, 5, 5, seed=40),
            "a 3-D mask of shape (3, 5, 5) = (n_heads, seq, seq)",
            "a 3-D mask broadcasts against (batch, n_heads, seq, seq) from the right: its first axis is the heads",
        ),
        (
            (2, 5, 6),
            3,
            torch.float64,
            random_mask(1, 5, 5, seed=41),
            "a 3-D mask of shape (1, 5, 5)",
            f"(1, seq, seq) is one mask for every sequence and head: {broadcast}",
        ),
        (
            (3, 4, 8),
            2,
            torch.float32,
            random_mask(3, 1, 1, 4, seed=42),
            "float32 inputs with a (3, 1, 1, 4) padding mask",
            "float32 must work as well as float64: keep the input's dtype (use float('-inf'), not -1e300)",
        ),
    ]
    forms = []
    for shape, heads, dtype, mask, what, hint in cases:
        d = shape[-1]
        xx = fixed_randn(*shape, seed=43).to(dtype)
        ws = [(fixed_randn(d, d, seed=44 + i) / math.sqrt(d)).to(dtype) for i in range(4)]
        kwargs = {} if mask is None else {"mask": mask}
        forms.append(FormInput(f"{what} (x {shape}, n_heads={heads})", (xx, *ws, heads), kwargs, hint))
    check_forms(multi_head_attention, forms, reference_multi_head_attention, returns=("output", "weights"))
    report_passed("check_multi_head_attention")
