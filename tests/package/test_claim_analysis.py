"""manyheads.analysis.claims: each comparing word appears exactly when the interval supports it, and the word turns
when the interval crosses its threshold (the boundary cases are the ones a wrong comparison gets wrong)."""

from __future__ import annotations

import doctest

import pytest

from manyheads.analysis import claims
from manyheads.analysis.claims import change_words, compare_words, ratio_words, share_interval, share_words


def test_the_docstring_examples_hold():
    assert doctest.testmod(claims).failed == 0


@pytest.mark.parametrize(
    ("estimate", "low", "high", "word"),
    [
        (0.012, 0.001, 0.02, "helps"),
        (0.012, -0.001, 0.02, "makes no measurable difference"),  # the interval contains 0
        (0.0, 0.0, 0.0, "makes no measurable difference"),  # touching 0 is not excluding it
        (-0.03, -0.05, -0.01, "hurts"),
        (-0.03, -0.05, 0.0, "makes no measurable difference"),
    ],
)
def test_compare_words_needs_the_whole_interval_on_one_side(estimate, low, high, word):
    assert compare_words(estimate, low, high) == word


def test_compare_words_for_a_loss_and_for_timings():
    assert compare_words(0.2, 0.1, 0.3, higher_is_better=False) == "hurts"  # the loss went up
    assert compare_words(1.5, 1.2, 1.8, null=1.0, better="faster", worse="slower", neutral="inconclusive here") == (
        "faster"
    )
    assert compare_words(1.1, 0.7, 1.6, null=1.0, neutral="inconclusive here") == "inconclusive here"


def test_compare_words_refuses_a_reversed_or_missing_interval():
    with pytest.raises(ValueError, match="low end"):
        compare_words(0.1, 0.3, 0.2)
    with pytest.raises(ValueError, match="numbers"):
        compare_words(float("nan"), 0.0, 1.0)


@pytest.mark.parametrize(
    ("share", "low", "high", "word"),
    [
        (0.89, 0.80, 0.95, "most"),
        (0.95, 0.90, 0.99, "nearly all"),
        (0.62, 0.41, 0.80, "about half"),  # "most" would claim more than the interval shows
        (0.45, None, None, "a minority"),
        (0.5, None, None, "about half"),
        (0.51, None, None, "most"),
        (1.0, None, None, "all"),
        (0.0, None, None, "none"),
        (0.2, 0.1, 0.49, "a minority"),
    ],
)
def test_share_words(share, low, high, word):
    assert share_words(share, low, high) == word


def test_share_words_refuses_shares_outside_0_1():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        share_words(1.2)


def test_share_interval_is_wilson_and_stays_in_0_1():
    p, low, high = share_interval(22, 288)
    assert p == pytest.approx(22 / 288)
    assert low == pytest.approx(0.0510, abs=1e-3) and high == pytest.approx(0.1128, abs=1e-3)
    assert share_interval(0, 10)[1] == 0.0 and share_interval(10, 10)[2] == 1.0
    # 7 of 10 is "most" by the point estimate, not by the interval
    assert share_words(*share_interval(7, 10)) == "about half"
    assert share_words(*share_interval(70, 100)) == "most"


def test_ratio_words():
    assert ratio_words(9.0, 8.0, 10.0) == "much larger"
    assert ratio_words(1.44, 1.3, 1.6) == "larger"
    assert ratio_words(1.1, 0.8, 1.5) == "about the same"
    assert ratio_words(0.7, 0.6, 0.8) == "smaller"
    assert ratio_words(0.3, 0.2, 0.45) == "much smaller"


def test_change_words_per_curve():
    step = [0.0] * 5 + [0.9] + [1.0] * 5
    ramp = [i / 10 for i in range(11)]
    assert change_words(step) == "sudden"
    assert change_words(ramp) == "gradual"
    assert change_words([0.5, 0.51, 0.49, 0.5], min_change=0.05) == "flat"
    assert change_words([1.0 - v for v in step]) == "sudden"  # a sudden drop is sudden too
    with pytest.raises(ValueError, match="three"):
        change_words([0.0, 1.0])


def test_seed_interval_is_the_t_interval_over_seeds_clipped_to_the_range():
    import math

    import numpy as np

    from manyheads.analysis.claims import seed_interval

    values = [0.9, 1.0, 0.8]
    mean, low, high = seed_interval(values)
    half = 4.30 * np.std(values, ddof=1) / math.sqrt(3)  # t(0.975, 2 d.o.f.) = 4.30
    assert mean == pytest.approx(0.9) and low == pytest.approx(0.9 - half) and high == 1.0  # clipped at 1
    assert seed_interval([0.2, 0.2]) == pytest.approx((0.2, 0.2, 0.2))  # no spread, no width
    wide, narrow = seed_interval([0.0, 0.4]), seed_interval([0.0, 0.4] * 5)
    assert wide[2] - wide[1] > narrow[2] - narrow[1]  # fewer seeds, wider interval
    with pytest.raises(ValueError, match="at least two"):
        seed_interval([0.5])
