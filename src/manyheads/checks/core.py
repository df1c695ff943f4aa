"""Building blocks of the exercises' visible checks (one module per exercise in ``manyheads.checks``).

Each check calls the student's function through :func:`call_student`, so that only ``NotImplementedError`` (an
unanswered stub) and ``DelegationError`` (the answer calls the course's own implementation of the part: the
own-work rule of :mod:`manyheads.checks.own_work`, applied here as the grader applies it) escape unchanged and
every other error says which input caused it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from manyheads.checks.own_work import DelegationError, answering

__all__ = [
    "ATOL",
    "RTOL",
    "fixed_randn",
    "close_to",
    "max_abs_diff",
    "call_student",
    "expect_value_error",
    "require_tensor",
    "report_passed",
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


def call_student(fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
    """Call the student's function; any error but NotImplementedError becomes an AssertionError saying where.

    Pass arguments the way the hidden tests do (by keyword where they use a keyword), so that a renamed parameter
    shows up here and not only in the grade.
    """
    try:
        with answering(fn):  # the own-work rule, as the grader applies it (manyheads.checks.own_work)
            return fn(*args, **kwargs)
    except (NotImplementedError, DelegationError):
        raise
    except Exception as exc:
        raise AssertionError(f"{fn.__name__} raised {type(exc).__name__} on {what}: {exc}") from exc


def expect_value_error(fn: Callable[..., Any], what: str, why: str, *args: Any, **kwargs: Any) -> None:
    """The student's function must raise ValueError (not another error, not nothing) on this input."""
    try:
        with answering(fn):
            result = fn(*args, **kwargs)
    except (NotImplementedError, DelegationError):
        raise
    except ValueError:
        return
    except Exception as exc:
        raise AssertionError(
            f"{fn.__name__} raised {type(exc).__name__} on {what}, expected a ValueError ({why})"
        ) from exc
    raise AssertionError(
        f"{fn.__name__} returned {type(result).__name__} on {what}, but should raise ValueError: {why}"
    )


def require_tensor(name: str, value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {type(value).__name__}")
    return value


def report_passed(name: str) -> None:
    print(f"{name}: all visible checks passed")
