"""Visible checks of exercise 2 (chapter 2, representation subspaces), reached as ``mh.checks.<name>``.

Each ``check_*`` takes the student's function, runs it on small fixed inputs and prints a one-line success message
or raises ``AssertionError`` naming the likely bug; an unanswered stub's ``NotImplementedError`` goes through
unchanged. The hidden tests that grade the exercise use other inputs. The circuits and scores keep their inputs'
dtype (core's rule); the principal angles are float64 whatever the inputs' dtype, as the part's spec says, because
only double precision resolves a small angle from its cosine.

:func:`check_qk_circuits`, :func:`check_head_scores`, :func:`check_principal_angles`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from manyheads.checks.core import (
    FormInput,
    call_student,
    check_forms,
    close_to,
    fixed_randn,
    keeps_dtype,
    max_abs_diff,
    report_passed,
    require_tensor,
)

__all__ = ["check_qk_circuits", "check_head_scores", "check_principal_angles"]


def _reference_circuits(w_q: Tensor, w_k: Tensor, n_heads: int) -> Tensor:
    d_model, width = w_q.shape
    d_head = width // n_heads
    q = w_q.reshape(d_model, n_heads, d_head).permute(1, 0, 2)
    k = w_k.reshape(d_model, n_heads, d_head).permute(1, 0, 2)
    return q @ k.transpose(-2, -1)


def _reference_scores(x: Tensor, w_q: Tensor, w_k: Tensor, n_heads: int) -> Tensor:
    batch, seq, d_model = x.shape
    d_head = w_q.shape[1] // n_heads
    q = (x @ w_q).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    return q @ k.transpose(-2, -1) / math.sqrt(d_head)


def _reference_angles(a: Tensor, b: Tensor) -> Tensor:
    qa, qb = torch.linalg.qr(a.double())[0], torch.linalg.qr(b.double())[0]
    return torch.arccos(torch.linalg.svdvals(qa.T @ qb).clamp(0.0, 1.0)).sort().values


def check_qk_circuits(qk_circuits: Callable[[Tensor, Tensor, int], Tensor]) -> None:
    """Visible test for exercise 2, part 1: ``qk_circuits(w_q, w_k, n_heads)`` → (n_heads, d_model, d_model)."""
    d_model, n_heads = 6, 3
    w_q, w_k = fixed_randn(d_model, d_model, seed=21), fixed_randn(d_model, d_model, seed=22)
    got = require_tensor(
        "qk_circuits' result", call_student(qk_circuits, "w_q, w_k of shape (6, 6) and n_heads=3", w_q, w_k, n_heads)
    )
    want = _reference_circuits(w_q, w_k, n_heads)
    if tuple(got.shape) != (n_heads, d_model, d_model):
        raise AssertionError(
            f"qk_circuits returned shape {tuple(got.shape)} but should return one (d_model, d_model) matrix per head, "
            f"{(n_heads, d_model, d_model)}: M_h = W_q^h (W_k^h)ᵀ with W^h the columns of head h"
        )
    keeps_dtype("qk_circuits", got, w_q.dtype, "float64 w_q and w_k of shape (6, 6)")
    if close_to(got, want / math.sqrt(d_model // n_heads)):
        raise AssertionError(
            "the circuits are divided by √d_head: M_h = W_q^h (W_k^h)ᵀ has no scale; the 1/√d_head belongs to the "
            "scores (Part 2)"
        )
    if close_to(got, (w_q @ w_k.T).expand(n_heads, -1, -1)):
        raise AssertionError("every head got the full w_q @ w_kᵀ: keep only head h's columns of w_q and w_k")
    if close_to(got, want.transpose(-2, -1)):
        raise AssertionError("the circuits are transposed: M_h = W_q^h (W_k^h)ᵀ (query side first), not W_k^h (W_q^h)ᵀ")
    rows = torch.stack([w_q[h * 2 : (h + 1) * 2].T @ w_k[h * 2 : (h + 1) * 2] for h in range(n_heads)])
    if close_to(got, rows):
        raise AssertionError("head h owns the *columns* [h·d_head, (h+1)·d_head) of w_q and w_k (x @ w), not the rows")
    if not close_to(got, want):
        raise AssertionError(f"qk_circuits differs from W_q^h (W_k^h)ᵀ by up to {max_abs_diff(got, want):.3g}")
    ranks = [int(torch.linalg.matrix_rank(m.detach().double())) for m in got]
    if max(ranks) > d_model // n_heads:
        raise AssertionError(f"each circuit should have rank at most d_head = 2, got ranks {ranks}")

    # The other forms the hidden tests use: one head, heads of width 1, float32 weights.
    forms = []
    for d_model, n_heads, dtype, what, hint in (
        (
            5,
            1,
            torch.float64,
            "one head (n_heads=1, d_model=5)",
            "with one head the result still has a head axis, shape (1, d_model, d_model): do not squeeze it away",
        ),
        (
            4,
            4,
            torch.float64,
            "heads of width 1 (n_heads = d_model = 4)",
            "with d_head = 1 each head's block is a single column; keep it 2-D (do not squeeze)",
        ),
        (
            6,
            3,
            torch.float32,
            "float32 weights (d_model=6, n_heads=3)",
            "float32 must work as well as float64: do not mix in float64 tensors",
        ),
    ):
        w_q, w_k = fixed_randn(d_model, d_model, seed=26), fixed_randn(d_model, d_model, seed=27)
        forms.append(FormInput(what, (w_q.to(dtype), w_k.to(dtype), n_heads), hint=hint))
    check_forms(qk_circuits, forms, _reference_circuits)
    report_passed("check_qk_circuits")


def check_head_scores(head_scores: Callable[[Tensor, Tensor, Tensor, int], Tensor]) -> None:
    """Visible test for exercise 2, part 2: ``head_scores(x, w_q, w_k, n_heads)`` → (batch, n_heads, seq, seq)."""
    batch, seq, d_model, n_heads = 2, 5, 8, 2
    x = fixed_randn(batch, seq, d_model, seed=23)
    w_q, w_k = fixed_randn(d_model, d_model, seed=24), fixed_randn(d_model, d_model, seed=25)
    got = require_tensor(
        "head_scores' result",
        call_student(head_scores, "x (2, 5, 8), w_q and w_k (8, 8), n_heads=2", x, w_q, w_k, n_heads),
    )
    want = _reference_scores(x, w_q, w_k, n_heads)
    if tuple(got.shape) != (batch, n_heads, seq, seq):
        raise AssertionError(
            f"head_scores returned shape {tuple(got.shape)} but should be (batch, n_heads, seq_q, seq_k) = "
            f"{(batch, n_heads, seq, seq)}"
        )
    keeps_dtype("head_scores", got, x.dtype, "float64 x (2, 5, 8), w_q and w_k (8, 8)")
    d_head = d_model // n_heads
    if close_to(got, want * math.sqrt(d_head)):
        raise AssertionError("the scores are not scaled: divide by √d_head (the head's own width, not d_model)")
    if close_to(got, want * math.sqrt(d_head) / math.sqrt(d_model)):
        raise AssertionError("the scores are divided by √d_model: each head divides by √d_head = √(d_model / n_heads)")
    if close_to(got, want.transpose(-2, -1)):
        raise AssertionError("queries and keys are swapped: rows are queries (x @ w_q), columns are keys (x @ w_k)")
    if close_to(got, _reference_scores(x, w_q.T, w_k.T, n_heads)):
        raise AssertionError(
            "the projections are applied as x @ w_q.T: here they are x @ w_q and x @ w_k (it is nn.Linear that "
            "stores its weight transposed, not these matrices)"
        )
    if not close_to(got, want):
        raise AssertionError(
            f"head_scores differs from the reference by up to {max_abs_diff(got, want):.3g}. Did you transpose "
            "(batch, seq, n_heads, d_head) to (batch, n_heads, seq, d_head) after the reshape?"
        )

    # The other forms the hidden tests use: a batch of one, one head, heads of width 1, float32.
    forms = []
    for batch, seq, d_model, n_heads, dtype, what, hint in (
        (
            1,
            4,
            6,
            2,
            torch.float64,
            "a batch of one sequence, x (1, 4, 6), n_heads=2",
            "keep the batch axis even when it has size 1 (do not squeeze)",
        ),
        (
            2,
            3,
            5,
            1,
            torch.float64,
            "one head, x (2, 3, 5), n_heads=1",
            "keep the head axis even when there is one head, and divide by √d_head = √d_model",
        ),
        (
            2,
            3,
            4,
            4,
            torch.float64,
            "heads of width 1, x (2, 3, 4), n_heads=4",
            "with d_head = 1 keep the last axis of size 1 (do not squeeze)",
        ),
        (
            3,
            4,
            8,
            2,
            torch.float32,
            "float32 inputs, x (3, 4, 8), n_heads=2",
            "float32 must work as well as float64: do not mix in float64 tensors",
        ),
    ):
        x = fixed_randn(batch, seq, d_model, seed=28)
        w_q, w_k = fixed_randn(d_model, d_model, seed=29), fixed_randn(d_model, d_model, seed=30)
        forms.append(FormInput(what, (x.to(dtype), w_q.to(dtype), w_k.to(dtype), n_heads), hint=hint))
    check_forms(head_scores, forms, _reference_scores)
    report_passed("check_head_scores")


_FLOAT64_WHY = (
    "the spec asks for float64 whatever the inputs' dtype: compute in double precision (a.double(), b.double() "
    "first). The cosine of a small angle sits next to 1, where float32 cannot tell 1e-4 rad from 0"
)


def _angles_in_float64(principal_angles: Callable[[Tensor, Tensor], Tensor], form: FormInput) -> Tensor:
    """The student's angles for one form, which must be a float64 tensor (the part's dtype rule)."""
    result = call_student(principal_angles, form.what, *form.args)
    if isinstance(result, tuple) and hasattr(result, "values") and hasattr(result, "indices"):
        raise AssertionError(
            f"principal_angles returned the (values, indices) pair of a sort for {form.what}: return its .values"
        )
    got = require_tensor("principal_angles' result", result)
    if got.dtype != torch.float64:
        raise AssertionError(f"principal_angles returned {got.dtype} for {form.what}; {_FLOAT64_WHY}")
    return got


def _at_angles(d: int, angles: list[float], seed: int) -> tuple[Tensor, Tensor]:
    """Bases (d, k) of two subspaces at the given principal angles, neither orthonormal."""
    k, theta = len(angles), torch.tensor(angles, dtype=torch.float64)
    u, w = torch.eye(d, dtype=torch.float64)[:, :k], torch.eye(d, dtype=torch.float64)[:, k : 2 * k]
    return u @ fixed_randn(k, k, seed=seed), (u * torch.cos(theta) + w * torch.sin(theta)) @ fixed_randn(
        k, k, seed=seed + 1
    )


def check_principal_angles(principal_angles: Callable[[Tensor, Tensor], Tensor]) -> None:
    """Visible test for exercise 2, part 3: ``principal_angles(a, b)`` in radians, ascending, min(p, q) of them,
    float64 whatever the inputs' dtype."""
    e = torch.eye(4, dtype=torch.float64)
    t = 0.5
    a = torch.stack([3.0 * e[:, 0], e[:, 0] + 2.0 * e[:, 1]], dim=1)  # span{e0, e1}, not orthonormal
    b = torch.stack([math.cos(t) * e[:, 0] + math.sin(t) * e[:, 2], e[:, 1] + e[:, 3]], dim=1)
    got = _angles_in_float64(principal_angles, FormInput("a (4, 2) and b (4, 2)", (a, b)))
    want = _reference_angles(a, b)
    if tuple(got.shape) != (2,):
        raise AssertionError(
            f"principal_angles returned shape {tuple(got.shape)}; two 2-D subspaces have 2 angles, (2,)"
        )
    if close_to(got, torch.rad2deg(want)):
        raise AssertionError("those are degrees: return radians (0 … π/2)")
    if close_to(got, torch.cos(want)) or close_to(got, torch.cos(want).flip(0)):
        raise AssertionError("those are the cosines of the angles: take torch.arccos of the singular values")
    if close_to(got, want.flip(0)):
        raise AssertionError("return the angles in ascending order (smallest first)")
    if not close_to(got, want):
        raise AssertionError(
            f"principal_angles differs from the reference by up to {max_abs_diff(got, want):.3g}. "
            "The columns of a and b are not orthonormal: orthonormalise them first (torch.linalg.qr), "
            "then take the SVD of Qaᵀ Qb"
        )
    # The other forms the hidden tests use: the same subspace in another basis (twice: rounding may push a cosine
    # above 1, where arccos gives nan), orthogonal subspaces, the wider subspace first (p > q), the arguments in
    # either order, float32 inputs (the result is float64 all the same, and exact enough for an angle of 1e-4 rad).
    plane, line = e[:, :3] @ fixed_randn(3, 3, seed=43), (0.6 * e[:, 0:1] + 0.8 * e[:, 3:4]) * 2.0
    either_order = "there are min(p, q) angles whichever argument is wider, and swapping a and b gives the same angles"
    clamp = "angles 0, 0, 0: rounding can push a cosine a hair above 1, where arccos gives nan; clamp them to [-1, 1]"
    space = fixed_randn(6, 3, seed=2)
    small_a, small_b = _at_angles(5, [1e-4, 0.3], seed=44)
    table = [
        FormInput("a subspace and itself (in another basis)", (a, a @ e[:2, :2].flip(0)), hint="angles 0, 0"),
        FormInput(
            "a (6, 3) subspace and itself in another basis", (space, space @ fixed_randn(3, 3, seed=102)), hint=clamp
        ),
        FormInput(
            "span{e3} against span{e0, e1, e2}, a (4, 1) and b (4, 3)", (e[:, 3:], e[:, :3]), hint="one angle, π/2"
        ),
        FormInput("a (4, 3) and b (4, 1): the first subspace wider than the second", (plane, line), hint=either_order),
        FormInput("a (4, 1) and b (4, 3)", (line, plane), hint=either_order),
        FormInput(
            "float32 a (4, 2) and b (4, 2)",
            (a.float(), b.float()),
            hint="float32 inputs must work as well as float64 ones (clamp the cosines to [-1, 1] before arccos)",
        ),
        FormInput(
            "float32 a (5, 2) and b (5, 2) at angles 1e-4 and 0.3 rad",
            (small_a.float(), small_b.float()),
            hint="compute in float64 (a.double(), b.double() first), not in float32 and converted at the end: the "
            "cosine of 1e-4 rad is 1 - 5e-9, which float32 rounds to 1",
        ),
    ]
    check_forms(
        principal_angles,
        table,
        _reference_angles,
        run=_angles_in_float64,
        shape_message="for {what} expected {want_values} rad, of shape {want}; got shape {got}: {hint}",
        wrong_message="for {what} expected {want_values} rad, got {got_values}: {hint}",
        dtype=None,  # float64 whatever the inputs' dtype: _angles_in_float64 checks it
    )
    report_passed("check_principal_angles")
