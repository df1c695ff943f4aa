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


def _angles(orthonormalise=True, post="torch.arccos(cosines)", dtype="a, b = a.double(), b.double()", clamp=True):
    prep = (
        "qa, qb = torch.linalg.qr(a)[0], torch.linalg.qr(b)[0]"
        if orthonormalise
        else "qa, qb = a / a.norm(dim=0), b / b.norm(dim=0)"
    )
    cosines = "torch.linalg.svdvals(qa.T @ qb)" + (".clamp(-1.0, 1.0)" if clamp else "")
    return f"""
def principal_angles(a, b):
    {dtype}
    {prep}
    cosines = {cosines}
    return {post}
"""


_HIDDEN_QK = "qk_circuits for d_model=12, n_heads=3 differs from the reference"
_HIDDEN_SCORES = "head_scores for x \\(3, 4, 12\\), n_heads=3 differs from the reference"
_HIDDEN_ANGLES = "subspaces of R\\^7 .*: got"

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
    ua = torch.linalg.svd(a.to(torch.float64), full_matrices=False)[0]
    ub = torch.linalg.svd(b.to(torch.float64), full_matrices=False)[0]
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
        "circuits scaled by 1/sqrt(d_head)": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    q = w_q.reshape(-1, n_heads, d_head).permute(1, 0, 2)
    k = w_k.reshape(-1, n_heads, d_head).permute(1, 0, 2)
    return q @ k.transpose(-2, -1) / math.sqrt(d_head)  # the scale of the scores, copied from the formula
""",
            check="divided by √d_head: M_h = W_q\\^h \\(W_k\\^h\\)ᵀ has no scale",
            hidden=_HIDDEN_QK,
        ),
        # A buffer made with torch.zeros is float32 whatever the weights: float64 weights come back as float32.
        "circuits in a float32 buffer": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_model = w_q.shape[0]
    d_head = d_model // n_heads
    circuits = torch.zeros(n_heads, d_model, d_model)
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        circuits[h] = w_q[:, cols] @ w_k[:, cols].T
    return circuits
""",
            check="returned torch.float32 for float64 w_q and w_k .* expected torch.float64 \\(the dtype of its",
            hidden="qk_circuits for d_model=12, n_heads=4 returned torch.float32, expected torch.float64",
        ),
        # Right numbers, but the caller's w_q and w_k come back transposed.
        "circuits from weights transposed in place": Bug(
            "qk_circuits",
            """
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    w_q.t_()  # head h's columns become rows, easier to slice
    w_k.t_()
    return torch.stack([w_q[h * d_head:(h + 1) * d_head].T @ w_k[h * d_head:(h + 1) * d_head]
                        for h in range(n_heads)])
""",
            check="qk_circuits changed its input w_q in place .* inputs are not modified",
            hidden="qk_circuits for d_model=12, n_heads=3 changed w_q or w_k in place",
        ),
        "scores unscaled": Bug("head_scores", _scores(scale="1"), check="not scaled", hidden=_HIDDEN_SCORES),
        "scores scaled by sqrt(d_model)": Bug(
            "head_scores", _scores(scale="math.sqrt(d_model)"), check="√d_model", hidden=_HIDDEN_SCORES
        ),
        "queries and keys swapped": Bug("head_scores", _scores(swap=True), check="swapped", hidden=_HIDDEN_SCORES),
        "heads split without transpose": Bug(
            "head_scores", _scores(reshape="bad"), check="transpose", hidden=_HIDDEN_SCORES
        ),
        # Folding 1/sqrt(d_head) into the query projection gives the right scores, and changes the caller's w_q.
        "scale folded into w_q in place": Bug(
            "head_scores",
            """
def head_scores(x, w_q, w_k, n_heads):
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    w_q /= math.sqrt(d_head)
    q = (x @ w_q).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    return q @ k.transpose(-2, -1)
""",
            check="head_scores changed its input w_q in place .* inputs are not modified",
            hidden="head_scores for x \\(3, 4, 12\\), n_heads=3 changed x, w_q or w_k in place",
        ),
        # nn.Linear's convention (y = x @ W.T) carried over to matrices that are applied as x @ w.
        "projections transposed": Bug(
            "head_scores",
            _scores().replace("x @ w_q", "x @ w_q.T").replace("x @ w_k", "x @ w_k.T"),
            check="applied as x @ w_q.T",
            hidden=_HIDDEN_SCORES,
        ),
        # .float() to get past a dtype error: float64 inputs give float32 scores.
        "scores computed in float32": Bug(
            "head_scores",
            _scores().replace(
                "batch, seq, d_model = x.shape",
                "x, w_q, w_k = x.float(), w_q.float(), w_k.float()\n    batch, seq, d_model = x.shape",
            ),
            check="head_scores returned torch.float32 for float64 x \\(2, 5, 8\\).* expected torch.float64",
            hidden="head_scores for x \\(1, 7, 12\\), n_heads=4 returned torch.float32, expected torch.float64",
        ),
        "angles without orthonormal bases": Bug(
            "principal_angles", _angles(orthonormalise=False), check="orthonormalise", hidden=_HIDDEN_ANGLES
        ),
        "angles in degrees": Bug(
            "principal_angles",
            _angles(post="torch.rad2deg(torch.arccos(cosines))"),
            check="degrees",
            hidden=_HIDDEN_ANGLES,
        ),
        "cosines instead of angles": Bug(
            "principal_angles", _angles(post="cosines"), check="cosines", hidden=_HIDDEN_ANGLES
        ),
        "angles descending": Bug(
            "principal_angles", _angles(post="torch.arccos(cosines).flip(0)"), check="ascending", hidden=_HIDDEN_ANGLES
        ),
        # The natural answer without the spec's float64: float32 inputs give float32 angles, too coarse near 0.
        "angles in the inputs' float32": Bug(
            "principal_angles",
            _angles(dtype="pass"),
            check="returned torch.float32 for float32 a \\(4, 2\\) .* float64 whatever the inputs' dtype",
            hidden="the same in float32: returned torch.float32, expected float64",
        ),
        "angles computed in float32, converted at the end": Bug(
            "principal_angles",
            _angles(dtype="pass", post="torch.arccos(cosines).double()"),
            check="float32 a \\(5, 2\\) and b \\(5, 2\\) at angles 1e-4 .* not in float32 and converted at the end",
            hidden="float32 subspaces at angles 1e-4 and 0.5 rad: got",
        ),
        "cosines not clamped": Bug(
            "principal_angles",
            _angles(clamp=False),
            check="a \\(6, 3\\) subspace and itself in another basis expected .* got \\[nan.* clamp them",
            hidden="got \\[nan",
        ),
        "columns normalised in place": Bug(
            "principal_angles",
            _angles(
                dtype="a /= a.norm(dim=0)  # unit columns first\n    b /= b.norm(dim=0)\n"
                "    a, b = a.double(), b.double()"
            ),
            check="principal_angles changed its input a in place",
            hidden="principal_angles changed a \\(7, 3\\) or b \\(7, 3\\) in place",
        ),
        "the (values, indices) pair of a sort": Bug(
            "principal_angles",
            _angles(post="torch.sort(torch.arccos(cosines))"),
            check="the \\(values, indices\\) pair of a sort .* return its .values",
            hidden="should return a torch.Tensor, got sort",
        ),
    },
    "mixed": {},
}
