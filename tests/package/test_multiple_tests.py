"""Multiple-comparison corrections of chapter 5 (manyheads.analysis.multiple_tests), against direct computations
and the textbook examples: Holm must never reject more than Benjamini-Hochberg, and both must reject nothing that
plain Bonferroni-style limits forbid."""

from __future__ import annotations

import math

import pytest
import torch

from manyheads.analysis import multiple_tests as M


def _holm_by_hand(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    reject = [False] * len(p)
    for k, i in enumerate(order):
        if p[i] > 0.05 / (len(p) - k):
            break
        reject[i] = True
    return reject


def _bh_by_hand(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    last = max((k for k, i in enumerate(order) if p[i] <= 0.05 * (k + 1) / len(p)), default=-1)
    rejected = set(order[: last + 1])
    return [i in rejected for i in range(len(p))]


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_match_the_procedures_written_out(seed):
    generator = torch.Generator().manual_seed(seed)
    p = torch.cat([torch.rand(20, generator=generator) * 1e-3, torch.rand(60, generator=generator)])
    p = p[torch.randperm(len(p), generator=generator)]
    holm, bh = M.holm(p), M.benjamini_hochberg(p)
    assert holm.tolist() == _holm_by_hand(p.tolist())
    assert bh.tolist() == _bh_by_hand(p.tolist())
    assert holm.any()  # the 20 small p-values are there to be found
    assert not bool((holm & ~bh).any())  # Holm is the stricter of the two
    assert M.holm(p.reshape(8, 10)).reshape(-1).tolist() == holm.tolist()  # any shape


def test_bh_rejects_the_k_smallest_for_the_largest_passing_k():
    p = torch.tensor([0.01, 0.04, 0.03, 0.2, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.2, 0.5 against 0.01, 0.02, 0.03, 0.04, 0.05: only k = 1 passes
    assert M.benjamini_hochberg(p).tolist() == [True, False, False, False, False]
    p = torch.tensor([0.01, 0.02, 0.03, 0.04, 0.05], dtype=torch.float64)  # every k passes
    assert M.benjamini_hochberg(p).all()
    assert M.holm(p).tolist() == [True, False, False, False, False]


def test_nothing_is_rejected_when_nothing_is_there():
    generator = torch.Generator().manual_seed(0)
    p = torch.rand(288, generator=generator)  # every null true
    assert int((p < 0.05).sum()) > 5  # uncorrected, chance finds some
    assert not M.holm(p).any() and not M.benjamini_hochberg(p).any()
    assert M.expected_false_positives(288) == pytest.approx(14.4)


def test_normal_p_values_and_the_simultaneous_interval():
    p = M.normal_p_values(torch.tensor([1.96, -1.96, 0.0, 0.3]), torch.tensor([1.0, 1.0, 1.0, 0.0]))
    assert p[:2].tolist() == pytest.approx([0.05, 0.05], abs=1e-3)
    assert p[2] == 1.0 and p[3] == 0.0  # exact (se 0) and different from 0
    low, high = M.simultaneous_interval(0.0, 1.0, 1)
    assert (low, high) == pytest.approx((-1.96, 1.96), abs=1e-3)
    low, high = M.simultaneous_interval(0.0, 1.0, 288)
    assert high == pytest.approx(3.755, abs=0.005)  # z(1 - 0.05/576)
    # the interval excludes 0 exactly when Bonferroni (Holm's first step) rejects
    for estimate in (3.7, 3.9):
        low, _ = M.simultaneous_interval(estimate, 1.0, 288)
        p_one = float(M.normal_p_values(torch.tensor([estimate]), torch.tensor([1.0]))[0])
        assert (low > 0) == (p_one <= 0.05 / 288)
    with pytest.raises(ValueError):
        M.holm(torch.tensor([0.5, math.nan]))
    with pytest.raises(ValueError):
        M.normal_p_values(torch.tensor([1.0]), torch.tensor([-1.0]))
