"""The hand-written cases of exercise 04_specialization:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug

KNOWN["04_specialization"] = {
    "right": {
        "alternatives": {
            "mean_attention_entropy": """
def mean_attention_entropy(weights):
    terms = torch.where(weights > 0, weights * torch.log(weights.clamp_min(1e-300)), torch.zeros_like(weights))
    return -terms.sum(-1).sum(-1) / weights.shape[-2]
""",
            "offset_attention": """
def offset_attention(weights, offset):
    seq_q, seq_k = weights.shape[-2:]
    valid = [i for i in range(seq_q) if 0 <= i + offset < seq_k]
    return sum(weights[..., i, i + offset] for i in valid) / len(valid)
""",
            "relation_accuracy": """
def relation_accuracy(weights, arcs):
    n_layers, n_heads, seq, _ = weights.shape
    out = torch.zeros(n_layers, n_heads)
    for l in range(n_layers):
        for h in range(n_heads):
            hits = 0
            for d, g in arcs:
                row = weights[l, h, d].clone()
                row[d] = -1.0
                hits += int(row.argmax()) == g
            out[l, h] = hits / len(arcs)
    return out
""",
        }
    },
    "bugs": {
        "entropy summed over the queries": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1).sum(dim=-1)
""",
            check="summed over the query rows",
            hidden="entropy [0-9.]+, expected [0-9.]+",
        ),
        "entropy with 0 log 0 = nan": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -(weights * weights.log()).sum(dim=-1).mean(dim=-1)
""",
            check="NaN for weights containing zeros",
            hidden="entropy nan, expected",
        ),
        "offset counting off-edge queries as zeros": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1).sum(dim=-1) / weights.shape[-2]
""",
            check="average only over queries i with 0 ≤ i \\+ offset < seq_k",
            hidden=r"offset -1 on shape \(2, 3, 6, 9\): got",
        ),
        "offset with the wrong sign": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=-offset, dim1=-2, dim2=-1).mean(dim=-1)
""",
            check="offset −1 means the previous token",
            hidden=r"offset -1 on shape \(2, 3, 6, 9\): got",
        ),
        "relation keeps the word itself": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (weights.argmax(dim=-1)[..., d] == h).float().mean(dim=-1)
""",
            check="exclude the dependent itself",
            hidden="accuracy [0-9.]+, expected [0-9.]+",
        ),
        "relation counts instead of fractions": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    pred = weights.masked_fill(eye, float("-inf")).argmax(dim=-1)
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).float().sum(dim=-1)
""",
            check=r"expected \[\[1.0, 0.0\]\]",
            hidden="accuracy [0-9.]+, expected [0-9.]+",
        ),
    },
    "mixed": {},
    "written_prompts": {"hand_set_heads": "offset baseline of Part 4"},
}
