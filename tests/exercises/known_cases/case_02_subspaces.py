"""The hand-written cases of exercise 02_subspaces:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _scores(scale="math.sqrt(d_head)", reshape="ok", swap=False):
    split = (
        "(x @ {w}).reshape(batch, seq, n_heads, d_head).transpose(1, 2)"
        if reshape == "ok"
        else "(x @ {w}).reshape(batch, n_heads, seq, d_head)"
    )
    first, second = ("k", "q") if swap else ("q", "k")
    return f"""
def head_scores(x, w_q, w_k, n_heads):
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    q = {split.format(w="w_q")}
    k = {split.format(w="w_k")}
    return {first} @ {second}.transpose(-2, -1) / {scale}
"""


def _angles(orthonormalise=True, post="torch.arccos(cosines)"):
    prep = (
        "qa, qb = torch.linalg.qr(a)[0], torch.linalg.qr(b)[0]"
        if orthonormalise
        else "qa, qb = a / a.norm(dim=0), b / b.norm(dim=0)"
    )
    return f"""
def principal_angles(a, b):
    {prep}
    cosines = torch.linalg.svdvals(qa.T @ qb).clamp(-1.0, 1.0)
    return {post}
"""


_HIDDEN_QK = "qk_circuits for d_model=12, n_heads=3 differs from the reference"
_HIDDEN_SCORES = "head_scores for x \\(3, 4, 12\\), n_heads=3 differs from the reference"

KNOWN["02_subspaces"] = {
    "right": {
        "loops": {
            "qk_circuits": """
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    return torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_k[:, h * d_head:(h + 1) * d_head].T
                        for h in range(n_heads)])
""",
            "head_scores": """
def head_scores(x, w_q, w_k, n_heads):
    d_head = x.shape[-1] // n_heads
    circuits = qk_circuits(w_q, w_k, n_heads)
    return torch.einsum("bid,hde,bje->bhij", x, circuits, x) / d_head ** 0.5
""",
            "principal_angles": """
import numpy as np

def principal_angles(a, b):
    qa, _ = np.linalg.qr(a.detach().double().numpy())
    qb, _ = np.linalg.qr(b.detach().double().numpy())
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return torch.from_numpy(np.sort(np.arccos(np.clip(s, -1, 1))))
""",
        },
        "einsum": {
            "qk_circuits": """
def qk_circuits(w_q, w_k, n_heads):
    q = torch.stack(torch.chunk(w_q, n_heads, dim=1))
    k = torch.stack(torch.chunk(w_k, n_heads, dim=1))
    return torch.einsum("hde,hfe->hdf", q, k)
""",
            "head_scores": """
def head_scores(x, w_q, w_k, n_heads):
    b, s, d = x.shape
    q = (x @ w_q).view(b, s, n_heads, d // n_heads)
    k = (x @ w_k).view(b, s, n_heads, d // n_heads)
    return torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d // n_heads)
""",
            "principal_angles": """
def principal_angles(a, b):
    ua = torch.linalg.svd(a, full_matrices=False)[0]
    ub = torch.linalg.svd(b, full_matrices=False)[0]
    cos = torch.linalg.svd(ua.T @ ub)[1]
    return torch.acos(torch.clamp(cos, max=1.0)).sort().values
""",
        },
    },
    "bugs": {
        "circuits from the rows": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[0] // n_heads
    return torch.stack([w_q[h * d_head:(h + 1) * d_head].T @ w_k[h * d_head:(h + 1) * d_head]
                        for h in range(n_heads)])
""",
            check="columns",
            hidden=_HIDDEN_QK,
        ),
        "circuits transposed": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    return torch.stack([w_k[:, h * d_head:(h + 1) * d_head] @ w_q[:, h * d_head:(h + 1) * d_head].T
                        for h in range(n_heads)])
""",
            check="transposed",
            hidden=_HIDDEN_QK,
        ),
        "circuits not split": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    return (w_q @ w_k.T).expand(n_heads, -1, -1)
""",
            check="full w_q @ w_k",
            hidden=_HIDDEN_QK,
        ),
        "circuits from a bad reshape": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_model = w_q.shape[0]
    q = w_q.reshape(n_heads, d_model, d_model // n_heads)
    k = w_k.reshape(n_heads, d_model, d_model // n_heads)
    return q @ k.transpose(-2, -1)
""",
            check="differs from",
            hidden=_HIDDEN_QK,
        ),
        "scores unscaled": Bug("head_scores", _scores(scale="1"), check="not scaled", hidden=_HIDDEN_SCORES),
        "scores scaled by sqrt(d_model)": Bug(
            "head_scores", _scores(scale="math.sqrt(d_model)"), check="√d_model", hidden=_HIDDEN_SCORES
        ),
        "queries and keys swapped": Bug("head_scores", _scores(swap=True), check="swapped", hidden=_HIDDEN_SCORES),
        "heads split without transpose": Bug(
            "head_scores", _scores(reshape="bad"), check="transpose", hidden=_HIDDEN_SCORES
        ),
        "angles without orthonormal bases": Bug(
            "principal_angles",
            _angles(orthonormalise=False),
            check="orthonormalise",
            hidden="subspaces of R\\^7 .*: got",
        ),
        "angles in degrees": Bug(
            "principal_angles",
            _angles(post="torch.rad2deg(torch.arccos(cosines))"),
            check="degrees",
            hidden="subspaces of R\\^7 .*: got",
        ),
        "cosines instead of angles": Bug(
            "principal_angles", _angles(post="cosines"), check="cosines", hidden="subspaces of R\\^7 .*: got"
        ),
        "angles descending": Bug(
            "principal_angles",
            _angles(post="torch.arccos(cosines).flip(0)"),
            check="ascending",
            hidden="subspaces of R\\^7 .*: got",
        ),
    },
    "mixed": {},
}
