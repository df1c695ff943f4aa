"""Visible checks of exercise 5 (chapter 5, redundancy and pruning), reached as ``mh.checks.<name>``.

Like every module of :mod:`manyheads.checks`: each ``check_*`` takes the student's function, runs it on small fixed
inputs, prints a one-line success message or raises ``AssertionError`` naming the likely bug;
``NotImplementedError`` from an unanswered stub passes through unchanged. The graded hidden tests use other, random
inputs. Each check tries every input form the contract allows (both modes, batches of one, a single head, lists and
generators of batches, 1-D to 3-D importance, fractions 0 and 1, ties), so that passing it and then losing hidden
points means a real bug.

Contract (exercise 5): :func:`check_ablate_heads` (zero or mean ablation of head outputs, in the dtype of
``head_outputs``), :func:`check_gate_importance` (Michel et al.'s importance, the mean over batches of |∂loss/∂gate|
at gates = 1, float32), :func:`check_prune_mask` (bool keep-mask without the ⌊fraction · n⌋ least important heads of
the whole model). None of them changes its inputs (tensors, and the list of batches).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
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
from manyheads.checks.core import expect_value_error as _expect_value_error

__all__ = ["check_ablate_heads", "check_gate_importance", "check_prune_mask"]


# ------------------------------------------------------------------------------------------------------------------
# Part 1: ablate_heads


def _close_in_dtype(got: Tensor, want: Tensor) -> bool:
    """:func:`close_to`, with float16's tolerance where the answer is float16: a mean vector given in float32 is
    rounded to float16 (by up to 2⁻¹¹ of its size) when it becomes a head's output."""
    if got.dtype != torch.float16:
        return close_to(got, want)
    return got.shape == want.shape and torch.allclose(got.double(), want.double(), rtol=1e-3, atol=1e-3)


def _ablated(x: Tensor, keep: Tensor, mode: str, means: Tensor | None) -> Tensor:
    """The contract: removed heads' outputs become 0 (zero) or their mean vector at every batch item and position."""
    kept = keep[None, :, None, None]
    if mode == "zero":
        return torch.where(kept, x, torch.zeros_like(x))
    return torch.where(kept, x, means[None, :, None, :].to(x.dtype))


def _run_ablation(ablate_heads: Callable[..., Tensor], what: str, x: Tensor, keep: Tensor, **kwargs: Any) -> Tensor:
    """Call the answer on copies (``kwargs``: mode and means, as keywords; :func:`call_student` holds it to leaving
    them as they were), then check that the result is a new tensor, and its type, shape and dtype."""
    given = {k: v.clone() if isinstance(v, Tensor) else v for k, v in kwargs.items()}
    head_outputs = x.clone()
    got = require_tensor("ablate_heads's result", call_student(ablate_heads, what, head_outputs, keep.clone(), **given))
    if got.data_ptr() == head_outputs.data_ptr():
        raise AssertionError(
            f"ablate_heads returned head_outputs itself (or a view of it) for {what}: return a new tensor, "
            "so that changing the result never changes the caller's head outputs"
        )
    if tuple(got.shape) != tuple(x.shape):
        raise AssertionError(
            f"ablate_heads returned shape {tuple(got.shape)} for {what}, expected {tuple(x.shape)}: the result has "
            "the shape of head_outputs (batch, n_heads, seq, d_head), every axis kept, even one of size 1"
        )
    if got.dtype != x.dtype:
        raise AssertionError(
            f"ablate_heads returned {got.dtype} for {what} in {x.dtype}: keep the dtype of head_outputs, whatever "
            "the dtype of means (torch.zeros(shape) without dtype= is float32, torch.zeros_like(head_outputs) is "
            "not; a float mask such as keep.float(), or means of another dtype, promotes float16 head outputs to "
            "float32: convert them to head_outputs.dtype)"
        )
    return got


def check_ablate_heads(ablate_heads: Callable[..., Tensor]) -> None:
    """Part 1: ``ablate_heads(head_outputs, keep, mode="zero", means=None)`` → a new (batch, n_heads, seq, d_head)
    tensor in which the heads with ``keep`` False output 0 (mode "zero") or ``means[h]`` (mode "mean")."""
    x = fixed_randn(2, 4, 3, 5, seed=51)
    keep = torch.tensor([True, False, True, False])
    means = fixed_randn(4, 5, seed=52)
    want = _ablated(x, keep, "zero", None)
    got = _run_ablation(ablate_heads, "head_outputs (2, 4, 3, 5), keep [T, F, T, F] (mode left out)", x, keep)
    if close_to(got, _ablated(x, ~keep, "zero", None)):
        raise AssertionError("the mask is inverted: keep[h] True means head h is KEPT, False means it is removed")
    if close_to(got, x):
        raise AssertionError("nothing was removed: the heads with keep[h] False must output 0 in mode 'zero'")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong zero ablation of head_outputs (2, 4, 3, 5) with keep [T, F, T, F] (off by up to "
            f"{max_abs_diff(got, want):.3g}): heads are axis 1; heads 0 and 2 keep their outputs, heads 1 and 3 "
            "become 0 at every batch item and position"
        )
    got = _run_ablation(ablate_heads, "mode='zero' with means given", x, keep, mode="zero", means=means)
    if not close_to(got, want):
        raise AssertionError(
            "mode 'zero' with means given: means is ignored in mode 'zero' (removed heads output 0); only mode "
            "'mean' uses it"
        )
    want = _ablated(x, keep, "mean", means)
    got = _run_ablation(ablate_heads, "mode='mean'", x, keep, mode="mean", means=means)
    if close_to(got, _ablated(x, keep, "zero", None)):
        raise AssertionError("mode 'mean' gave zeros: it replaces each removed head's output by means[h]")
    if close_to(got, _ablated(x, ~keep, "mean", means)):
        raise AssertionError("the mask is inverted: keep[h] True means head h is KEPT, False means it is removed")
    if not close_to(got, want):
        raise AssertionError(
            f"wrong mean ablation of head_outputs (2, 4, 3, 5) (off by up to {max_abs_diff(got, want):.3g}): a removed "
            "head h outputs the vector means[h] (d_head numbers) at every batch item and every position, "
            "means[None, :, None, :] broadcast against (batch, n_heads, seq, d_head); kept heads are unchanged"
        )

    # The other forms the contract allows and the hidden tests use.
    one_head = fixed_randn(3, 1, 4, 2, seed=53)
    forms = [
        (
            "a batch of one, head_outputs (1, 3, 4, 2), mode 'mean'",
            fixed_randn(1, 3, 4, 2, seed=54),
            torch.tensor([False, True, False]),
            "mean",
            fixed_randn(3, 2, seed=55),
        ),
        (
            "a batch of one, head_outputs (1, 3, 4, 2), mode 'zero'",
            fixed_randn(1, 3, 4, 2, seed=54),
            torch.tensor([False, True, False]),
            "zero",
            None,
        ),
        (
            "one head, head_outputs (3, 1, 4, 2), keep [False], mode 'mean'",
            one_head,
            torch.tensor([False]),
            "mean",
            fixed_randn(1, 2, seed=56),
        ),
        ("one head, head_outputs (3, 1, 4, 2), keep [True], mode 'zero'", one_head, torch.tensor([True]), "zero", None),
        (
            "one position and heads of width 1, head_outputs (2, 3, 1, 1), mode 'mean'",
            fixed_randn(2, 3, 1, 1, seed=57),
            torch.tensor([True, False, False]),
            "mean",
            fixed_randn(3, 1, seed=58),
        ),
        (
            "as many positions as heads, head_outputs (2, 3, 3, 4), mode 'mean'",
            fixed_randn(2, 3, 3, 4, seed=59),
            torch.tensor([False, True, False]),
            "mean",
            fixed_randn(3, 4, seed=60),
        ),
        ("every head kept, mode 'mean'", x, torch.ones(4, dtype=torch.bool), "mean", means),
        ("every head removed, mode 'zero'", x, torch.zeros(4, dtype=torch.bool), "zero", None),
        ("float32 head_outputs and means, mode 'mean'", x.float(), keep, "mean", means.float()),
        ("float32 head_outputs, mode 'zero'", x.float(), keep, "zero", None),
        ("float16 head_outputs, mode 'zero'", x.half(), keep, "zero", None),
        ("float16 head_outputs with float32 means, mode 'mean'", x.half(), keep, "mean", means.float()),
    ]
    check_forms(
        ablate_heads,
        [
            FormInput(
                what,
                (head_outputs, mask),
                {"mode": mode} if head_means is None else {"mode": mode, "means": head_means},
                "0" if mode == "zero" else "means[h] at every batch item and position",
            )
            for what, head_outputs, mask, mode, head_means in forms
        ],
        lambda head_outputs, keep, mode, means=None: _ablated(head_outputs, keep, mode, means),
        run=lambda fn, form: _run_ablation(fn, form.what, *form.args, **form.kwargs),
        compare=_close_in_dtype,
        wrong_message="wrong result for {what} (off by up to {diff:.3g}): removed heads output {hint}, kept heads are "
        "unchanged (no squeeze: every axis may have size 1)",
        dtype=lambda form, _: form.args[0].dtype,  # the spec: the dtype of head_outputs, whatever that of means
    )

    for what, why, args, kwargs in (
        ("mode='max'", "an unknown mode", (x, keep), {"mode": "max"}),
        ("mode='mean' without means", "mode 'mean' needs means", (x, keep), {"mode": "mean"}),
        ("keep of length 3 for 4 heads", "keep must have shape (n_heads,)", (x, keep[:3]), {}),
        ("keep of shape (1, 4)", "keep must have shape exactly (n_heads,)", (x, keep[None]), {}),
        (
            "means of shape (4, 4) for d_head 5",
            "means must have shape (n_heads, d_head)",
            (x, keep),
            {"mode": "mean", "means": means[:, :4]},
        ),
        (
            "means of shape (5,)",
            "means must have shape (n_heads, d_head)",
            (x, keep),
            {"mode": "mean", "means": means[0]},
        ),
    ):
        _expect_value_error(ablate_heads, what, why, *args, **kwargs)
    report_passed("check_ablate_heads")


# ------------------------------------------------------------------------------------------------------------------
# Part 2: gate_importance


def _reference_importance(loss_fn: Callable[[Tensor, Any], Tensor], batches: Iterable, shape) -> Tensor:
    """Mean over batches of |∂loss/∂gates| at gates = 1 (float32), with no autograd history."""
    total, count = torch.zeros(shape), 0
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        (grad,) = torch.autograd.grad(loss_fn(gates, batch), gates)
        total, count = total + grad.abs(), count + 1
    return total / count


class _Loss:
    """A loss of the gates that records what it was given, so the check can say what went wrong."""

    def __init__(self, fn: Callable[[Tensor, Any], Tensor], shape: tuple[int, ...]) -> None:
        self.fn, self.shape, self.problem = fn, tuple(shape), None

    def __call__(self, gates: Tensor, batch: Any) -> Tensor:
        if self.problem is None:
            if not isinstance(gates, Tensor):
                self.problem = f"loss_fn received {type(gates).__name__} as gates: pass loss_fn(gates, batch)"
            elif tuple(gates.shape) != self.shape:
                self.problem = f"loss_fn received gates of shape {tuple(gates.shape)}, expected {self.shape} = shape"
            elif gates.dtype != torch.float32:
                self.problem = f"loss_fn received {gates.dtype} gates: gates = torch.ones(shape) is float32"
            elif not bool((gates.detach() == 1).all()):
                self.problem = "loss_fn received gates that are not all 1: the gradient is taken at gates = 1"
            elif not gates.requires_grad:
                self.problem = "loss_fn received gates that do not require grad: torch.ones(shape, requires_grad=True)"
        return self.fn(gates, batch)


def _quadratic(gates: Tensor, x: Tensor) -> Tensor:
    """½ (Σ x·g)²: its gradient at g = 1 is (Σ x)·x, whose sign changes from batch to batch."""
    return 0.5 * (x * gates).sum() ** 2


def _saturating(gates: Tensor, x: Tensor) -> Tensor:
    """A loss whose gradient at g = 1 differs from that at g = 0."""
    return torch.tanh((x * gates).sum(dim=-1) - 0.5).pow(2).sum()


def _regression(gates: Tensor, batch: tuple[Tensor, Tensor]) -> Tensor:
    """A batch (inputs, targets): the squared error of a fixed linear model whose features the gates scale."""
    inputs, targets = batch
    return ((inputs * gates).sum(dim=-1) - targets).pow(2).mean()


def _run_importance(gate_importance: Callable[..., Tensor], form: FormInput) -> Tensor:
    """Call the answer with a recording loss and fresh batches; it must pass the loss what the contract says and
    return float32 numbers with no autograd history."""
    fn, make_batches, shape = form.args
    loss = _Loss(fn, tuple(shape))
    got = require_tensor(
        "gate_importance's result", call_student(gate_importance, form.what, loss, make_batches(), shape)
    )
    if loss.problem:
        raise AssertionError(f"for {form.what}: {loss.problem}")
    if tuple(got.shape) != tuple(shape) or got.dtype != torch.float32 or got.requires_grad:
        raise AssertionError(
            f"for {form.what}: expected a float32 tensor of shape {tuple(shape)} with no autograd history, got "
            f"{got.dtype} {tuple(got.shape)}{' requiring grad' if got.requires_grad else ''}"
        )
    return got


def check_gate_importance(gate_importance: Callable[..., Tensor]) -> None:
    """Part 2: ``gate_importance(loss_fn, batches, shape)`` → a float32 tensor of ``shape``, the mean over batches of
    |∂loss_fn(gates, b)/∂gates| at gates = torch.ones(shape), with no autograd history."""
    shape = (2, 3)
    batches = [fixed_randn(*shape, seed=61 + i) for i in range(3)]
    sums = [float(b.sum()) for b in batches]
    assert min(sums) < 0 < max(sums), "the check's batches must disagree in sign"  # so that |mean| ≠ mean of |·|
    loss = _Loss(_quadratic, shape)
    given = list(batches)
    got = require_tensor(
        "gate_importance's result",
        call_student(gate_importance, "a list of 3 batches (2, 3), shape (2, 3)", loss, given, shape),
    )
    if len(given) != len(batches) or any(a is not b for a, b in zip(given, batches)):
        raise AssertionError(
            f"gate_importance changed the list of batches it was given ({len(batches)} batches before the call, "
            f"{len(given)} after): the spec says inputs are not modified. Likely cause: batches.pop() or del "
            "batches[...]; iterate over them instead (for batch in batches), which also works for a generator"
        )
    if loss.problem:
        raise AssertionError(loss.problem)
    if got.requires_grad or got.grad_fn is not None:
        raise AssertionError(
            "the result still has autograd history (requires_grad or grad_fn): return plain numbers, e.g. from "
            "torch.autograd.grad(loss, gates) without create_graph, or .detach() the sum"
        )
    if tuple(got.shape) != shape:
        raise AssertionError(f"gate_importance returned shape {tuple(got.shape)}, expected {shape} = shape")
    if got.dtype != torch.float32:
        raise AssertionError(f"gate_importance returned {got.dtype}: the gates are float32, so is their gradient")
    want = _reference_importance(_quadratic, batches, shape)
    grads = [s * b for s, b in zip(sums, batches)]  # ∂loss/∂gates at 1, one per batch
    if close_to(got, (sum(grads) / len(grads)).abs()):
        raise AssertionError(
            "that is |mean of the gradients|: take the absolute value of each batch's gradient first, then average "
            "(gradients of different batches may have opposite signs and must not cancel)"
        )
    if close_to(got, len(batches) * want):
        raise AssertionError("that is the sum over the batches: average them (divide by the number of batches)")
    if close_to(got, grads[0].abs()):
        raise AssertionError("that is the first batch alone: average |gradient| over every batch")
    if close_to(got, want.new_zeros(shape)):
        raise AssertionError(
            "all zeros: the gradient is taken at gates = torch.ones(shape, requires_grad=True), with every batch"
        )
    running = [sum(grads[: i + 1]).abs() for i in range(len(grads))]
    if close_to(got, sum(running) / len(running)):
        raise AssertionError(
            "gates.grad accumulates over calls of loss.backward(): use fresh gates for each batch, or "
            "torch.autograd.grad(loss, gates), which returns the gradient without accumulating"
        )
    if not close_to(got, want):
        raise AssertionError(
            f"gate_importance differs from the mean over batches of |∂loss/∂gates| at gates = 1 by up to "
            f"{max_abs_diff(got, want):.3g}"
        )

    # The other forms the contract allows and the hidden tests use: a generator of batches (it can be iterated only
    # once), a single batch, 1-D and 3-D gates, batches that are (inputs, targets) tuples, a torch.Size.
    weights = fixed_randn(2, 4, seed=65)
    regression_batches = [
        (fixed_randn(5, 4, seed=66 + i), (fixed_randn(5, 4, seed=66 + i) * weights[i % 2]).sum(-1) + 0.3)
        for i in range(2)
    ]
    table = [
        FormInput(
            "a generator of 3 batches, gates of shape (4,)",
            (_saturating, lambda: (fixed_randn(4, seed=70 + i) for i in range(3)), (4,)),
            hint=": a generator can be iterated only once, so count the batches while you iterate (len() and a "
            "second loop do not work on it)",
        ),
        FormInput("a list holding a single batch, gates of shape (2, 3)", (_quadratic, lambda: [batches[0]], (2, 3))),
        FormInput(
            "gates of shape (2, 2, 3) (3-D), a list of 2 batches",
            (_saturating, lambda: [fixed_randn(2, 2, 3, seed=73 + i) for i in range(2)], (2, 2, 3)),
        ),
        FormInput(
            "batches that are (inputs, targets) tuples, gates of shape (4,)",
            (_regression, lambda: list(regression_batches), (4,)),
            hint=": pass each batch to loss_fn as it is (loss_fn(gates, batch)), whatever it holds",
        ),
        FormInput(
            "shape given as torch.Size([2, 3]), a tuple of 2 batches",
            (_quadratic, lambda: tuple(batches[1:]), torch.Size([2, 3])),
        ),
    ]
    check_forms(
        gate_importance,
        table,
        lambda loss_fn, make_batches, shape: _reference_importance(loss_fn, make_batches(), tuple(shape)),
        run=_run_importance,
        shape_message="for {what}: expected a float32 tensor of shape {want} with no autograd history, got {got}",
        wrong_message="wrong importance for {what} (off by up to {diff:.3g}){hint}",
        dtype=lambda form, _: torch.float32,  # the spec: float32, the dtype of the gates, whatever the batches hold
    )
    report_passed("check_gate_importance")


# ------------------------------------------------------------------------------------------------------------------
# Part 3: prune_mask


def _check_mask(got: Tensor, importance: Tensor, fraction: float, what: str) -> None:
    """Exactly ⌊fraction · n⌋ heads are False, and none of them is more important than a kept head."""
    n = importance.numel()
    k = math.floor(fraction * n)
    if got.dtype != torch.bool:
        raise AssertionError(f"prune_mask returned {got.dtype} for {what}: return a bool tensor (True = keep)")
    if tuple(got.shape) != tuple(importance.shape):
        raise AssertionError(
            f"prune_mask returned shape {tuple(got.shape)} for {what}, expected {tuple(importance.shape)}: the mask "
            "has the shape of importance"
        )
    removed = int((~got).sum())
    if removed != k:
        hint = ""
        if removed == n - k:
            hint = " (True means KEEP: is the mask inverted?)"
        elif removed in (round(fraction * n), math.ceil(fraction * n), k + 1):
            hint = " (use math.floor: round() and math.ceil() go up here, and the first k of a ranking are [:k])"
        elif removed > k:
            hint = (
                " (with tied importances a threshold such as importance <= the k-th smallest value removes every "
                "tied head: pick exactly k, e.g. from torch.argsort)"
            )
        raise AssertionError(
            f"prune_mask removed {removed} of {n} heads for {what}; k = math.floor({fraction} × {n}) = {k} must be "
            f"False{hint}"
        )
    if 0 < k < n:
        values = importance.detach().double()
        highest_removed, lowest_kept = float(values[~got].max()), float(values[got].min())
        if highest_removed > lowest_kept:
            raise AssertionError(
                f"prune_mask removed a head of importance {highest_removed:.3g} but kept one of {lowest_kept:.3g} "
                f"for {what}: remove the k heads of LOWEST importance, counted over the whole tensor (not per layer)"
            )


def _run_prune(prune_mask: Callable[[Tensor, float], Tensor], what: str, importance: Tensor, fraction: float) -> Tensor:
    got = require_tensor("prune_mask's result", call_student(prune_mask, what, importance.clone(), fraction))
    _check_mask(got, importance, fraction, what)
    return got


def _removed(mask: Tensor, importance: Tensor) -> Tensor:
    """The importances of the heads a keep-mask removes, in ascending order (the same whichever tied heads go)."""
    return importance.detach().double()[~mask].sort().values


def _lowest(importance: Tensor, fraction: float) -> Tensor:
    """The contract, as the importances of the heads removed: the ⌊fraction · n⌋ lowest, ascending."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction {fraction} is not in [0, 1]")
    return importance.flatten().sort().values[: math.floor(fraction * importance.numel())]


def check_prune_mask(prune_mask: Callable[[Tensor, float], Tensor]) -> None:
    """Part 3: ``prune_mask(importance, fraction)`` → a bool keep-mask of importance's shape whose ⌊fraction · n⌋ least
    important heads, over the whole tensor, are False; ValueError for a fraction outside [0, 1]."""
    importance = torch.tensor(
        [[0.5, 0.1, 0.9, 0.3], [0.8, 0.2, 0.7, 0.05], [0.6, 0.95, 0.4, 0.85]], dtype=torch.float64
    )  # 3 layers × 4 heads; the three least important heads: two in layer 1, one in layer 0, none in layer 2
    what = "importance (3, 4), fraction 0.3 (k = ⌊3.6⌋ = 3)"
    given = importance.clone()
    got = require_tensor("prune_mask's result", call_student(prune_mask, what, given, 0.3))
    want = importance > 0.2
    if isinstance(got, Tensor) and got.shape == want.shape and got.dtype == torch.bool:
        if torch.equal(got, ~want):
            raise AssertionError("the mask is inverted: True means the head is KEPT, False that it is pruned")
        per_layer = torch.ones_like(want)
        per_layer[torch.arange(3), importance.argmin(dim=1)] = False
        if torch.equal(got, per_layer):
            raise AssertionError(
                "that prunes ⌊0.3 × 4⌋ = 1 head in each layer: rank the heads over the whole model (flatten "
                "importance), and prune ⌊0.3 × 12⌋ = 3 heads wherever they are"
            )
        highest = torch.ones_like(want)
        highest.view(-1)[importance.flatten().argsort(descending=True)[:3]] = False
        if torch.equal(got, highest):
            raise AssertionError("that prunes the MOST important heads: prune the ones of lowest importance")
    _check_mask(got, importance, 0.3, what)

    # The other forms the contract allows and the hidden tests use. Ties leave a choice of heads, so the table
    # compares the importances of the heads removed (_run_prune has checked that they are the lowest).
    ties = torch.tensor([2.0, 1.0, 2.0, 0.5, 2.0, 3.0, 2.0, 4.0])
    table = [
        FormInput(what, (imp, fraction))
        for imp, fraction, what in (
            (importance, 0.0, "fraction 0 (nothing pruned)"),
            (importance, 1.0, "fraction 1 (every head pruned)"),
            (importance, 0.55, "fraction 0.55 (k = ⌊6.6⌋ = 6)"),
            (fixed_randn(7, seed=81), 0.5, "1-D importance (7,), fraction 0.5 (k = ⌊3.5⌋ = 3)"),
            (fixed_randn(2, 2, 3, seed=82), 0.25, "3-D importance (2, 2, 3), fraction 0.25 (k = 3)"),
            (fixed_randn(1, 5, seed=83).float(), 0.5, "float32 importance (1, 5), fraction 0.5 (k = 2)"),
            (ties, 0.5, "tied importances [2, 1, 2, 0.5, 2, 3, 2, 4], fraction 0.5 (k = 4: 0.5, 1 and two of the 2s)"),
            (ties, 0.25, "tied importances, fraction 0.25 (k = 2)"),
        )
    ]
    table += [
        FormInput(f"fraction {f}", (importance.clone(), f), hint="a fraction must lie in [0, 1]") for f in (-0.1, 1.5)
    ]
    check_forms(
        prune_mask,
        table,
        _lowest,
        run=lambda fn, form: _removed(_run_prune(fn, form.what, *form.args), form.args[0]),
        wrong_message="prune_mask removed heads of importance {got_values} for {what}, expected {want_values}: the "
        "⌊fraction · n⌋ lowest, over the whole tensor",
        dtype=None,  # the run compares the importances removed; _check_mask has held the mask to torch.bool
    )

    report_passed("check_prune_mask")
