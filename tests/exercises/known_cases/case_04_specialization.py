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
    out = torch.zeros(n_layers, n_heads, dtype=weights.dtype)
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
        "entropy over the wrong axes": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-2).mean(dim=-1)
""",
            check=r"summed over axis -2 \(the queries\) and averaged over axis -1 \(the keys\)",
            hidden="entropy [0-9.]+, expected [0-9.]+",
        ),
        "entropy averaged over the keys": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).mean(dim=-1).mean(dim=-1)
""",
            check=r"averaged over both axis -2 \(the queries\) and axis -1 \(the keys\)",
            hidden="entropy [0-9.]+, expected [0-9.]+",
        ),
        "entropy with axes counted from the front": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=2).mean(dim=1)
""",
            check=r"averaged over axis -3 \(a leading axis\) and summed over axis -2 \(the queries\)",
            hidden=r"shape \(3, 9\), expected \(3, 5\)",
        ),
        "entropy in bits": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    return -(torch.special.xlogy(weights, weights) / math.log(2)).sum(dim=-1).mean(dim=-1)
""",
            check="that is in bits",
            hidden="entropy [0-9.]+, expected [0-9.]+",
        ),
        "entropy writes ones over the zeros in place": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    weights[weights == 0] = 1.0  # 1 ln 1 = 0, as 0 ln 0 should be
    return -(weights * weights.log()).sum(dim=-1).mean(dim=-1)
""",
            check="changed its input weights in place on one-hot weights",
            hidden="mean_attention_entropy changed its input weights in place",
        ),
        "entropy computed in float64": Bug(
            "mean_attention_entropy",
            """
def mean_attention_entropy(weights):
    w = weights.double()  # more precision
    return -torch.special.xlogy(w, w).sum(dim=-1).mean(dim=-1)
""",
            check=r"returned torch\.float64 for float32 weights .* expected torch\.float32",
            hidden=r"dtype torch\.float64, expected torch\.float32",
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
        "offset diagonal of the default axes": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=offset).mean(dim=-1)
""",
            check=r"the diagonal of axes 0 and 1, which torch's diagonal reads by default",
            hidden=r"offset -1: shape \(6, 9\), expected \(2, 3\)",
        ),
        "offset with axes counted from the front": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=offset, dim1=2, dim2=3).mean(dim=-1)
""",
            check=r"axes counted from the front \(2 and 3\) exist only for 4-D weights",
            hidden="Dimension out of range",
            hidden_error=IndexError,
        ),
        "offset masks the weights in place": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    seq_q, seq_k = weights.shape[-2:]
    on = torch.arange(seq_k)[None, :] - torch.arange(seq_q)[:, None] == offset  # the entries (i, i + offset)
    weights *= on
    return weights.sum(dim=(-2, -1)) / on.sum()
""",
            check="changed its input weights in place on offset -1",
            hidden="offset_attention changed its input weights in place",
        ),
        "offset summed in a float32 tensor": Bug(
            "offset_attention",
            """
def offset_attention(weights, offset):
    seq_q, seq_k = weights.shape[-2:]
    valid = [i for i in range(seq_q) if 0 <= i + offset < seq_k]
    total = torch.zeros(weights.shape[:-2])
    for i in valid:
        total += weights[..., i, i + offset]
    return total / len(valid)
""",
            check=r"returned torch\.float32 for offset -1, expected torch\.float64",
            hidden=r"dtype torch\.float32, expected torch\.float64",
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
        "relation accuracy in float32": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    pred = weights.masked_fill(eye, float("-inf")).argmax(dim=-1)
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).float().mean(dim=-1)
""",
            check=r"returned torch\.float32 for weights of shape \(1, 2, 3, 3\), expected torch\.float64",
            hidden=r"dtype torch\.float32, expected torch\.float64",
        ),
        "relation masks the diagonal in place": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    i = torch.arange(weights.shape[-1])
    weights[..., i, i] = float("-inf")  # the word itself never wins
    pred = weights.argmax(dim=-1)
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).to(weights.dtype).mean(dim=-1)
""",
            check="changed its input weights in place",
            hidden="relation_accuracy changed its input weights in place",
        ),
        "relation argmax over the attending words": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    pred = weights.masked_fill(eye, float("-inf")).argmax(dim=2)
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).to(weights.dtype).mean(dim=-1)
""",
            check=r"that is the argmax over axis -2",
            hidden="accuracy [0-9.]+, expected [0-9.]+",
        ),
        "relation reads the arcs as (head, dependent)": Bug(
            "relation_accuracy",
            """
def relation_accuracy(weights, arcs):
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    pred = weights.masked_fill(eye, float("-inf")).argmax(dim=-1)
    h = torch.tensor([a for a, _ in arcs]); d = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).to(weights.dtype).mean(dim=-1)
""",
            check="the arcs were read the wrong way round",
            hidden="accuracy [0-9.]+, expected [0-9.]+",
        ),
    },
    "mixed": {},
    "written_prompts": {"hand_set_heads": "offset baseline of Part 4"},
}
