"""Each head's own subspaces and matching geometry: per-head projections, QK circuits, principal angles (chapter 2).

A head ``h`` of :class:`manyheads.attention.MultiHeadAttention` reads its queries and keys through the columns
``[h·d_head, (h+1)·d_head)`` of the query and key projections. Written in the course's "``x @ W``" convention
(``W`` is (d_model, d_head), the transpose of ``nn.Linear.weight``'s rows for that head), the score of a query
token ``x_i`` against a key token ``x_j`` is

    s_h(x_i, x_j) = (x_i W_q^h + b_q^h) · (x_j W_k^h + b_k^h) / √d_head,

whose quadratic part is the bilinear form ``x_i M_h x_jᵀ / √d_head`` with the **QK circuit**
``M_h = W_q^h (W_k^h)ᵀ`` (d_model × d_model, rank ≤ d_head). The column spaces of ``W_q^h`` and ``W_k^h`` are the
head's query and key subspaces; :func:`principal_angles` compares two of them.

Shapes follow the course vocabulary: d_model, n_heads, d_head.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from manyheads.attention import MultiHeadAttention

__all__ = [
    "head_weights",
    "head_biases",
    "qk_circuit",
    "qk_circuits",
    "bilinear_score",
    "pair_scores",
    "principal_angles",
    "subspace_overlap",
    "random_subspace_angles",
    "numerical_rank",
    "effective_rank",
    "project_onto_plane",
    "plane_basis",
]


def head_weights(mha: MultiHeadAttention, which: str = "q") -> Tensor:
    """Per-head projection matrices in the ``x @ W`` convention: (n_heads, d_model, d_head) (d_value for "v").

    which: "q", "k" or "v". Column block ``[h·d_head, (h+1)·d_head)`` of the full projection belongs to head h,
    which is how :func:`manyheads.attention.split_heads` slices the projected features.
    """
    linear = {"q": mha.W_q, "k": mha.W_k, "v": mha.W_v}[which]
    width = mha.d_value if which == "v" else mha.d_head
    w = linear.weight.detach().T  # (d_model, n_heads·width): x @ w == linear(x) - bias
    return w.reshape(mha.d_model, mha.n_heads, width).permute(1, 0, 2)


def head_biases(mha: MultiHeadAttention, which: str = "q") -> Tensor:
    """Per-head biases (n_heads, d_head) of the query ("q"), key ("k") or value ("v") projection (zeros if none)."""
    linear = {"q": mha.W_q, "k": mha.W_k, "v": mha.W_v}[which]
    width = mha.d_value if which == "v" else mha.d_head
    if linear.bias is None:
        return torch.zeros(mha.n_heads, width, dtype=linear.weight.dtype, device=linear.weight.device)
    return linear.bias.detach().reshape(mha.n_heads, width)


def qk_circuit(w_q: Tensor, w_k: Tensor) -> Tensor:
    """The bilinear form of one head, ``w_q @ w_kᵀ``: (d_model, d_head) × (d_model, d_head) → (d_model, d_model).

    ``x_i @ M @ x_j`` is the (unscaled, bias-free) score of query token x_i against key token x_j. Its rank is at
    most d_head. M is not symmetric in general: the score of (i, j) differs from that of (j, i).
    """
    if w_q.shape != w_k.shape:
        raise ValueError(
            f"w_q and w_k need the same shape (d_model, d_head), got {tuple(w_q.shape)} and {tuple(w_k.shape)}"
        )
    return w_q @ w_k.transpose(-2, -1)


def qk_circuits(mha: MultiHeadAttention) -> Tensor:
    """Every head's QK circuit ``W_q^h (W_k^h)ᵀ``: (n_heads, d_model, d_model)."""
    return qk_circuit(head_weights(mha, "q"), head_weights(mha, "k"))


def bilinear_score(mha: MultiHeadAttention, x_query: Tensor, x_key: Tensor) -> Tensor:
    """What each head scores a (query, key) pair of token vectors, before the softmax: (..., n_heads).

    x_query, x_key: (..., d_model), broadcastable. Includes the biases and the 1/√d_head scaling, so the result
    equals the scores inside ``mha.forward``; set the biases to zero and it is ``x_q M_h x_kᵀ / √d_head``.
    """
    q = torch.einsum("...d,hde->...he", x_query, head_weights(mha, "q")) + head_biases(mha, "q")
    k = torch.einsum("...d,hde->...he", x_key, head_weights(mha, "k")) + head_biases(mha, "k")
    return (q * k).sum(-1) / math.sqrt(mha.d_head)


def pair_scores(mha: MultiHeadAttention, x: Tensor) -> Tensor:
    """All pairwise pre-softmax scores of a sequence, per head: x (seq, d_model) → (n_heads, seq_q, seq_k)."""
    return bilinear_score(mha, x[:, None, :], x[None, :, :]).permute(2, 0, 1)


def _orthonormal_basis(a: Tensor, rtol: float = 1e-10) -> Tensor:
    """Orthonormal basis (d, r) of the column space of a (d, p), dropping directions below rtol·σ_max."""
    u, s, _ = torch.linalg.svd(a.double(), full_matrices=False)
    if s.numel() == 0 or float(s[0]) == 0.0:
        return u[:, :0]
    return u[:, s > rtol * s[0]]


def principal_angles(a: Tensor, b: Tensor) -> Tensor:
    """Principal angles (radians, ascending, float64) between the column spaces of a (d, p) and b (d, q).

    There are min(rank a, rank b) of them. 0 means a direction the two subspaces share; π/2 means none of the
    second space lies along that direction of the first. Computed as arccos of the singular values of QaᵀQb, where
    Qa, Qb are orthonormal bases (Björck and Golub); the columns need not be orthonormal or independent.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(
            f"a and b must be (d, p) and (d, q) with the same d, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    qa, qb = _orthonormal_basis(a), _orthonormal_basis(b)
    cosines = torch.linalg.svdvals(qa.T @ qb).clamp(0.0, 1.0)
    return torch.arccos(cosines).sort().values


def subspace_overlap(a: Tensor, b: Tensor) -> float:
    """Mean squared cosine of the principal angles between col(a) and col(b): 1 = same subspace, 0 = orthogonal."""
    return float(torch.cos(principal_angles(a, b)).pow(2).mean())


def random_subspace_angles(d: int, p: int, q: int | None = None, samples: int = 200, seed: int = 0) -> Tensor:
    """Principal angles between random p- and q-dimensional subspaces of ℝ^d: (samples, min(p, q)), a baseline."""
    q = p if q is None else q
    gen = torch.Generator().manual_seed(seed)
    return torch.stack(
        [
            principal_angles(
                torch.randn(d, p, generator=gen, dtype=torch.float64),
                torch.randn(d, q, generator=gen, dtype=torch.float64),
            )
            for _ in range(samples)
        ]
    )


def numerical_rank(m: Tensor, rtol: float = 1e-6) -> int:
    """Number of singular values of the (…, r, c) matrix m above rtol × the largest one (0 for a zero matrix)."""
    s = torch.linalg.svdvals(m.detach().double())
    if float(s.max()) == 0.0:
        return 0
    return int((s > rtol * s.max()).sum())


def effective_rank(m: Tensor, energy: float = 0.9) -> int:
    """How many singular directions hold ``energy`` of the squared Frobenius norm of m (e.g. 0.9 = 90 %)."""
    if not 0.0 < energy <= 1.0:
        raise ValueError(f"energy must be in (0, 1], got {energy}")
    s2 = torch.linalg.svdvals(m.detach().double()).pow(2)
    if float(s2.sum()) == 0.0:
        return 0
    cumulative = s2.cumsum(0) / s2.sum()
    return int((cumulative < energy - 1e-12).sum()) + 1


# ------------------------------------------------------------------------------------------------------------------
# The 3-D toy: a head whose d_head = 2 projects the embeddings onto a plane and compares them there.


def plane_basis(azimuth: float, elevation: float) -> Tensor:
    """An orthonormal basis (3, 2) of the plane whose unit normal has the given angles (degrees).

    Each basis vector is signed so that its largest component is positive: with the chapter-2 toy's axes
    (species, number, part of speech), the plane at azimuth 90°, elevation 0° has directions +species and
    +part of speech, so *cat* (species +1) is drawn on the right."""
    az, el = math.radians(azimuth), math.radians(elevation)
    normal = torch.tensor([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)], dtype=torch.float64)
    helper = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    if abs(float(normal @ helper)) > 0.99:
        helper = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    u = torch.linalg.cross(helper, normal)
    u = u / u.norm()
    v = torch.linalg.cross(normal, u)
    basis = torch.stack([u, v], dim=1)
    largest = basis.gather(0, basis.abs().argmax(dim=0, keepdim=True))  # (1, 2): each column's largest entry
    return basis * torch.where(largest < 0, -1.0, 1.0).to(basis.dtype)


def project_onto_plane(x: Tensor, basis: Tensor) -> Tensor:
    """Coordinates of points x (n, 3) in a plane with orthonormal basis (3, 2): (n, 2)."""
    return x.double() @ basis.double()
