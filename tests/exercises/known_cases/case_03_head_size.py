"""The hand-written cases of exercise 03_head_size:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _mha(
    split="x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)",
    scale="math.sqrt(d // n_heads)",
    dim=-1,
    project="merged @ w_o",
):
    return f"""
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, s, d = x.shape
    def split(x):
        return {split}
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / {scale}
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim={dim})
    merged = (weights @ v).transpose(1, 2).reshape(b, s, d)
    return {project}, weights
"""


_HIDDEN_MHA = "weights for x \\(2, 5, 12\\), 3 heads, mask None differs from the reference"

KNOWN["03_head_size"] = {
    "right": {
        "alternatives": {
            "head_dim": """
def head_dim(d_model, n_heads):
    if type(d_model) is not int or type(n_heads) is not int or min(d_model, n_heads) < 1:  # bool is not an int here
        raise ValueError("both must be positive integers")
    d_head, rest = divmod(d_model, n_heads)
    if rest:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    return d_head
""",
            "split_heads": """
def split_heads(x, n_heads):
    return torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)
""",
            "merge_heads": """
def merge_heads(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)
""",
            "mha_param_count": """
def mha_param_count(d_model, n_heads, bias=True):
    d_head = d_model / n_heads
    return 4.0 * n_heads * d_head * d_model + (4 * d_model if bias else 0)
""",
            "multi_head_attention": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, s, d = x.shape
    dh = d // n_heads
    q = torch.einsum("bsd,de->bse", x, w_q).view(b, s, n_heads, dh)
    k = torch.einsum("bsd,de->bse", x, w_k).view(b, s, n_heads, dh)
    v = torch.einsum("bsd,de->bse", x, w_v).view(b, s, n_heads, dh)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) * dh ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    weights = scores.softmax(dim=-1)
    heads = torch.einsum("bhqk,bkhe->bqhe", weights, v).reshape(b, s, d)
    return heads @ w_o, weights
""",
        },
        # A loop over heads, written without the student's split_heads and merge_heads.
        "loop": {
            "multi_head_attention": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    d_head = x.shape[-1] // n_heads
    outputs, patterns = [], []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        if mask is not None:
            m = torch.broadcast_to(mask, (x.shape[0], n_heads, x.shape[1], x.shape[1]))[:, i]
            scores = torch.where(m, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        w = torch.softmax(scores, dim=-1)
        patterns.append(w)
        outputs.append(w @ v)
    return torch.cat(outputs, dim=-1) @ w_o, torch.stack(patterns, dim=1)
"""
        },
    },
    "bugs": {
        # The solution's multi_head_attention calls the student's split_heads and merge_heads: their bugs cost it too.
        "split without transpose": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    b, s, d = x.shape
    return x.reshape(b, n_heads, s, d // n_heads)
""",
            check="mixes positions between heads",
            hidden="wrong features in the heads",
            also_fails=("multi_head_attention",),
        ),
        "split the sequence axis": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    return torch.stack(torch.chunk(x, n_heads, dim=1), dim=1)
""",
            check="splits the positions",
            hidden="stack expects each tensor to be equal size",  # 7 positions do not split into 4
            hidden_error=RuntimeError,
            also_fails=("multi_head_attention",),
        ),
        "merge without transpose": Bug(
            "merge_heads",
            """
def merge_heads(x):
    b, h, s, d = x.shape
    return x.reshape(b, s, h * d)
""",
            check="move the head axis",
            hidden="wrong order of features",
            also_fails=("multi_head_attention",),
        ),
        "no divisibility check": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    return d_model // n_heads
""",
            check="should raise ValueError",
            hidden=r"head_dim\(12, 5\) returned 2, expected a ValueError",
        ),
        "only the divisibility check": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    if d_model % n_heads:
        raise ValueError("does not divide")
    return d_model // n_heads
""",
            check="d_model = 0 is not positive",
            hidden=r"head_dim\(0, 4\) returned 0, expected a ValueError",
        ),
        "parameters without W_o": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)
""",
            check="output projection W_o",
            hidden=r"mha_param_count\(768, 12, bias=True\) = 1771776, expected 2362368",
        ),
        "parameters of full-width heads": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    return n_heads * 4 * d_model * d_model + (4 * d_model if bias else 0)
""",
            check=r"mha_param_count\(512, 8\) returned \d+, expected \d+",
            hidden=r"mha_param_count\(768, 12, bias=True\) = \d+, expected",
        ),
        "attention heads split without transpose": Bug(
            "multi_head_attention",
            _mha(split="x.reshape(b, n_heads, s, d // n_heads)"),
            check="how the heads are split",
            hidden=_HIDDEN_MHA,
        ),
        "attention without 1/sqrt(d_head)": Bug(
            "multi_head_attention", _mha(scale="1"), check="divide by √d_head", hidden=_HIDDEN_MHA
        ),
        "attention scaled by sqrt(d_model)": Bug(
            "multi_head_attention", _mha(scale="math.sqrt(d)"), check="√d_model", hidden=_HIDDEN_MHA
        ),
        "attention softmax over the queries": Bug(
            "multi_head_attention", _mha(dim=-2), check="softmax over the keys", hidden=_HIDDEN_MHA
        ),
        "attention without w_o": Bug(
            "multi_head_attention",
            _mha(project="merged"),
            check="apply the output projection w_o",
            hidden="output for x \\(2, 5, 12\\), 3 heads, mask None differs from the reference",
        ),
    },
    "mixed": {
        # A correct part 5 written without the helpers keeps its points when a helper is wrong.
        "wrong split, attention as a loop": ("loop", "split without transpose")
    },
    # Exercise-specific text the notebook must keep: {grade_id of a written answer: what its prompt cell mentions, a
    # string or a tuple of strings}.
    "written_prompts": {"more_heads_cost": "1024"},  # the design card's d_k example
}
