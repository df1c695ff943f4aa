"""manyheads.analysis.circuits: per-head weights, QK circuits and scores agree with the module; angles; ranks."""

from __future__ import annotations

import math

import pytest
import torch

from manyheads.analysis import circuits as sub
from manyheads.attention import MultiHeadAttention, split_heads


def _mha(d_model=12, n_heads=3, bias=True, seed=0):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, n_heads, bias=bias).double()


def test_head_weights_slice_the_projection_like_split_heads():
    mha = _mha()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    for which, linear in (("q", mha.W_q), ("k", mha.W_k), ("v", mha.W_v)):
        per_head = split_heads(linear(x), mha.n_heads)  # (batch, n_heads, seq, d_head)
        mine = torch.einsum("bsd,hde->bhse", x, sub.head_weights(mha, which)) + sub.head_biases(mha, which)[:, None]
        assert torch.allclose(mine, per_head, atol=1e-12)


def test_pair_scores_reproduce_the_module_s_attention_weights():
    mha = _mha()
    x = torch.randn(6, 12, dtype=torch.float64)
    _, weights = mha(x[None])
    assert torch.allclose(torch.softmax(sub.pair_scores(mha, x), dim=-1), weights[0], atol=1e-12)


def test_bilinear_score_without_bias_is_the_qk_circuit_form():
    mha = _mha(bias=False)
    xq, xk = torch.randn(12, dtype=torch.float64), torch.randn(12, dtype=torch.float64)
    circuits = sub.qk_circuits(mha)
    assert circuits.shape == (3, 12, 12)
    want = torch.stack([xq @ m @ xk for m in circuits]) / math.sqrt(mha.d_head)
    assert torch.allclose(sub.bilinear_score(mha, xq, xk), want, atol=1e-12)
    # Not symmetric: swapping query and key changes the score.
    assert not torch.allclose(sub.bilinear_score(mha, xk, xq), want, atol=1e-6)


@pytest.mark.parametrize("d_model, n_heads", [(12, 1), (12, 3), (16, 8), (10, 10)])
def test_qk_circuit_rank_is_at_most_d_head(d_model, n_heads):
    mha = _mha(d_model, n_heads)
    for m in sub.qk_circuits(mha):
        assert sub.numerical_rank(m) == d_model // n_heads  # random weights: exactly d_head
    assert sub.numerical_rank(torch.zeros(4, 4)) == 0


def test_qk_circuit_checks_shapes():
    with pytest.raises(ValueError):
        sub.qk_circuit(torch.zeros(4, 2), torch.zeros(4, 3))


def test_principal_angles_of_identical_orthogonal_and_partly_shared_subspaces():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    mix = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    assert torch.allclose(
        sub.principal_angles(a, a @ mix), torch.zeros(3, dtype=torch.float64), atol=1e-6
    )  # same span, other basis
    e = torch.eye(6, dtype=torch.float64)
    assert torch.allclose(sub.principal_angles(e[:, :3], e[:, 3:]), torch.full((3,), math.pi / 2, dtype=torch.float64))
    # span{e0, e1} vs span{e1, cos t e0 + sin t e2}: angles 0 and t, ascending
    t = 0.3
    b = torch.stack([e[:, 1], math.cos(t) * e[:, 0] + math.sin(t) * e[:, 2]], dim=1)
    assert torch.allclose(sub.principal_angles(e[:, :2], b), torch.tensor([0.0, t], dtype=torch.float64), atol=1e-7)
    assert sub.subspace_overlap(e[:, :2], b) == pytest.approx((1 + math.cos(t) ** 2) / 2)


def test_principal_angles_do_not_need_orthonormal_or_independent_columns():
    e = torch.eye(4, dtype=torch.float64)
    a = torch.stack([e[:, 0] * 5.0, e[:, 0] + e[:, 1], 2 * e[:, 0] + 2 * e[:, 1]], dim=1)  # rank 2, not orthonormal
    angles = sub.principal_angles(a, e[:, 1:2] * 3.0)
    assert angles.shape == (1,) and float(angles[0]) == pytest.approx(0.0, abs=1e-7)
    assert sub.principal_angles(e[:, :2], e[:, :3]).shape == (2,)
    with pytest.raises(ValueError):
        sub.principal_angles(e[:, :2], torch.zeros(3, 2))


def test_random_subspaces_are_far_apart_in_high_dimension_and_overlap_in_low():
    high = sub.random_subspace_angles(64, 4, samples=30)
    low = sub.random_subspace_angles(6, 4, samples=30)
    assert high.shape == (30, 4)
    assert float(high.min()) > math.radians(30)
    # two 4-dim subspaces of R^6 must share at least 2 directions
    assert torch.allclose(low[:, :2], torch.zeros(30, 2, dtype=torch.float64), atol=1e-6)


def test_effective_rank():
    m = torch.diag(torch.tensor([10.0, 1.0, 0.1, 0.0], dtype=torch.float64))
    assert sub.effective_rank(m, 0.9) == 1
    assert sub.effective_rank(m, 0.99999) == 3
    assert sub.effective_rank(m, 1.0) == 3
    assert sub.effective_rank(torch.zeros(3, 3)) == 0
    with pytest.raises(ValueError):
        sub.effective_rank(m, 0.0)


@pytest.mark.parametrize("azimuth, elevation", [(0, 0), (45, 30), (120, -60), (0, 90), (10, -90)])
def test_plane_basis_is_orthonormal_and_orthogonal_to_its_normal(azimuth, elevation):
    basis = sub.plane_basis(azimuth, elevation)
    assert torch.allclose(basis.T @ basis, torch.eye(2, dtype=torch.float64), atol=1e-12)
    az, el = math.radians(azimuth), math.radians(elevation)
    normal = torch.tensor([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)], dtype=torch.float64)
    assert torch.allclose(normal @ basis, torch.zeros(2, dtype=torch.float64), atol=1e-12)
    points = torch.randn(5, 3, dtype=torch.float64)
    assert sub.project_onto_plane(points, basis).shape == (5, 2)


@pytest.mark.parametrize("azimuth, elevation", [(0, 0), (45, 30), (90, 0), (120, -60), (0, 90), (10, -90)])
def test_plane_basis_points_each_direction_along_its_largest_positive_axis(azimuth, elevation):
    basis = sub.plane_basis(azimuth, elevation)
    assert (basis.gather(0, basis.abs().argmax(dim=0, keepdim=True)) > 0).all()


def test_the_chapter_2_plane_has_species_and_part_of_speech_pointing_positive():
    # Chapter 2's widget starts at azimuth 90°, elevation 0° (normal = number): cat (species +1) is drawn on the right.
    assert torch.allclose(
        sub.plane_basis(90, 0).T, torch.tensor([[1.0, 0, 0], [0, 0, 1.0]], dtype=torch.float64), atol=1e-12
    )
