"""The hand-written cases of exercise 06_layer_hierarchy:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _distance(body: str) -> str:
    """A mean_attention_distance with the |i − j| matrix ``gaps`` (and the signed ``signed``) ready, then ``body``."""
    return f"""
def mean_attention_distance(weights):
    positions = torch.arange(weights.shape[-1])
    signed = (positions[:, None] - positions[None, :]).to(weights.dtype)
    gaps = signed.abs()
{body}"""


def _induction(
    queries="torch.arange(half + 1, 2 * half + 1)",
    target="queries - half + 1",
    check="!= 2 * half + 1",
    reduce="w.mean(dim=(0, 2))",
) -> str:
    """An induction_score that raises ValueError when ``weights.shape[-1] {check}`` (no check: None)."""
    validate = (
        ""
        if check is None
        else f"    if weights.shape[-1] {check}:\n        raise ValueError('seq must be 2 * half + 1')\n"
    )
    return f"""
def induction_score(weights, half):
{validate}    queries = {queries}
    w = weights[..., queries, {target}]
    return {reduce}
"""


def _rollout(
    mix="0.5 * layer.mean(dim=1) + 0.5 * eye",
    step="mix @ rollout",
    start="eye.expand(weights.shape[1], seq, seq)",
    eye="torch.eye(seq, dtype=weights.dtype)",
    prelude="",
) -> str:
    return f"""
def attention_rollout(weights):
{prelude}    seq = weights.shape[-1]
    eye = {eye}
    rollout = {start}
    for layer in weights:
        mix = {mix}
        rollout = {step}
    return rollout
"""


_HIDDEN_DISTANCE = r"the distance of head \d+ is wrong"
_HIDDEN_INDUCTION = r"the score of head \d+ is wrong"
_HIDDEN_ROLLOUT = r"the rollout of item \d+ is wrong"

KNOWN["06_layer_hierarchy"] = {
    "right": {
        "loops": {
            "mean_attention_distance": """
def mean_attention_distance(weights):
    batch, n_heads, seq, _ = weights.shape
    total = torch.zeros(n_heads, dtype=torch.float64)
    for i in range(seq):
        for j in range(seq):
            total += weights[:, :, i, j].double().sum(dim=0) * abs(i - j)
    return (total / (batch * seq)).to(weights.dtype)  # summed in float64, returned in the weights' dtype
""",
            "induction_score": """
def induction_score(weights, half):
    if weights.shape[-1] != 2 * half + 1:
        raise ValueError(f"expected seq = 2 * half + 1 = {2 * half + 1}, got {weights.shape[-1]}")
    total = 0
    for i in range(half + 1, 2 * half + 1):
        total = total + weights[:, :, i, i - half + 1]
    return total.mean(dim=0) / half
""",
            "attention_rollout": """
def attention_rollout(weights):
    n_layers, batch, n_heads, seq, _ = weights.shape
    eye = torch.eye(seq, dtype=weights.dtype)
    per_item = []
    for b in range(batch):
        joint = None
        for l in range(n_layers):
            aug = weights[l, b].sum(dim=0) / n_heads + eye
            aug = aug / aug.sum(dim=-1, keepdim=True)  # Abnar & Zuidema's code: add I, then renormalise the rows
            joint = aug if joint is None else aug @ joint
        per_item.append(joint)
    return torch.stack(per_item)
""",
        },
        "vectorised": {
            "mean_attention_distance": """
def mean_attention_distance(weights):
    seq = weights.shape[-1]
    i, j = torch.arange(seq).unsqueeze(1), torch.arange(seq).unsqueeze(0)
    per_query = torch.einsum("bhij,ij->bhi", weights, (i - j).abs().to(weights.dtype))
    return per_query.mean(dim=2).mean(dim=0)
""",
            "induction_score": """
def induction_score(weights, half):
    if weights.size(-1) != 2 * half + 1 or weights.size(-2) != 2 * half + 1:
        raise ValueError("weights must be (batch, n_heads, 2 * half + 1, 2 * half + 1)")
    diagonal = torch.diagonal(weights, offset=1 - half, dim1=-2, dim2=-1)  # (i, i - half + 1) for i >= half - 1
    return diagonal[..., -half:].mean(dim=-1).mean(dim=0)
""",
            "attention_rollout": """
def attention_rollout(weights):
    seq = weights.shape[-1]
    mixes = 0.5 * weights.mean(dim=2) + 0.5 * torch.eye(seq, dtype=weights.dtype)  # (n_layers, batch, seq, seq)
    rollout = mixes[0]
    for mix in mixes[1:]:
        rollout = torch.bmm(mix, rollout)
    return rollout
""",
        },
    },
    "bugs": {
        "distance signed (i − j)": Bug(
            "mean_attention_distance",
            _distance("    return (weights * signed).sum(dim=-1).mean(dim=(0, 2))\n"),
            check="the distance is the absolute value",
            hidden=_HIDDEN_DISTANCE,
        ),
        "distance averaged over the keys": Bug(
            "mean_attention_distance",
            _distance("    return (weights * gaps).mean(dim=-1).mean(dim=(0, 2))\n"),
            check="you averaged over the keys",
            hidden=_HIDDEN_DISTANCE,
        ),
        "distance ignores the weights": Bug(
            "mean_attention_distance",
            _distance("    return gaps.mean().expand(weights.shape[1])\n"),
            check="does not depend on the weights",
            hidden=_HIDDEN_DISTANCE,
        ),
        "distance averaged over the heads too": Bug(
            "mean_attention_distance",
            _distance("    return (weights * gaps).sum(dim=-1).mean()\n"),
            check="returned a single number",
            hidden=r"shape \(\), expected \(5,\)",
        ),
        "distance per batch item, not per head": Bug(
            "mean_attention_distance",
            _distance("    return (weights * gaps).sum(dim=-1).mean(dim=(1, 2))\n"),
            check=r"returned shape \(2,\) = \(batch,\)",
            hidden=r"shape \(3,\), expected \(5,\)",
        ),
        "distance summed over the queries": Bug(
            "mean_attention_distance",
            _distance("    return (weights * gaps).sum(dim=-1).sum(dim=-1).mean(dim=0)\n"),
            check="you summed over the queries",
            hidden=_HIDDEN_DISTANCE,
        ),
        "distance squeezes a batch of one": Bug(
            "mean_attention_distance",
            _distance("    return (weights * gaps).sum(dim=-1).mean(dim=-1).squeeze().mean(dim=0)\n"),
            check=r"a batch of one, weights \(1, 4, 6, 6\)",
            hidden=r"shape \(\), expected \(4,\)",
        ),
        "distance in place": Bug(
            "mean_attention_distance",
            _distance("    weights *= gaps\n    return weights.sum(dim=-1).mean(dim=(0, 2))\n"),
            check="changed its input weights",
            hidden="the weights changed",
        ),
        "distance with float64 positions": Bug(
            "mean_attention_distance",
            """
def mean_attention_distance(weights):
    positions = torch.arange(weights.shape[-1], dtype=torch.float64)
    gaps = (positions[:, None] - positions[None, :]).abs()
    return (weights * gaps).sum(dim=-1).mean(dim=(0, 2))
""",
            check=r"returned torch.float64 for float32 weights \(2, 3, 6, 6\), expected torch.float32",
            hidden=r"dtype torch.float64, expected torch.float32",
        ),
        "induction target i − half": Bug(
            "induction_score",
            _induction(target="queries - half"),
            check=r"you read weights\[\.\.\., i, i − half\]",
            hidden=_HIDDEN_INDUCTION,
        ),
        "induction target i − half + 2": Bug(
            "induction_score",
            _induction(target="queries - half + 2"),
            check="the target column is i − half \\+ 2",
            hidden=_HIDDEN_INDUCTION,
        ),
        "induction queries from position half": Bug(
            "induction_score",
            _induction(queries="torch.arange(half, 2 * half)"),
            check="the queries start one too early",
            hidden=_HIDDEN_INDUCTION,
        ),
        "induction skips the second copy's first query": Bug(
            "induction_score",
            _induction(queries="torch.arange(half + 2, 2 * half + 1)"),
            check="you skipped the second copy's first query",
            hidden=_HIDDEN_INDUCTION,
        ),
        "induction queries one past the end": Bug(
            "induction_score",
            _induction(queries="torch.arange(half + 1, 2 * half + 2)"),
            check="raised IndexError on one-hot heads",
            hidden="out of bounds",
            hidden_error=IndexError,
        ),
        "induction without the ValueError": Bug(
            "induction_score",
            _induction(check=None),
            check=r"seq 7 with half 2 \(2·half \+ 1 = 5\), but should raise ValueError",
            hidden="raised IndexError for seq 6 with half 3, expected ValueError",
        ),
        "induction ValueError only for short weights": Bug(
            "induction_score",
            _induction(check="< 2 * half + 1"),
            check=r"seq 7 with half 2 \(2·half \+ 1 = 5\), but should raise ValueError",
            hidden="should raise ValueError for seq 8 with half 3",
        ),
        "induction averaged over the heads too": Bug(
            "induction_score",
            _induction(reduce="w.mean()"),
            check="returned a single number",
            hidden=r"shape \(\), expected \(4,\)",
        ),
        "induction of the first batch item": Bug(
            "induction_score",
            _induction(reduce="w[0].mean(dim=-1)"),
            check="the first batch item only",
            hidden=_HIDDEN_INDUCTION,
        ),
        "induction summed into float32 zeros": Bug(
            "induction_score",
            """
def induction_score(weights, half):
    if weights.shape[-1] != 2 * half + 1:
        raise ValueError("seq must be 2 * half + 1")
    total = torch.zeros(weights.shape[1])
    for i in range(half + 1, 2 * half + 1):
        total += weights[:, :, i, i - half + 1].mean(dim=0)
    return total / half
""",
            check=r"returned torch.float32 for a batch of one, weights \(1, 4, 9, 9\), half 4, expected torch.float64",
            hidden=r"dtype torch.float32, expected torch.float64",
        ),
        "induction keeps the targets with masked_fill_": Bug(
            "induction_score",
            """
def induction_score(weights, half):
    seq = weights.shape[-1]
    if seq != 2 * half + 1:
        raise ValueError("seq must be 2 * half + 1")
    queries = torch.arange(half + 1, seq)
    target = torch.zeros(seq, seq, dtype=torch.bool)
    target[queries, queries - half + 1] = True
    weights.masked_fill_(~target, 0.0)  # only the induction targets remain
    return weights.sum(dim=-1)[..., queries].mean(dim=(0, 2))
""",
            check="changed its input weights in place",
            hidden="the weights changed",
        ),
        "rollout in the wrong order": Bug(
            "attention_rollout",
            _rollout(step="rollout @ mix"),
            check="the product is in the wrong order",
            hidden=_HIDDEN_ROLLOUT,
        ),
        "rollout without the residual": Bug(
            "attention_rollout",
            _rollout(mix="layer.mean(dim=1)"),
            check="the residual connection is missing",
            hidden=_HIDDEN_ROLLOUT,
        ),
        "rollout adds I without halving": Bug(
            "attention_rollout",
            _rollout(mix="layer.mean(dim=1) + eye"),
            check="keep rows summing to 1",
            hidden=_HIDDEN_ROLLOUT,
        ),
        "rollout sums the heads": Bug(
            "attention_rollout",
            _rollout(mix="0.5 * layer.sum(dim=1) + 0.5 * eye"),
            check="average the heads, do not sum them",
            hidden=_HIDDEN_ROLLOUT,
        ),
        "rollout keeps the heads": Bug(
            "attention_rollout",
            _rollout(mix="0.5 * layer + 0.5 * eye", start="eye"),
            check="average each layer's weights over the heads",
            hidden=r"shape \(3, 2, 6, 6\), expected \(3, 6, 6\)",
        ),
        "rollout averages the batch": Bug(
            "attention_rollout",
            _rollout(mix="0.5 * layer.mean(dim=(0, 1)) + 0.5 * eye", start="eye"),
            check="keep the batch",
            hidden=r"shape \(6, 6\), expected \(3, 6, 6\)",
        ),
        "rollout of the last layer only": Bug(
            "attention_rollout", _rollout(step="mix"), check="that is A_\\{L−1\\} alone", hidden=_HIDDEN_ROLLOUT
        ),
        "rollout element by element": Bug(
            "attention_rollout",
            _rollout(step="mix * rollout", start="torch.ones(weights.shape[1], seq, seq, dtype=weights.dtype)"),
            check="multiplies element by element",
            hidden=_HIDDEN_ROLLOUT,
        ),
        "rollout with a float32 identity": Bug(
            "attention_rollout",
            _rollout(eye="torch.eye(seq)"),
            check=r"raised RuntimeError on weights \(n_layers 3",
            hidden="scalar type|dtype",
            hidden_error=RuntimeError,
        ),
        "rollout with a float64 identity": Bug(
            "attention_rollout",
            _rollout(eye="torch.eye(seq, dtype=torch.float64)"),
            check=r"returned torch.float64 for float32 weights \(3, 2, 2, 5, 5\), expected torch.float32",
            hidden=r"dtype torch.float64, expected torch.float32",
        ),
        "rollout halves the weights in place": Bug(
            "attention_rollout",
            _rollout(mix="layer.mean(dim=1) + 0.5 * eye", prelude="    weights *= 0.5\n"),
            check="changed its input weights",
            hidden="the weights changed",
        ),
    },
    "mixed": {
        "loops with the rollout in the wrong order": ("loops", "rollout in the wrong order"),
        "vectorised with the induction target i − half": ("vectorised", "induction target i − half"),
    },
    "written_prompts": {"one_layer_induction": "single layer"},
}
