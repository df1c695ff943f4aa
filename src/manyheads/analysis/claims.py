"""Comparing words generated from measured values and their intervals, so that prose cannot outrun its evidence.

A chapter never types "helps", "most" or "sudden" next to a measured number: it computes the number and its interval,
asks this module for the word, and glues the word (``glue("removal_effect_word", compare_words(est, lo, hi))``).
When a rerun moves the interval across zero, the sentence changes with it. The course's standard
(``CONTRIBUTING.md``, "Claims follow from evidence") says which claims need this; ``tests/book/test_claims.py``
checks the rendered pages independently of these functions.

Used by chapters 5 (removals that help or hurt, shares of prunable heads), 6 (how induction scores rise during
training: sudden or gradual, per seed) and 7 (timings whose intervals overlap are "inconclusive here").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["change_words", "compare_words", "ratio_words", "seed_interval", "share_interval", "share_words"]


def _interval(estimate: float, low: float, high: float) -> tuple[float, float, float]:
    estimate, low, high = float(estimate), float(low), float(high)
    if any(math.isnan(v) for v in (estimate, low, high)):
        raise ValueError(f"an estimate and its interval must be numbers, got {estimate}, [{low}, {high}]")
    if low > high:
        raise ValueError(f"the interval's low end {low} is above its high end {high}")
    return estimate, low, high


def compare_words(
    estimate: float,
    low: float,
    high: float,
    *,
    null: float = 0.0,
    higher_is_better: bool = True,
    better: str = "helps",
    worse: str = "hurts",
    neutral: str = "makes no measurable difference",
) -> str:
    """The word for a difference ``estimate`` with interval [``low``, ``high``] (e.g. a 95 % bootstrap interval).

    ``better`` only when the whole interval lies on the good side of ``null``, ``worse`` only when it lies on the
    bad side, ``neutral`` when it contains ``null`` (the experiment cannot tell the difference from noise). For a
    loss, pass ``higher_is_better=False``; for timings, e.g. ``better="faster", worse="slower",
    neutral="inconclusive here"``.

    >>> compare_words(0.012, -0.004, 0.027)
    'makes no measurable difference'
    >>> compare_words(0.012, 0.003, 0.027)
    'helps'
    """
    _, low, high = _interval(estimate, low, high)
    if low > null:
        return better if higher_is_better else worse
    if high < null:
        return worse if higher_is_better else better
    return neutral


def share_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """(share, low, high): ``k`` of ``n`` and its Wilson score interval (95 % for ``z=1.96``)."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)


def share_words(fraction: float, low: float | None = None, high: float | None = None) -> str:
    """The word for a share (0-1): "all", "none", "nearly all", "most", "about half" or "a minority".

    With an interval, "most" needs all of it above one half and "a minority" all of it below; an interval across
    one half gives "about half". Without one, the share itself decides (exactly one half is "about half").

    >>> share_words(0.62, 0.41, 0.80)
    'about half'
    >>> share_words(0.62)
    'most'
    """
    fraction, low, high = _interval(fraction, fraction if low is None else low, fraction if high is None else high)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"a share and its interval lie in [0, 1], got {fraction}, [{low}, {high}]")
    if fraction == 1.0 and low == 1.0:
        return "all"
    if fraction == 0.0 and high == 0.0:
        return "none"
    if low > 0.5:
        return "nearly all" if fraction >= 0.9 else "most"
    if high < 0.5:
        return "a minority"
    return "about half"


def ratio_words(ratio: float, low: float, high: float, *, much: float = 2.0) -> str:
    """The word for a ratio (e.g. one cache size over another) with its interval: "much larger" needs the whole
    interval at or above ``much``, "larger" above 1, "smaller" / "much smaller" mirrored, else "about the same"."""
    ratio, low, high = _interval(ratio, low, high)
    if low <= 0:
        raise ValueError(f"a ratio's interval must be positive, got [{low}, {high}]")
    if low >= much:
        return "much larger"
    if low > 1.0:
        return "larger"
    if high <= 1.0 / much:
        return "much smaller"
    if high < 1.0:
        return "smaller"
    return "about the same"


def change_words(
    values: Sequence[float], *, window: float = 0.1, jump_share: float = 0.5, min_change: float = 0.0
) -> str:
    """How a curve (a score logged at evenly spaced steps) changes: "sudden", "gradual" or "flat".

    "sudden" when some stretch of at most ``window`` of the run (at least two logged steps) holds at least
    ``jump_share`` of the total change from first to last value; "flat" when the total change is at most
    ``min_change``; otherwise "gradual". Judge each seed's curve on its own: one sudden seed does not make a
    phase change of the experiment.

    >>> change_words([0.0, 0.0, 0.01, 0.02, 0.9, 0.95, 0.96, 0.97, 0.97, 0.98, 0.98])
    'sudden'
    >>> change_words([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    'gradual'
    """
    ys = [float(v) for v in values]
    if len(ys) < 3 or any(math.isnan(v) for v in ys):
        raise ValueError("a curve needs at least three logged values, none NaN")
    total = ys[-1] - ys[0]
    if abs(total) <= min_change:
        return "flat"
    span = max(1, round(window * (len(ys) - 1)))
    biggest = max((ys[i + span] - ys[i]) / total for i in range(len(ys) - span))
    return "sudden" if biggest >= jump_share else "gradual"


# Student's t, 97.5 % quantile, for n - 1 degrees of freedom (n = 2 ... 31): a 95 % interval over a few seeds.
_T975 = (
    12.71,
    4.30,
    3.18,
    2.78,
    2.57,
    2.45,
    2.36,
    2.31,
    2.26,
    2.23,
    2.20,
    2.18,
    2.16,
    2.14,
    2.13,
    2.12,
    2.11,
    2.10,
    2.09,
    2.09,
    2.08,
    2.07,
    2.07,
    2.06,
    2.06,
    2.06,
    2.05,
    2.05,
    2.05,
    2.04,
)


def seed_interval(values: Sequence[float], lowest: float = -1.0, highest: float = 1.0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of one value per seed and its 95 % t-interval, kept within [``lowest``,
    ``highest``] (a difference of accuracies lies in [-1, 1]). Few seeds give a wide interval, as they should
    (chapters 1 and 3 compare configurations seed by seed with it).

    >>> [round(x, 3) for x in seed_interval([0.9, 1.0, 0.8])]
    [0.9, 0.652, 1.0]
    """
    v = [float(x) for x in values]
    if len(v) < 2 or any(math.isnan(x) for x in v):
        raise ValueError(f"an interval over seeds needs at least two numbers, got {values!r}")
    mean = sum(v) / len(v)
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1))
    t = _T975[len(v) - 2] if len(v) - 2 < len(_T975) else 1.96
    half = t * sd / math.sqrt(len(v))
    return mean, max(lowest, mean - half), min(highest, mean + half)
