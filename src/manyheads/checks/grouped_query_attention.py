"""Visible checks of exercise 7 (chapter 7, sharing keys and values: MQA, GQA and the KV cache), reached as
``mh.checks.<name>``.

Like every module of :mod:`manyheads.checks`: each ``check_*`` takes the student's function, runs it on small fixed
inputs, prints a one-line success message or raises ``AssertionError`` naming the likely bug;
``NotImplementedError`` from an unanswered stub passes through unchanged. The graded hidden tests use other, random
inputs. Each check tries every input form the contract allows (keyword and positional calls, the defaults, sizes
beyond 2**31 bytes; one K/V head, n_rep = 1, a batch of one; weights and biases; multi-head, grouped-query and
multi-query attention with every mask shape), so that passing it and then losing hidden points means a real bug.

Contract (exercise 7): :func:`check_kv_cache_bytes` (2 · n_layers · n_kv_heads · d_head · seq_len · batch ·
bytes_per_element, a Python int, exact beyond 2**31), :func:`check_repeat_kv` (output head h is input head h // n_rep),
:func:`check_grouped_query_attention` (query head h uses K/V head h // (n_heads / n_kv_heads); ValueError for invalid
head counts), :func:`check_mean_pool_kv` (each group of consecutive heads' blocks averaged, for a weight
(d_model, n_heads·d_head) or a bias (n_heads·d_head,); ValueError unless n_kv_heads divides n_heads). Tensors come
back in the dtype of the tensors given, and no input changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from manyheads.attention import merge_heads as _merge
from manyheads.attention import scaled_dot_product_attention as _sdpa
from manyheads.attention import split_heads as _split
from manyheads.checks.core import (
    DTYPE_MESSAGE,
    FormInput,
    call_student,
    check_forms,
    close_to,
    expect_value_error,
    fixed_randn,
    max_abs_diff,
    report_passed,
    require_int,
    require_tensor,
)

__all__ = [
    "check_kv_cache_bytes",
    "check_repeat_kv",
    "check_grouped_query_attention",
    "check_mean_pool_kv",
    "reference_grouped_query_attention",
]


# ------------------------------------------------------------------------------------------------------------------
# Part 1: kv_cache_bytes


def _cache(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int = 1, bytes_per_element: int = 2
) -> int:
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element


def _as_int32(value: int) -> int:
    """What an int32 product wraps to (two's complement), to recognise an overflow."""
    return (value + 2**31) % 2**32 - 2**31


_OVERFLOW = (
    "the product overflowed 32-bit integers: an int32 (a tensor or a NumPy number) stops at 2**31 − 1 = "
    "2,147,483,647, then wraps around or refuses the number; multiply the Python ints you are given, which never "
    "overflow"
)
_RENAMED = (
    "keep the parameter names and the defaults of the def line: the check calls kv_cache_bytes by position and by "
    "keyword, as the hidden tests do"
)
_FLOAT_HINT = "the arithmetic went through a float (a / or a constant such as 2.0): use only * on the ints"


def _run_cache(fn: Callable[..., Any], form: FormInput) -> int:
    """The answer's int for a form; a crash or a non-int says why where the cause is known (an int32 overflow, a
    renamed parameter)."""
    want = _cache(*form.args, **form.kwargs)
    try:
        got = call_student(fn, form.what, *form.args, **form.kwargs)
    except AssertionError as failure:
        cause = failure.__cause__
        text = str(cause).lower()
        if "overflow" in text or "int32" in text:
            why = f"{_OVERFLOW} ({want:,} bytes here)"
        elif isinstance(cause, TypeError) and "argument" in text:
            why = _RENAMED
        else:
            raise
        raise AssertionError(f"{failure}. Likely cause: {why}") from cause
    if "int32" in str(getattr(got, "dtype", "")):  # an int32 tensor or NumPy number: fits here, not in real caches
        raise AssertionError(
            f"{form.what} returned {got!r}, a 32-bit integer, not a Python int: int32 stops at 2**31 − 1 = "
            "2,147,483,647 and real caches go far beyond it (the product would overflow 32-bit integers); multiply "
            "the Python ints you are given, which never overflow"
        )
    return require_int(got, form.what, _FLOAT_HINT)


def _cache_hint(got: Any, args: tuple, passed: set[str]) -> str:
    """Why ``got`` differs from the formula (``passed``: the arguments given), when a known mistake explains it."""
    n_layers, n_kv, d_head, seq, batch, size = args
    want = _cache(*args)
    if "bytes_per_element" not in passed and got == want // 2 * 4:
        return "the default of bytes_per_element is 2 (16-bit floats), not 4"
    if got == want // 2:
        return "that counts the keys only (or the values only): the cache holds both, so multiply by 2"
    if got == 2 * want:
        return "that counts K and V twice: the factor 2 already stands for keys and values"
    if size != 1 and got == want // size:
        return "that is the number of elements: multiply by bytes_per_element"
    if batch != 1 and got == want // batch:
        return "batch is ignored: every sequence of the batch has its own cache"
    if want >= 2**31 and got == _as_int32(want):
        return _OVERFLOW
    return "it is 2 · n_layers · n_kv_heads · d_head · seq_len · batch · bytes_per_element bytes"


def check_kv_cache_bytes(kv_cache_bytes: Callable[..., int]) -> None:
    """Part 1: ``kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2)`` → a Python
    int, 2 · n_layers · n_kv_heads · d_head · seq_len · batch · bytes_per_element, called with keywords, positionally
    and with the defaults, up to sizes far beyond 2**31."""
    names = ("n_layers", "n_kv_heads", "d_head", "seq_len", "batch", "bytes_per_element")
    calls = [  # (args, how many are positional, which keywords are given; None: all of them)
        ((30, 3, 64, 8192, 1, 2), 0, None),  # SmolLM2-135M at its 8,192-token context, all by keyword
        ((32, 32, 128, 4096, 8, 2), 6, ()),  # Llama 2 7B, a batch of 8: 16 GiB, positionally
        ((80, 8, 128, 4096, 1, 2), 4, ()),  # Llama 2 70B with both defaults
        ((30, 9, 64, 2048, 4, 2), 4, ("batch",)),  # batch by keyword, bytes_per_element by default
        ((32, 8, 128, 1000, 1, 1), 4, ("bytes_per_element",)),  # 8-bit cache, batch by default
        ((30, 1, 64, 100, 2, 4), 4, ("batch", "bytes_per_element")),  # a float32 cache
        ((126, 8, 128, 131072, 16, 4), 2, ("d_head", "seq_len", "batch", "bytes_per_element")),  # ~2·10¹² bytes
        ((1, 1, 1, 1, 1, 1), 6, ()),
    ]
    table = []
    for args, n_positional, keywords in calls:
        given = dict(zip(names, args)) if keywords is None else {n: args[names.index(n)] for n in keywords}
        positional = args[:n_positional] if keywords is not None else ()
        shown = ", ".join([*map(str, positional), *(f"{k}={v}" for k, v in given.items())])
        passed = set(names[: len(positional)]) | set(given)
        hint = lambda got, args=args, passed=passed: _cache_hint(got, args, passed)  # noqa: E731
        table.append(FormInput(f"kv_cache_bytes({shown})", positional, given, hint))
    check_forms(
        kv_cache_bytes,
        table,
        _cache,
        run=_run_cache,
        wrong_message="{what} returned {got:,}, expected {want:,}: {hint}",
    )
    report_passed("check_kv_cache_bytes")


# ------------------------------------------------------------------------------------------------------------------
# Part 2: repeat_kv


def _same_numbers(got: Tensor, want: Tensor) -> bool:
    """Repeating only copies numbers: the hidden tests compare them exactly, so this check does too."""
    return torch.equal(got.detach().double(), want.double())


def _dtype_failure(name: str, got: Tensor, want: torch.dtype, what: str) -> AssertionError:
    fields = {"name": name, "kind": "", "got": got.dtype, "want": want, "why": "the dtype of its inputs", "what": what}
    return AssertionError(DTYPE_MESSAGE.format(**fields))


def _run_repeat(fn: Callable, form: FormInput) -> Tensor:
    """Call the answer on a copy of x (call_student fails it if the copy changes); the result in x's dtype."""
    x, n_rep = form.args
    got = require_tensor("repeat_kv's result", call_student(fn, form.what, x.clone(), n_rep))
    if got.dtype != x.dtype:
        raise _dtype_failure("repeat_kv", got, x.dtype, form.what)
    return got


# What an axis of x holds, for a result repeated along the wrong one.
_REPEATED = {0: "the batch (axis 0)", 2: "the positions (axis 2)", 3: "the numbers of each vector, d_head (axis 3)"}


def check_repeat_kv(repeat_kv: Callable[[Tensor, int], Tensor]) -> None:
    """Part 2: ``repeat_kv(x, n_rep)``: (batch, n_kv_heads, seq, d_head) → (batch, n_kv_heads·n_rep, seq, d_head),
    output head h being input head h // n_rep (each K/V head n_rep times in a row)."""
    x = fixed_randn(2, 3, 4, 5, seed=71)
    shape_hint = "output head h is input head h // n_rep, so shape (batch, n_kv_heads · n_rep, seq, d_head)"
    first = FormInput("x (2, 3, 4, 5), n_rep=2", (x, 2), hint=shape_hint)
    got = _run_repeat(repeat_kv, first)
    if got.dim() != 4:
        raise AssertionError(
            f"repeat_kv returned shape {tuple(got.shape)} for {first.what}, expected (2, 6, 4, 5): keep x's four "
            "axes (repeat_interleave without dim= flattens x into one long vector first: pass dim=1)"
        )
    for axis, holds in _REPEATED.items():
        if tuple(got.shape) == tuple(2 * n if a == axis else n for a, n in enumerate(x.shape)):
            raise AssertionError(
                f"repeat_kv returned shape {tuple(got.shape)} for {first.what}: that repeats {holds}; repeat the "
                "heads, axis 1 (dim=1)"
            )
    if tuple(got.shape) == (2, 6, 4, 5) and torch.equal(got, x.repeat(1, 2, 1, 1)):
        raise AssertionError(
            "the heads come out as 0, 1, 2, 0, 1, 2: that tiles the whole block of heads (x.repeat, torch.cat of "
            "copies), so output head h is input head h % n_kv_heads. Each K/V head must be repeated n_rep times in "
            "a row, 0, 0, 1, 1, 2, 2: output head h is input head h // n_rep (repeat_interleave, not repeat)"
        )

    want = x.repeat_interleave(2, dim=1)
    if tuple(got.shape) != tuple(want.shape):
        raise AssertionError(
            f"repeat_kv returned shape {tuple(got.shape)} for {first.what}, expected {tuple(want.shape)}: {shape_hint}"
        )
    if not _same_numbers(got, want):
        raise AssertionError(f"repeat_kv returned the wrong numbers for {first.what}: {shape_hint}")

    # The other forms the contract allows and the hidden tests use.
    each_head = "keep every axis even of size 1 (no squeeze), keep the dtype, and repeat each head n_rep times in a row"
    table = [
        FormInput(what, (fixed_randn(*shape, seed=72).to(dtype), n_rep), hint=each_head)
        for shape, n_rep, dtype, what in (
            ((2, 3, 4, 5), 1, torch.float64, "n_rep=1 (multi-head attention: nothing to repeat)"),
            ((2, 1, 4, 3), 4, torch.float64, "one K/V head, x (2, 1, 4, 3), n_rep=4 (multi-query attention)"),
            ((1, 2, 3, 4), 3, torch.float64, "a batch of one, x (1, 2, 3, 4), n_rep=3"),
            ((3, 2, 1, 2), 2, torch.float32, "a single position in float32, x (3, 2, 1, 2), n_rep=2"),
            ((2, 4, 5, 1), 2, torch.float32, "heads of width 1, x (2, 4, 5, 1), n_rep=2"),
        )
    ]
    check_forms(
        repeat_kv,
        table,
        lambda x, n_rep: x.repeat_interleave(n_rep, dim=1),
        run=_run_repeat,
        compare=_same_numbers,
        wrong_message="{name} returned the wrong numbers for {what}: {hint}",
    )
    report_passed("check_repeat_kv")


# ------------------------------------------------------------------------------------------------------------------
# Part 3: grouped_query_attention


def reference_grouped_query_attention(
    x: Tensor,
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    w_o: Tensor,
    n_heads: int,
    n_kv_heads: int,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Exercise 7's contract: x (batch, seq, d_model); w_q, w_o (d_model, d_model); w_k, w_v
    (d_model, n_kv_heads·d_head), applied as ``x @ w``. Returns output (batch, seq, d_model) and weights
    (batch, n_heads, seq, seq). ValueError unless n_heads divides d_model and n_kv_heads divides n_heads."""
    if n_heads <= 0 or n_kv_heads <= 0 or x.shape[-1] % n_heads or n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} must divide d_model and n_kv_heads={n_kv_heads} must divide n_heads")
    group = n_heads // n_kv_heads
    q = _split(x @ w_q, n_heads)
    k, v = (_split(x @ w, n_kv_heads).repeat_interleave(group, dim=1) for w in (w_k, w_v))
    heads, weights = _sdpa(q, k, v, mask)
    return _merge(heads) @ w_o, weights


def _tiled(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None, scale=None):
    """The classic mistakes, for the messages: K/V heads tiled (h % n_kv_heads) and another scale."""
    q = _split(x @ w_q, n_heads)
    k, v = (_split(x @ w, n_kv_heads) for w in (w_k, w_v))
    group = n_heads // n_kv_heads
    if scale is None:
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
        scale = 1.0
    else:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    heads, weights = _sdpa(q * scale, k, v, mask)
    return _merge(heads) @ w_o, weights


def _gqa_inputs(batch: int, seq: int, d_model: int, n_heads: int, n_kv_heads: int, seed: int, dtype=torch.float64):
    x = fixed_randn(batch, seq, d_model, seed=seed)
    d_kv = n_kv_heads * (d_model // n_heads)
    shapes = ((d_model, d_model), (d_model, d_kv), (d_model, d_kv), (d_model, d_model))
    ws = [fixed_randn(*s, seed=seed + 1 + i) * 1.5 / math.sqrt(d_model) for i, s in enumerate(shapes)]
    return x.to(dtype), [w.to(dtype) for w in ws]


def _random_mask(*shape: int, seed: int) -> Tensor:
    m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < 0.5
    m[..., 0] = True  # every query may attend to at least one key
    return m


def _run_gqa(fn: Callable, what: str, x: Tensor, ws: list[Tensor], n_heads: int, n_kv: int, mask: Tensor | None):
    """Call the answer on copies (mask by keyword, as the hidden tests pass it; call_student fails it if one
    changes)."""
    kwargs = {} if mask is None else {"mask": mask.clone()}
    result = call_student(fn, what, x.clone(), *(w.clone() for w in ws), n_heads, n_kv, **kwargs)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(
            f"grouped_query_attention should return a tuple (output, weights), got {type(result).__name__}"
        )
    return require_tensor("output", result[0]), require_tensor("weights", result[1])


def _run_gqa_form(fn: Callable, form: FormInput) -> tuple[Tensor, Tensor]:
    x, w_q, w_k, w_v, w_o, n_heads, n_kv = form.args
    return _run_gqa(fn, form.what, x, [w_q, w_k, w_v, w_o], n_heads, n_kv, form.kwargs.get("mask"))


def check_grouped_query_attention(grouped_query_attention: Callable[..., tuple[Tensor, Tensor]]) -> None:
    """Part 3: ``grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None)`` → (output,
    weights); query head h uses K/V head h // (n_heads / n_kv_heads); every mask shape of the contract; ValueError
    for invalid head counts."""
    fn = grouped_query_attention
    batch, seq, d_model, n_heads, n_kv = 2, 5, 12, 6, 2  # groups of 3 query heads; d_head = 2
    x, ws = _gqa_inputs(batch, seq, d_model, n_heads, n_kv, seed=73)
    what = "x (2, 5, 12), w_k and w_v (12, 4), n_heads=6, n_kv_heads=2"
    output, weights = _run_gqa(fn, what, x, ws, n_heads, n_kv, None)
    want_out, want_w = reference_grouped_query_attention(x, *ws, n_heads, n_kv)
    if tuple(weights.shape) != tuple(want_w.shape):
        hint = "(batch, n_heads, seq, seq): one pattern per QUERY head"
        if tuple(weights.shape) == (batch, n_kv, n_heads // n_kv, seq, seq):
            hint += "; merge the (n_kv_heads, group) axes into one head axis, in that order"
        elif tuple(weights.shape) == (batch, n_kv, seq, seq):
            hint += ", not one per K/V head: the query heads of a group share keys, not their queries"
        raise AssertionError(f"weights have shape {tuple(weights.shape)}, expected {tuple(want_w.shape)} {hint}")
    if tuple(output.shape) != tuple(want_out.shape):
        raise AssertionError(
            f"output has shape {tuple(output.shape)}, expected {tuple(want_out.shape)} = (batch, seq, d_model)"
        )
    if not close_to(weights.sum(-1), torch.ones(batch, n_heads, seq, dtype=torch.float64)):
        raise AssertionError("each row of weights should sum to 1: softmax over the keys, the last axis (dim=-1)")
    if not close_to(weights, want_w):
        d_head = d_model // n_heads
        if close_to(weights, _tiled(x, *ws, n_heads, n_kv)[1]):
            raise AssertionError(
                "the K/V heads are tiled (x.repeat or torch.cat of copies): query head h then uses K/V head "
                "h % n_kv_heads. The contract gives each K/V head a group of consecutive query heads: query head h "
                "uses K/V head h // (n_heads / n_kv_heads) (repeat_interleave, or your repeat_kv)"
            )
        for divisor, hint in (
            (1, "the scores are not scaled: divide them by √d_head"),
            (d_model, "the scores are divided by √d_model: divide by √d_head, each head's width"),
            (n_kv * d_head, "the scores are divided by √(n_kv_heads·d_head), the width of k: use √d_head"),
        ):
            if close_to(weights, _tiled(x, *ws, n_heads, n_kv, scale=math.sqrt(d_head / divisor))[1]):
                raise AssertionError(hint)
        raise AssertionError(
            f"weights differ from the reference by up to {max_abs_diff(weights, want_w):.3g}: split q into n_heads "
            "heads and k, v into n_kv_heads heads (reshape, then transpose), and repeat each K/V head for its group"
        )
    if not close_to(output, want_out):
        raise AssertionError(
            f"the weights are right but the output differs by up to {max_abs_diff(output, want_out):.3g}: weights "
            "@ v with v repeated like k, merge the heads (transpose back, then reshape) and apply w_o"
        )

    mask = _random_mask(seq, seq, seed=88)
    mask[:, -1] = False  # every row has a True and a False: the inverted mask is a valid mask too
    output, weights = _run_gqa(fn, what + ", a (5, 5) mask passed as mask=", x, ws, n_heads, n_kv, mask)
    want_out, want_w = reference_grouped_query_attention(x, *ws, n_heads, n_kv, mask)
    if tuple(weights.shape) == tuple(want_w.shape) and close_to(
        weights, reference_grouped_query_attention(x, *ws, n_heads, n_kv, ~mask)[1]
    ):
        raise AssertionError("the mask is inverted: True = may attend; set the scores where the mask is False to -inf")
    unmasked = reference_grouped_query_attention(x, *ws, n_heads, n_kv)[1]
    if tuple(weights.shape) == tuple(want_w.shape) and close_to(weights, unmasked.masked_fill(~mask, 0.0)):
        raise AssertionError(
            "the mask is applied after the softmax: the weights left on the allowed keys no longer sum to 1. Set the "
            "scores to -inf where the mask is False BEFORE the softmax, which then shares each row among the allowed "
            "keys"
        )
    if not (close_to(weights, want_w) and close_to(output, want_out)):
        raise AssertionError(
            "wrong result with a (seq, seq) mask: True = may attend; set the other scores to -inf before the "
            "softmax (the same mask for every head)"
        )
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()

    # Every other form the contract allows: multi-head and multi-query attention, every mask shape, a batch of one
    # and more, one head, heads of width 1, float32.
    broadcast = "a size-1 axis of the mask broadcasts; let masked_fill (or torch.where) broadcast it for you"
    forms = [  # (batch, seq, d_model, n_heads, n_kv_heads, dtype, mask, what, hint)
        (2, 4, 8, 4, 4, torch.float64, None, "multi-head attention, n_heads = n_kv_heads = 4", "nothing to share"),
        (
            1,
            5,
            8,
            4,
            1,
            torch.float64,
            causal,
            "multi-query attention (n_kv_heads=1), a batch of one, a causal (5, 5) mask",
            "with one K/V head every query head uses it; keep the batch axis of size 1 (no squeeze)",
        ),
        (
            3,
            5,
            12,
            6,
            3,
            torch.float64,
            _random_mask(3, 1, 1, 5, seed=74),
            "a padding mask of shape (3, 1, 1, 5), n_heads=6, n_kv_heads=3",
            f"(batch, 1, 1, seq) hides the same keys from every head and query of a sequence: {broadcast}",
        ),
        (
            2,
            5,
            12,
            6,
            2,
            torch.float64,
            _random_mask(2, 1, 5, 5, seed=75),
            "a mask of shape (2, 1, 5, 5), n_heads=6, n_kv_heads=2",
            f"(batch, 1, seq, seq) is one mask per sequence, shared by the heads: {broadcast}",
        ),
        (
            2,
            5,
            8,
            4,
            2,
            torch.float64,
            _random_mask(2, 4, 5, 5, seed=76),
            "a mask of shape (2, 4, 5, 5), one per query head, n_heads=4, n_kv_heads=2",
            "(batch, n_heads, seq, seq) gives every QUERY head its own mask: query head h uses mask[:, h], even "
            "when it shares its K/V head",
        ),
        (
            2,
            5,
            6,
            3,
            1,
            torch.float64,
            _random_mask(5, 5, seed=77),
            "a random (5, 5) mask with multi-query attention, n_heads=3",
            "a (seq, seq) mask is the same for every sequence and head",
        ),
        (
            2,
            3,
            4,
            4,
            2,
            torch.float64,
            None,
            "heads of width 1, x (2, 3, 4), n_heads=4, n_kv_heads=2",
            "with d_head = 1 keep the last axis of size 1 (no squeeze), and divide by √1",
        ),
        (2, 4, 6, 1, 1, torch.float64, None, "a single head, n_heads = n_kv_heads = 1", "d_head = d_model"),
        (
            3,
            4,
            8,
            4,
            2,
            torch.float32,
            _random_mask(3, 1, 1, 4, seed=78),
            "float32 inputs with a (3, 1, 1, 4) padding mask, n_heads=4, n_kv_heads=2",
            "float32 must work as well as float64: keep the input's dtype (use float('-inf'), not -1e300)",
        ),
    ]
    table = []
    for b, s, d, h, g, dtype, mask, what, hint in forms:
        xx, wws = _gqa_inputs(b, s, d, h, g, seed=79, dtype=dtype)
        table.append(FormInput(what, (xx, *wws, h, g), {} if mask is None else {"mask": mask}, hint))
    check_forms(fn, table, reference_grouped_query_attention, returns=("output", "weights"), run=_run_gqa_form)

    for b, d, h, g, why in (
        (2, 12, 6, 4, "n_kv_heads=4 does not divide n_heads=6"),
        (2, 8, 4, 3, "n_kv_heads=3 does not divide n_heads=4"),
        (2, 8, 4, 8, "n_kv_heads=8 is more than n_heads=4"),
        (2, 12, 5, 1, "n_heads=5 does not divide d_model=12"),
    ):
        xx = fixed_randn(b, 3, d, seed=80)
        d_head = max(d // h, 1)
        wws = [fixed_randn(d, d, seed=81), fixed_randn(d, g * d_head, seed=82), fixed_randn(d, g * d_head, seed=83)]
        expect_value_error(
            fn, f"n_heads={h}, n_kv_heads={g}, d_model={d}", why, xx, *wws, fixed_randn(d, d, seed=84), h, g
        )
    report_passed("check_grouped_query_attention")


# ------------------------------------------------------------------------------------------------------------------
# Part 4: mean_pool_kv


def _pooled(w: Tensor, n_heads: int, n_kv_heads: int, how: str = "mean") -> Tensor:
    """Consecutive groups averaged (the contract; ValueError unless n_kv_heads divides n_heads), or the classic
    mistakes: strided groups, sums, the first head."""
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}")
    *lead, width = w.shape
    d_head, group = width // n_heads, n_heads // n_kv_heads
    if how == "strided":
        return w.reshape(*lead, group, n_kv_heads, d_head).mean(dim=-3).reshape(*lead, n_kv_heads * d_head)
    blocks = w.reshape(*lead, n_kv_heads, group, d_head)
    picked = {"mean": blocks.mean(dim=-2), "sum": blocks.sum(dim=-2), "first": blocks[..., 0, :]}[how]
    return picked.reshape(*lead, n_kv_heads * d_head)


def _run_pool(fn: Callable, what: str, w: Tensor, n_heads: int, n_kv: int) -> Tensor:
    """Call the answer on a copy of w (call_student fails it if the copy changes); the result in w's dtype."""
    got = require_tensor("mean_pool_kv's result", call_student(fn, what, w.clone(), n_heads, n_kv))
    if got.dtype != w.dtype:
        raise _dtype_failure("mean_pool_kv", got, w.dtype, what)
    return got


def check_mean_pool_kv(mean_pool_kv: Callable[[Tensor, int, int], Tensor]) -> None:
    """Part 4: ``mean_pool_kv(w, n_heads, n_kv_heads)``: a K or V weight (d_model, n_heads·d_head) or its bias
    (n_heads·d_head,) → (d_model, n_kv_heads·d_head) or (n_kv_heads·d_head,), each group of consecutive heads
    averaged; ValueError unless n_kv_heads divides n_heads."""
    w = fixed_randn(5, 12, seed=85)  # d_model 5, six heads of width 2, pooled into 2 groups of 3
    what = "w (5, 12), n_heads=6, n_kv_heads=2"
    got = _run_pool(mean_pool_kv, what, w, 6, 2)
    want = _pooled(w, 6, 2)
    if tuple(got.shape) != (5, 4):
        raise AssertionError(
            f"mean_pool_kv returned shape {tuple(got.shape)} for {what}, expected (5, 4) = "
            "(d_model, n_kv_heads · d_head): average over the heads of a group, not over a head's d_head columns"
        )
    for how, hint in (
        (
            "strided",
            "that averages heads g, g + n_kv_heads, g + 2·n_kv_heads, …: the groups are CONSECUTIVE heads, group g "
            "= heads g·r … g·r + r − 1 with r = n_heads / n_kv_heads (reshape to (…, n_kv_heads, r, d_head))",
        ),
        ("sum", "that is the sum of each group's blocks: average them (divide by r = n_heads / n_kv_heads)"),
        ("first", "that keeps the first head of each group: the contract averages all r heads of the group"),
    ):
        if close_to(got, _pooled(w, 6, 2, how)):
            raise AssertionError(f"wrong pooling for {what}: {hint}")
    if got.dtype != w.dtype or not close_to(got, want):
        raise AssertionError(
            f"wrong pooling for {what} (off by up to {max_abs_diff(got, want):.3g}): head h owns the columns "
            "[h·d_head, (h+1)·d_head); group g's block is the mean of its heads' blocks; keep the dtype of w"
        )

    # The other forms the contract allows and the hidden tests use.
    table = [
        FormInput(what, (fixed_randn(*shape, seed=86).to(dtype), n_heads, n_kv))
        for shape, n_heads, n_kv, dtype, what in (
            ((12,), 6, 2, torch.float64, "a bias of shape (12,), n_heads=6, n_kv_heads=2"),
            ((8,), 4, 1, torch.float64, "a bias of shape (8,) pooled to a single K/V head (n_kv_heads=1)"),
            ((6, 8), 4, 4, torch.float64, "n_kv_heads = n_heads = 4 (nothing to pool: w comes back unchanged)"),
            ((6, 8), 4, 1, torch.float64, "multi-query, w (6, 8), n_heads=4, n_kv_heads=1"),
            ((8, 8), 4, 2, torch.float32, "a square float32 w (8, 8), n_heads=4, n_kv_heads=2"),
            ((3, 6), 6, 3, torch.float64, "heads of width 1, w (3, 6), n_heads=6, n_kv_heads=3"),
            ((1, 12), 4, 2, torch.float64, "a single row, w (1, 12), n_heads=4, n_kv_heads=2"),
        )
    ]
    table += [
        FormInput(
            f"w {shape}, n_heads={n_heads}, n_kv_heads={n_kv}", (fixed_randn(*shape, seed=87), n_heads, n_kv), {}, why
        )
        for shape, n_heads, n_kv, why in (
            ((5, 12), 6, 4, "n_kv_heads=4 does not divide n_heads=6"),
            ((4, 8), 4, 3, "n_kv_heads=3 does not divide n_heads=4"),
            ((8,), 4, 8, "n_kv_heads=8 is more than n_heads=4"),
        )
    ]
    every_axis = (
        "A bias is 1-D: (n_heads·d_head,) → (n_kv_heads·d_head,); take d_head from the last axis, "
        "w.shape[-1] // n_heads, and keep every other axis as it is"
    )
    check_forms(
        mean_pool_kv,
        table,
        _pooled,
        run=lambda fn, form: _run_pool(fn, form.what, *form.args),
        shape_message="wrong result for {what}: expected a tensor of shape {want}, got {got}. " + every_axis,
        wrong_message="wrong result for {what} (off by up to {diff:.3g}): " + every_axis,
    )

    report_passed("check_mean_pool_kv")
