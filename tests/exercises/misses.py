"""Wrong answers made from the solution's answer instead of written by hand: the template of every part.

``missing(reference, call, miss)`` is the solution's function, except on its ``call``-th call (counting from 0;
every call if ``None``), where it misses the way ``miss`` says (:data:`manyheads.course.exercises.MISSES`): it
crashes, returns wrong numbers (or a value where the spec asks for a ValueError), drops axes of size 1, returns a
float for an int, wraps around 32-bit integers, or loses precision by computing in float32. A visible check calls
an answer on fixed inputs in a fixed order, so "the n-th call" is one input form of that check, and an answer that
misses only there handles every other form the check tries.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor


class Missed(RuntimeError):
    """What a crashing answer raises on the input it does not handle."""


def _wrong(result: Any) -> Any:
    if isinstance(result, Tensor):
        if result.dtype == torch.bool:
            return ~result
        return result + 0.5 if result.is_floating_point() else result + 1
    if isinstance(result, tuple):
        return tuple(_wrong(r) for r in result)
    if isinstance(result, bool):
        return not result
    if isinstance(result, (int, float)):
        return result + 1
    raise TypeError(f"no wrong value for a {type(result).__name__}")


def _each_tensor(result: Any, change: Callable[[Tensor], Tensor]) -> Any:
    if isinstance(result, Tensor):
        return change(result)
    if isinstance(result, tuple):
        return tuple(_each_tensor(r, change) for r in result)
    return result


def _int32(result: Any) -> Any:
    if isinstance(result, int) and not isinstance(result, bool):
        return (result + 2**31) % 2**32 - 2**31
    return result


SPOIL: dict[str, Callable[[Any], Any]] = {
    "wrong": _wrong,
    "squeezed": lambda r: _each_tensor(r, Tensor.squeeze),
    "float": lambda r: float(r) if isinstance(r, int) and not isinstance(r, bool) else r,
    "int32": _int32,
    "float32": lambda r: _each_tensor(r, lambda t: t.float().to(t.dtype) if t.is_floating_point() else t),
}


def missing(reference: Callable[..., Any], call: int | None, miss: str) -> Callable[..., Any]:
    """``reference`` (a student's name and signature: wrapped), missing the ``call``-th input the way ``miss`` says."""
    calls = 0

    @functools.wraps(reference)
    def answer(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        this, calls = calls, calls + 1
        if call is not None and this != call:
            return reference(*args, **kwargs)
        if miss == "crashes":
            raise Missed("this answer does not handle this input")
        try:
            result = reference(*args, **kwargs)
        except ValueError:  # the spec asks for a ValueError here: an answer that misses it returns something
            return None
        return SPOIL[miss](result)

    answer.calls = lambda: calls  # type: ignore[attr-defined]
    return answer


def run_check(check: Callable[[Any], None], answer: Callable[..., Any]) -> str | None:
    """The ``AssertionError`` message of ``check`` on ``answer``; ``None`` if the check passes it. Other errors
    propagate: a check must say what is wrong, not crash."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            check(answer)
        except AssertionError as failure:
            return str(failure)
    return None


def count_calls(check: Callable[[Any], None], reference: Callable[..., Any]) -> int:
    """How many times ``check`` calls a correct answer: the input forms it tries, in order."""
    answer = missing(reference, -1, "crashes")  # never misses
    assert run_check(check, answer) is None, "the reference answer must pass its visible check"
    return answer.calls()


def names_form(check: Callable[[Any], None], reference: Callable[..., Any], pieces: tuple[str, ...], miss: str):
    """``(True, call)`` if an answer that misses the way ``miss`` says on one input of ``check`` (the ``call``-th)
    fails it with a message holding ``pieces`` in order; ``(False, messages)`` with what the check said otherwise."""
    naming = re.compile(".*".join(re.escape(piece) for piece in pieces), re.S)
    seen = []
    for call in range(count_calls(check, reference)):
        message = run_check(check, missing(reference, call, miss))
        if message is not None and naming.search(message):
            return True, call
        seen.append(message)
    return False, seen
