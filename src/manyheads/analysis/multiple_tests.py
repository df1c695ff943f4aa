"""Many tests at once: p-values from bootstrap standard errors, Holm and Benjamini-Hochberg corrections (chapter 5).

Chapter 5 removes each of MiniLM's 72 heads on two tasks with two ablations: 288 tests. At 5 % each, chance alone
flags about 14 of them (:func:`expected_false_positives`) even if no head mattered, so a map of uncorrected
"significant" cells cannot tell real effects from luck. Two standard corrections:

* **Holm** (:func:`holm`) controls the family-wise error: the chance that *any* flagged cell is a false positive
  stays at most ``alpha``. It is Bonferroni made uniformly more powerful (step-down on the sorted p-values).
* **Benjamini-Hochberg** (:func:`benjamini_hochberg`) controls the false discovery rate: on average at most
  ``alpha`` of the flagged cells are false positives. Better for discovery when many effects are real.

The p-values come from a paired bootstrap's standard error with a normal approximation (:func:`normal_p_values`):
the percentile bootstrap with a few hundred resamples cannot give the p-values below 1e-3 that a correction over
hundreds of tests needs. :func:`simultaneous_interval` widens a normal interval so that all ``n_tests`` intervals hold
together (Bonferroni): an interval quoted next to a "hurts" or "helps" that was picked from many cells.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["benjamini_hochberg", "expected_false_positives", "holm", "normal_p_values", "simultaneous_interval"]


def _z(probability: float) -> float:
    """The standard normal quantile of ``probability`` (0 < probability < 1)."""
    return math.sqrt(2.0) * float(torch.erfinv(torch.tensor(2.0 * probability - 1.0, dtype=torch.float64)))


def normal_p_values(estimate: Tensor, se: Tensor) -> Tensor:
    """Two-sided p-values of ``estimate`` against 0, with standard errors ``se`` (same shape), normal approximation.

    p = P(|Z| >= |estimate| / se). Where ``se`` is 0 the estimate is exact: p is 0 if it differs from 0, else 1.
    Returns float64, the shape of ``estimate``.
    """
    estimate, se = torch.as_tensor(estimate, dtype=torch.float64), torch.as_tensor(se, dtype=torch.float64)
    if estimate.shape != se.shape:
        raise ValueError(f"estimate and se must have one shape, got {tuple(estimate.shape)} and {tuple(se.shape)}")
    if (se < 0).any() or se.isnan().any() or estimate.isnan().any():
        raise ValueError("standard errors must be >= 0 and no value may be NaN")
    z = estimate.abs() / se.clamp_min(torch.finfo(torch.float64).tiny)
    p = torch.erfc(z / math.sqrt(2.0))
    return torch.where(se == 0, (estimate == 0).double(), p)


def _check(p: Tensor, alpha: float) -> Tensor:
    p = torch.as_tensor(p, dtype=torch.float64)
    if p.numel() == 0:
        raise ValueError("no p-values given")
    if p.isnan().any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values lie in [0, 1], none NaN")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return p


def holm(p: Tensor, alpha: float = 0.05) -> Tensor:
    """Holm's step-down test: which of the p-values (any shape) are rejected at family-wise error ``alpha`` (bool).

    Sort the m p-values; reject the k-th smallest while p_(k) <= alpha / (m - k + 1), and stop at the first that
    is not. The chance of one or more false rejections is at most ``alpha`` whatever the dependence between tests.

    >>> holm(torch.tensor([0.001, 0.02, 0.03, 0.5])).tolist()
    [True, False, False, False]
    """
    p = _check(p, alpha)
    flat = p.reshape(-1)
    m = flat.numel()
    order = torch.argsort(flat, stable=True)
    limits = alpha / (m - torch.arange(m, dtype=torch.float64))
    passed = flat[order] <= limits
    n_rejected = m if bool(passed.all()) else int((~passed).nonzero()[0])
    reject = torch.zeros(m, dtype=torch.bool)
    reject[order[:n_rejected]] = True
    return reject.reshape(p.shape)


def benjamini_hochberg(p: Tensor, alpha: float = 0.05) -> Tensor:
    """Benjamini-Hochberg: which p-values (any shape) are discoveries at false discovery rate ``alpha`` (bool).

    With the m p-values sorted, find the largest k with p_(k) <= k·alpha/m and reject the k smallest. On average
    at most ``alpha`` of the rejections are false (for independent or positively dependent tests).

    >>> benjamini_hochberg(torch.tensor([0.001, 0.02, 0.03, 0.5])).tolist()
    [True, True, True, False]
    """
    p = _check(p, alpha)
    flat = p.reshape(-1)
    m = flat.numel()
    order = torch.argsort(flat, stable=True)
    below = (flat[order] <= alpha * torch.arange(1, m + 1, dtype=torch.float64) / m).nonzero()
    n_rejected = 0 if below.numel() == 0 else int(below[-1]) + 1
    reject = torch.zeros(m, dtype=torch.bool)
    reject[order[:n_rejected]] = True
    return reject.reshape(p.shape)


def expected_false_positives(n_tests: int, alpha: float = 0.05) -> float:
    """How many of ``n_tests`` uncorrected tests at level ``alpha`` come out "significant" by chance alone, if no
    effect is real: n_tests · alpha (e.g. 288 tests at 5 % → 14.4)."""
    if n_tests < 0 or not 0 < alpha < 1:
        raise ValueError(f"need n_tests >= 0 and 0 < alpha < 1, got {n_tests}, {alpha}")
    return n_tests * alpha


def simultaneous_interval(estimate: float, se: float, n_tests: int, alpha: float = 0.05) -> tuple[float, float]:
    """A normal interval around ``estimate`` wide enough that ``n_tests`` such intervals all hold with probability
    at least 1 - ``alpha`` (Bonferroni): estimate ± z(1 - alpha / (2 n_tests)) · se.

    It excludes 0 exactly when the estimate passes Bonferroni's test, and then also Holm's (the first step of Holm is
    Bonferroni). For 288 tests at 5 %, z is about 3.8 instead of 1.96.
    """
    if n_tests < 1 or se < 0 or not 0 < alpha < 1:
        raise ValueError(f"need n_tests >= 1, se >= 0 and 0 < alpha < 1, got {n_tests}, {se}, {alpha}")
    half = _z(1 - alpha / (2 * n_tests)) * float(se)
    return float(estimate) - half, float(estimate) + half
