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
            # Every tensor's shape, then their sizes (the spec asks for an int, which math.prod of ints is).
            "mha_param_count": """
def mha_param_count(d_model, n_heads, bias=True):
    shapes = [(d_model, d_model)] * 4 + ([(d_model,)] * 4 if bias else [])
    return sum(math.prod(shape) for shape in shapes)
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
        # torch.zeros makes float32 whatever x is: float64 heads come back float32 (and multi_head_attention then
        # mixes float32 with its float64 weights).
        "split into a float32 buffer": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    heads = torch.zeros(batch, n_heads, seq, d_head)
    for i in range(n_heads):
        heads[:, i] = x[:, :, i * d_head:(i + 1) * d_head]
    return heads
""",
            check=r"split_heads returned torch.float32 for float64 x of shape \(2, 6, 12\).* expected torch.float64",
            hidden=r"split_heads returned torch.float32 for x \(2, 5, 10\) in torch.float64 and 5 heads",
            also_fails=("multi_head_attention",),
        ),
        "split with the axes read in the wrong order": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    batch, d_model, seq = x.shape
    return x.reshape(batch, seq, n_heads, d_model // n_heads).transpose(1, 2)
""",
            check="the sizes were read from the wrong axes",
            hidden=r"shape '\[3, 12, 4, 1\]' is invalid",  # the hidden x (3, 7, 12) has no such shape
            hidden_error=RuntimeError,
            also_fails=("multi_head_attention",),
        ),
        "heads joined with cat": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    return torch.cat(torch.chunk(x, n_heads, dim=-1), dim=1)
""",
            check=r"torch.cat joins the heads along an axis that exists already; torch.stack\(\.\.\., dim=1\)",
            hidden=r"shape \(3, 28, 3\) for x \(3, 7, 12\) and 4 heads",
            also_fails=("multi_head_attention",),
        ),
        "d_head with true division": Bug(
            "split_heads",
            """
def split_heads(x, n_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, seq, n_heads, d_model / n_heads).transpose(1, 2)
""",
            check=r"raised TypeError .* a size computed with /, which gives a float .* d_model // n_heads",
            hidden=r"tuple of ints.*float",  # torch words it differently across versions
            hidden_error=TypeError,
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
        "merge with view after the transpose": Bug(
            "merge_heads",
            """
def merge_heads(x):
    batch, n_heads, seq, d_head = x.shape
    return x.transpose(1, 2).view(batch, seq, n_heads * d_head)
""",
            check="view size is not compatible with input tensor's size and stride",
            hidden="view size is not compatible with input tensor's size and stride",
            hidden_error=RuntimeError,
            also_fails=("multi_head_attention",),
        ),
        "merge with the head axis last": Bug(
            "merge_heads",
            """
def merge_heads(x):
    batch, n_heads, seq, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, seq, n_heads * d_head)
""",
            check="the features come out interleaved",
            hidden=r"wrong order of features for input \(3, 4, 6, 2\)",
            also_fails=("multi_head_attention",),
        ),
        "heads joined along the sequence axis": Bug(
            "merge_heads",
            """
def merge_heads(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=1)
""",
            check="the heads were joined along the sequence axis",
            hidden=r"shape \(3, 24, 2\) for input \(3, 4, 6, 2\), expected \(3, 6, 8\)",
            also_fails=("multi_head_attention",),
        ),
        "merge into a float32 buffer": Bug(
            "merge_heads",
            """
def merge_heads(x):
    batch, n_heads, seq, d_head = x.shape
    merged = torch.zeros(batch, seq, n_heads * d_head)
    for i in range(n_heads):
        merged[:, :, i * d_head:(i + 1) * d_head] = x[:, i]
    return merged
""",
            check=r"merge_heads returned torch.float32 for float64 x of shape \(2, 3, 5, 4\)",
            hidden=r"merge_heads returned torch.float32 for input \(2, 3, 5, 4\) in torch.float64",
            also_fails=("multi_head_attention",),
        ),
        # The right numbers, but the caller's x comes back transposed (multi_head_attention, which merges a tensor
        # of its own, is not hurt).
        "merge with transpose_ (in place)": Bug(
            "merge_heads",
            """
def merge_heads(x):
    batch, n_heads, seq, d_head = x.shape
    x.transpose_(1, 2)
    return x.reshape(batch, seq, n_heads * d_head)
""",
            check=r"merge_heads changed its input x in place .* inputs are not modified",
            hidden=r"merge_heads changed x \(3, 4, 6, 2\) in place",
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
        "true division": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    for name, value in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if d_model % n_heads:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    return d_model / n_heads
""",
            check=r"head_dim\(1024, 16\) returned 64\.0, a float; .* use integer division",
            hidden=r"head_dim\(1024, 16\) returned 64\.0, a float",
        ),
        # isinstance(True, int) is True: a bool passes for the integer 1.
        "bool taken for an int": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    for name, value in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if d_model % n_heads:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    return d_model // n_heads
""",
            check=r"returned 64 on head_dim\(64, True\), but should raise ValueError: n_heads is a bool",
            hidden=r"head_dim\(True, 1\) returned 1, expected a ValueError",
        ),
        # The remainder before the sign: 8 % 0 raises ZeroDivisionError, not the ValueError the spec asks for.
        "divisibility tested before the sign": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    if d_model % n_heads:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    for name, value in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return d_model // n_heads
""",
            check=r"raised ZeroDivisionError on head_dim\(8, 0\), expected a ValueError",
            hidden=r"head_dim\(8, 0\) raised ZeroDivisionError, expected a ValueError",
        ),
        "assert instead of ValueError": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    assert type(d_model) is int and type(n_heads) is int, "sizes must be ints"
    assert d_model > 0 and n_heads > 0, "sizes must be positive"
    assert d_model % n_heads == 0, f"{n_heads} heads do not divide {d_model}"
    return d_model // n_heads
""",
            check=r"raised AssertionError on head_dim\(512, 3\), expected a ValueError",
            hidden=r"head_dim\(12, 5\) raised AssertionError, expected a ValueError",
        ),
        # Python's convention for a wrong type, where the spec asks for ValueError.
        "TypeError for a float": Bug(
            "head_dim",
            """
def head_dim(d_model, n_heads):
    for name, value in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if d_model % n_heads:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    return d_model // n_heads
""",
            check=r"raised TypeError on head_dim\(1024.0, 16\), expected a ValueError",
            hidden=r"head_dim\(10, 2.5\) raised TypeError, expected a ValueError",
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
        # d_model / n_heads is a float: the count comes out as 1050624.0, not the int the spec asks for.
        "parameters counted with true division": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    d_head = d_model / n_heads
    return 4 * n_heads * d_head * d_model + (4 * d_model if bias else 0)
""",
            check=r"mha_param_count\(512, 8\) returned 1050624\.0, a float; .* integer arithmetic",
            hidden=r"mha_param_count\(768, 12, bias=True\) returned 2362368\.0, a float",
        ),
        "parameters without the biases": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    return 4 * d_model * d_model
""",
            check="that leaves out the biases",
            hidden=r"mha_param_count\(768, 12, bias=True\) = 2359296, expected 2362368",
        ),
        "biases whatever bias says": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    return 4 * d_model * d_model + 4 * d_model
""",
            check="with bias=False there are no bias vectors",
            hidden=r"mha_param_count\(768, 12, bias=False\) = 2362368, expected 2359296",
        ),
        "d_head numbers per head instead of d_model · d_head": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    d_head = d_model // n_heads
    per_head = 3 * d_head  # Q, K and V of width d_head
    return n_heads * per_head + d_model * d_model + (4 * d_model if bias else 0)
""",
            check="that counts d_head numbers per head",
            hidden=r"mha_param_count\(768, 12, bias=True\) = \d+, expected 2362368",
        ),
        # Each head reading only its own d_head features: (d_head, d_head) blocks, a count that falls with n_heads.
        "heads as (d_head, d_head) blocks": Bug(
            "mha_param_count",
            """
def mha_param_count(d_model, n_heads, bias=True):
    d_head = d_model // n_heads
    per_head = 3 * d_head * d_head
    return n_heads * per_head + d_model * d_model + (4 * d_model if bias else 0)
""",
            check=r"that gives each head \(d_head, d_head\) blocks",
            hidden=r"mha_param_count\(768, 12, bias=True\) = \d+, expected 2362368",
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
        # .float() to get past a dtype error: float64 inputs give a float32 output and weights.
        "attention computed in float32": Bug(
            "multi_head_attention",
            _mha().replace(
                "    b, s, d = x.shape",
                "    x, w_q, w_k, w_v, w_o = (t.float() for t in (x, w_q, w_k, w_v, w_o))\n    b, s, d = x.shape",
                1,
            ),
            check=r"multi_head_attention returned output as torch.float32 for float64 x \(2, 5, 6\)",
            hidden=r"weights for x \(3, 4, 6\), 6 heads, mask None returned torch.float32, expected torch.float64",
        ),
        "mask applied after the softmax": Bug(
            "multi_head_attention",
            _mha().replace(
                """        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)""",
                """        pass
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)""",
            ),
            check="the mask was applied after the softmax, so the rows no longer sum to 1",
            hidden=r"weights for x \(2, 6, 10\), 5 heads, mask \(6, 6\) differs from the reference",
        ),
        "masked scores set to 0": Bug(
            "multi_head_attention",
            _mha().replace('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)"),
            check="the masked scores were set to 0, and a score of 0 still gets weight",
            hidden=r"weights for x \(2, 6, 10\), 5 heads, mask \(6, 6\) differs from the reference",
        ),
        # masked_fill fills where its condition is True, and True here means "may attend".
        "mask read the wrong way round": Bug(
            "multi_head_attention",
            _mha().replace('masked_fill(~mask, float("-inf"))', 'masked_fill(mask, float("-inf"))'),
            check="the mask is read the wrong way round: masked_fill fills where its condition is True",
            hidden=r"weights for x \(2, 6, 10\), 5 heads, mask \(6, 6\) differs from the reference",
        ),
        # Making a (seq, seq) mask 4-D in place: the caller's mask changes shape.
        "mask unsqueezed in place": Bug(
            "multi_head_attention",
            _mha().replace(
                "    if mask is not None:\n",
                "    if mask is not None:\n        while mask.dim() < 4:\n            mask.unsqueeze_(0)\n",
            ),
            check=r"multi_head_attention changed its input mask in place .* inputs are not modified",
            hidden=r"changed x, a weight or the mask in place for x \(2, 6, 10\), 5 heads, mask \(6, 6\)",
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
