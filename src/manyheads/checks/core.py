"""Building blocks of the exercises' visible checks (one module per exercise in ``manyheads.checks``).

Each check calls the student's function through :func:`call_student`, so that only ``NotImplementedError`` (an
unanswered stub) and ``OwnWorkError`` (the answer calls the course's own implementation of the part: the
own-work rule of :mod:`manyheads.checks.own_work`, applied here as the grader applies it) escape unchanged and
every other error says which input caused it. It also holds the student to two rules every part's spec states: the
function leaves its inputs as they were (no in-place change of a tensor it was given; :func:`call_student` compares
them before and after), and a tensor it returns has the dtype the spec names, by default the dtype of its floating-point
inputs (:func:`check_forms` compares it with :func:`expected_dtype`).

A check is a table plus its special diagnoses: its first inputs come with diagnoses of the likely bugs ("the softmax
runs over the wrong axis"), and every other input form the spec allows is a row of a table of :class:`FormInput`
(the input, the words that name it, the hint for a wrong answer there) that :func:`check_forms` runs against the
check's reference. The exercise's description names these forms (``CodePart.forms``), and the tests make, for each,
an answer that misses only that form. A row on which the reference raises ``ValueError`` is one where the answer must
raise it too; a reference that returns an ``int`` makes the row's answer an integer compared exactly.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from manyheads.checks import display
from manyheads.checks.own_work import OwnWorkError, answering

__all__ = [
    "ATOL",
    "RTOL",
    "fixed_randn",
    "close_to",
    "max_abs_diff",
    "call_student",
    "expect_value_error",
    "require_tensor",
    "require_int",
    "report_passed",
    "FormInput",
    "as_float64",
    "expected_dtype",
    "keeps_dtype",
    "check_forms",
]

# The checks use float64 inputs, so a correct float32 or float64 implementation is far inside these tolerances.
ATOL = 1e-5
RTOL = 1e-4


def fixed_randn(*shape: int, seed: int) -> Tensor:
    """Reproducible inputs that leave the caller's global random state alone."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def close_to(got: Tensor, want: Tensor) -> bool:
    return got.shape == want.shape and torch.allclose(got.detach().double(), want.double(), rtol=RTOL, atol=ATOL)


def max_abs_diff(got: Tensor, want: Tensor) -> float:
    return float((got.detach().double() - want.double()).abs().nan_to_num(math.inf).max())


def _tensor_arguments(fn: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]) -> list[tuple[str, Tensor]]:
    """The tensors among the arguments (also inside lists and tuples), each with the parameter name it is bound to."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):  # a signature the call does not fit: the call itself will say so
        bound = {**{f"argument {i + 1}": a for i, a in enumerate(args)}, **kwargs}
    found = []
    for name, value in bound.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        found += [(name, v) for v in items if isinstance(v, Tensor)]
    return found


def _unchanged(before: Tensor, after: Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point():
        return bool(((before == after) | (before.isnan() & after.isnan())).all())
    return torch.equal(before, after)


def call_student(fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function; any error but NotImplementedError becomes an AssertionError saying where, and so
    does a change to a tensor it was given (the spec of every part: inputs are not modified).

    Pass arguments the way the hidden tests do (by keyword where they use a keyword), so that a renamed parameter
    shows up here and not only in the grade.
    """
    display.install_short_tracebacks()  # a failed check shows as one message and the student's line (display.py)
    display.remember(fn)
    inputs = _tensor_arguments(fn, args, kwargs)
    copies = [t.detach().clone() for _, t in inputs]
    try:
        with answering(fn):  # the own-work rule, as the grader applies it (manyheads.checks.own_work)
            result = fn(*args, **kwargs)
    except (NotImplementedError, OwnWorkError):
        raise
    except Exception as exc:
        raise AssertionError(f"{fn.__name__} raised {type(exc).__name__} on {what}: {exc}") from exc
    for (name, tensor), copy in zip(inputs, copies):
        if not _unchanged(copy, tensor.detach()):
            raise AssertionError(
                f"{fn.__name__} changed its input {name} in place on {what}: the spec says inputs are not modified. "
                "Likely cause: an in-place operation on an argument (a method ending in _, such as masked_fill_, or "
                "x[...] = ..., x += ...); work on a copy (x.clone()) or use the out-of-place form (masked_fill)"
            )
    return result


def expect_value_error(fn: Callable[..., Any], what: str, why: str, *args: Any, **kwargs: Any) -> None:
    """The student's function must raise ValueError (not another error, not nothing) on this input."""
    display.install_short_tracebacks()
    display.remember(fn)
    try:
        with answering(fn):
            result = fn(*args, **kwargs)
    except (NotImplementedError, OwnWorkError):
        raise
    except ValueError:
        return
    except Exception as exc:
        raise AssertionError(
            f"{fn.__name__} raised {type(exc).__name__} on {what}, expected a ValueError ({why})"
        ) from exc
    shown = repr(result) if isinstance(result, (int, float, str, type(None))) else type(result).__name__
    raise AssertionError(f"{fn.__name__} returned {shown} on {what}, but should raise ValueError: {why}")


def require_tensor(name: str, value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {type(value).__name__}")
    return value


def require_int(value: Any, call: str, float_hint: str) -> int:
    """``value`` if it is exactly an ``int`` (not a float such as 64.0, a bool, a numpy or torch number); otherwise an
    ``AssertionError`` saying what ``call`` returned, with ``float_hint`` for a float (how the answer made one)."""
    if type(value) is int:  # noqa: E721 -- exactly int
        return value
    if isinstance(value, float):
        hint = float_hint
    elif isinstance(value, Tensor):
        hint = "do the arithmetic on the Python ints you are given, not on tensors (or return int(...))"
    else:
        hint = "return a plain Python int"
    raise AssertionError(f"{call} returned {value!r}, a {type(value).__name__}; the spec asks for an int: {hint}")


def report_passed(name: str) -> None:
    print(f"{name}: all visible checks passed")


@dataclass(frozen=True)
class FormInput:
    """One row of a check's table: an input form, the words that name it in messages, and the likely bug there.

    ``hint`` is a string, or a function of the answer's wrong result that returns one (a diagnosis that depends on
    what came back). On a row where the reference raises ``ValueError``, it says why the input is invalid.
    """

    what: str
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    hint: str | Callable[[Any], str] = ""

    def hint_for(self, got: Any) -> str:
        return self.hint(got) if callable(self.hint) else self.hint


def as_float64(value: Any) -> Any:
    """``value`` with every floating-point tensor in float64 (what the references compute in), others unchanged."""
    if isinstance(value, Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(as_float64(v) for v in value)
    return value


def expected_dtype(form: FormInput, reference_result: Tensor) -> torch.dtype | None:
    """The dtype a returned tensor must have for this input: for a floating-point result, the dtype of the
    floating-point tensors among the inputs (PyTorch's promotion where they differ; None where there are none); for an
    integer or boolean result, the reference's own dtype."""
    if not reference_result.is_floating_point():
        return reference_result.dtype
    floats = [
        v
        for value in (*form.args, *form.kwargs.values())
        for v in (value if isinstance(value, (list, tuple)) else [value])
        if isinstance(v, Tensor) and v.is_floating_point()
    ]
    return functools.reduce(torch.promote_types, (v.dtype for v in floats)) if floats else None


DTYPE_MESSAGE = (
    "{name} returned {kind}{got} for {what}, expected {want} ({why}). Likely cause: a tensor made without the "
    "input's dtype (torch.zeros(...) or torch.tensor(...) defaults to float32 or int64), or a .float() / .double() "
    "on the way; pass dtype=x.dtype, or end with .to(x.dtype)"
)


def keeps_dtype(name: str, got: Tensor, dtype: torch.dtype, what: str, returned: str = "result") -> None:
    """The dtype rule on a check's first input, before the diagnoses that compare numbers (check_forms applies it to
    the other forms). ``returned`` names the tensor where a function returns several."""
    if got.dtype != dtype:
        kind = "" if returned == "result" else f"{returned} as "
        fields = {"name": name, "kind": kind, "got": got.dtype, "want": dtype, "what": what}
        raise AssertionError(DTYPE_MESSAGE.format(**fields, why="the dtype of its inputs"))


def _check_dtype(name: str, returned: str, got: Any, want: Any, form: FormInput, rule: Callable | None) -> None:
    if rule is None or not isinstance(got, Tensor) or not isinstance(want, Tensor):
        return
    wanted = rule(form, want)
    if wanted is None or got.dtype == wanted:
        return
    why = "the dtype of its inputs" if rule is expected_dtype and wanted.is_floating_point else "the spec's dtype"
    kind = "" if returned == "result" else f"{returned} as "
    fields = {"name": name, "kind": kind, "got": got.dtype, "want": wanted, "why": why, "what": form.what}
    raise AssertionError(DTYPE_MESSAGE.format(**fields))


def _returned(fn: Callable[..., Any], form: FormInput, returns: Sequence[str], want: tuple) -> tuple[Any, ...]:
    result = call_student(fn, form.what, *form.args, **form.kwargs)
    if len(returns) == 1 and not isinstance(want[0], Tensor):
        return (result,)
    if len(returns) == 1:
        owner = f"{fn.__name__}'" if fn.__name__.endswith("s") else f"{fn.__name__}'s"
        return (require_tensor(f"{owner} result", result),)
    if not isinstance(result, tuple) or len(result) != len(returns):
        raise AssertionError(f"{fn.__name__} should return ({', '.join(returns)}) for {form.what}")
    return tuple(require_tensor(n, r) for n, r in zip(returns, result))


def _values(t: Any) -> Any:
    if not isinstance(t, Tensor):
        return t
    return [round(float(v), 4) for v in t.detach().double().reshape(-1)]


def _same(got: Any, want: Any) -> bool:
    return close_to(got, want) if isinstance(want, Tensor) else type(got) is type(want) and got == want


def _difference(got: Any, want: Any) -> float:
    if isinstance(got, Tensor) and isinstance(want, Tensor):
        return max_abs_diff(got, want)
    try:
        return float(abs(got - want))
    except TypeError:
        return math.inf


SHAPE_MESSAGE = "{name} returned shape {got} for {what}, expected {want}: {hint}"
WRONG_MESSAGE = "{name} is wrong for {what} (off by up to {diff:.3g}): {hint}"


def check_forms(
    fn: Callable[..., Any],
    forms: Sequence[FormInput],
    reference: Callable[..., Any],
    *,
    returns: Sequence[str] = ("result",),
    run: Callable[[Callable[..., Any], FormInput], Any] | None = None,
    compare: Callable[[Any, Any], bool] | None = None,
    shape_message: str = SHAPE_MESSAGE,
    wrong_message: str = WRONG_MESSAGE,
    dtype: Callable[[FormInput, Tensor], torch.dtype | None] | None = expected_dtype,
) -> None:
    """Run the student's ``fn`` on every form of the table; compare shapes, then values, with ``reference`` on the
    same arguments in float64. A wrong shape or value raises ``AssertionError`` naming the form and its hint. Where
    the reference raises ``ValueError``, ``fn`` must raise it too (:func:`expect_value_error`, the hint saying why).

    ``returns`` names the tensors ``fn`` returns (one, or a tuple such as ``("output", "weights")``); ``run`` calls
    ``fn`` on a form and returns them, where a check needs more (inputs that must not change, say). ``compare`` says
    whether a returned value matches the reference's: by default :func:`close_to` for tensors and ``==`` of the same
    type for anything else (integers); a check passes another where it needs exact numbers (values only moved) or
    another tolerance. For one returned value, ``shape_message`` and ``wrong_message`` word the failures with the
    fields ``name``, ``what``, ``hint``, ``got`` and ``want`` (the shapes of tensors, the values of anything else),
    ``diff`` (the largest difference), ``got_values`` and ``want_values``. ``dtype`` gives the dtype each returned
    tensor must have (by default :func:`expected_dtype`: the inputs'); ``None`` where the spec names none.
    """
    name = fn.__name__
    same = compare if compare is not None else _same
    for form in forms:
        try:
            want = reference(*as_float64(form.args), **{k: as_float64(v) for k, v in form.kwargs.items()})
        except ValueError:
            expect_value_error(fn, form.what, form.hint_for(None), *form.args, **form.kwargs)
            continue
        want = want if isinstance(want, tuple) else (want,)
        got = run(fn, form) if run is not None else _returned(fn, form, returns, want)
        got = got if isinstance(got, tuple) else (got,)
        if len(returns) == 1:
            g, w = got[0], want[0]
            tensors = isinstance(g, Tensor) and isinstance(w, Tensor)
            fields = {
                "name": name,
                "what": form.what,
                "got": tuple(g.shape) if tensors else g,
                "want": tuple(w.shape) if tensors else w,
                "got_values": _values(g),
                "want_values": _values(w),
            }
            if tensors and fields["got"] != fields["want"]:
                raise AssertionError(shape_message.format(**fields, hint=form.hint_for(g)))
            _check_dtype(name, "result", g, w, form, dtype)
            if not same(g, w):
                raise AssertionError(wrong_message.format(**fields, hint=form.hint_for(g), diff=_difference(g, w)))
            continue
        shapes = [(tuple(g.shape), tuple(w.shape)) for g, w in zip(got, want)]
        if any(g != w for g, w in shapes):
            expected = " and ".join(f"{n} {w}" for n, (_, w) in zip(returns, shapes))
            raise AssertionError(
                f"wrong shapes for {form.what}: expected {expected}, got {' and '.join(str(g) for g, _ in shapes)}. "
                f"{form.hint_for(got)}"
            )
        for n, g, w in zip(returns, got, want):
            _check_dtype(name, n, g, w, form, dtype)
        # the last returned tensor first: of (output, weights), the weights say most about the bug
        off = [(n, max_abs_diff(g, w)) for n, g, w in reversed(list(zip(returns, got, want))) if not same(g, w)]
        if off:
            diffs = ", ".join(f"{n} off by up to {d:.3g}" for n, d in off)
            raise AssertionError(f"wrong result for {form.what} ({diffs}). {form.hint_for(got)}")
