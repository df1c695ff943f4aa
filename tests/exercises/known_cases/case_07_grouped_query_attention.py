"""The hand-written cases of exercise 07_grouped_query_attention:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _cache(expression: str, defaults: str = "batch=1, bytes_per_element=2") -> str:
    return f"\ndef kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, {defaults}):\n    return {expression}\n"


_CACHE_PRODUCT = "n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element"


def _gqa(
    split_kv="(x @ w).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2)",
    share="repeat_kv(k, group), repeat_kv(v, group)",
    scale="/ math.sqrt(d_head)",
    fill="~mask",
    validate=True,
    prelude="",
    softmax="torch.softmax(scores, dim=-1)",
    mix="weights @ v",
) -> str:
    """A grouped_query_attention with the solution's steps, each replaceable by a known mistake."""
    check = (
        "    if d_model % n_heads or n_heads % n_kv_heads:\n        raise ValueError('invalid head counts')\n"
        if validate
        else ""
    )
    return f"""
def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    batch, seq, d_model = x.shape
{check}    d_head, group = d_model // n_heads, n_heads // n_kv_heads
{prelude}    q = (x @ w_q).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    k, v = ({split_kv} for w in (w_k, w_v))
    k, v = {share}
    scores = q @ k.transpose(-2, -1) {scale}
    if mask is not None:
        scores = scores.masked_fill({fill}, float("-inf"))
    weights = {softmax}
    return ({mix}).transpose(1, 2).reshape(batch, seq, d_model) @ w_o, weights
"""


def _pool(body: str, validate: bool = True) -> str:
    check = (
        "    if n_heads % n_kv_heads:\n        raise ValueError('n_kv_heads must divide n_heads')\n" if validate else ""
    )
    return f"""
def mean_pool_kv(w, n_heads, n_kv_heads):
{check}    *lead, width = w.shape
    d_head, r = width // n_heads, n_heads // n_kv_heads
{body}"""


_HIDDEN_CACHE = r"kv_cache_bytes\(.*\) = -?\d+: wrong number of bytes"
_HIDDEN_REPEAT = r"output head \d+ of item \d+ is wrong"
_HIDDEN_GQA = r"weights for x \(2, 5, 12\), 6 heads, 2 K/V heads, mask None differs from the reference"
_HIDDEN_POOL = r"the block of K/V head \d+ is wrong"

KNOWN["07_grouped_query_attention"] = {
    "right": {
        "loops": {
            "kv_cache_bytes": """
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    per_token = 0
    for _ in range(n_layers):
        per_token += 2 * n_kv_heads * d_head * bytes_per_element  # a key and a value per K/V head
    return per_token * seq_len * batch
""",
            "repeat_kv": """
def repeat_kv(x, n_rep):
    return torch.cat([x[:, h : h + 1] for h in range(x.shape[1]) for _ in range(n_rep)], dim=1)
""",
            "grouped_query_attention": """
def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    batch, seq, d_model = x.shape
    if n_heads < 1 or n_kv_heads < 1 or d_model % n_heads != 0 or n_heads % n_kv_heads != 0:
        raise ValueError("n_heads must divide d_model and n_kv_heads must divide n_heads")
    d_head = d_model // n_heads
    group = n_heads // n_kv_heads
    if mask is not None:
        mask = mask.expand(batch, n_heads, seq, seq)
    outputs, patterns = [], []
    for h in range(n_heads):
        g = h // group
        q = x @ w_q[:, h * d_head : (h + 1) * d_head]
        k = x @ w_k[:, g * d_head : (g + 1) * d_head]
        v = x @ w_v[:, g * d_head : (g + 1) * d_head]
        scores = q @ k.transpose(1, 2) / d_head**0.5
        if mask is not None:
            scores = torch.where(mask[:, h], scores, torch.full_like(scores, float("-inf")))
        p = torch.softmax(scores, dim=-1)
        patterns.append(p)
        outputs.append(p @ v)
    return torch.cat(outputs, dim=-1) @ w_o, torch.stack(patterns, dim=1)
""",
            "mean_pool_kv": """
def mean_pool_kv(w, n_heads, n_kv_heads):
    if n_heads % n_kv_heads != 0:
        raise ValueError(f"{n_kv_heads} K/V heads cannot share {n_heads} query heads equally")
    d_head = w.shape[-1] // n_heads
    r = n_heads // n_kv_heads
    blocks = []
    for g in range(n_kv_heads):
        heads = [w[..., (g * r + i) * d_head : (g * r + i + 1) * d_head] for i in range(r)]
        blocks.append(sum(heads) / r)
    return torch.cat(blocks, dim=-1)
""",
        },
        "expand": {
            "kv_cache_bytes": _cache("math.prod((2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element))"),
            "repeat_kv": """
def repeat_kv(x, n_rep):
    batch, n_kv_heads, seq, d_head = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(batch, n_kv_heads, n_rep, seq, d_head)
    return x.reshape(batch, n_kv_heads * n_rep, seq, d_head)
""",
            "grouped_query_attention": """
def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    batch, seq, d_model = x.shape
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError("invalid head counts")
    d_head, group = d_model // n_heads, n_heads // n_kv_heads
    # no copies of K and V: the query heads of group g, (batch, g, r, seq, d_head), all meet K/V head g
    q = (x @ w_q).reshape(batch, seq, n_kv_heads, group, d_head).permute(0, 2, 3, 1, 4)
    k = (x @ w_k).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2)
    scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(d_head)
    if mask is not None:
        mask = mask.expand(batch, n_heads, seq, seq).reshape(batch, n_kv_heads, group, seq, seq)
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = scores.softmax(dim=-1)
    heads = torch.einsum("bgrqk,bgkd->bqgrd", weights, v).reshape(batch, seq, d_model)
    return heads @ w_o, weights.reshape(batch, n_heads, seq, seq)
""",
            "mean_pool_kv": """
def mean_pool_kv(w, n_heads, n_kv_heads):
    if n_heads % n_kv_heads:
        raise ValueError("n_kv_heads must divide n_heads")
    return w.unflatten(-1, (n_kv_heads, n_heads // n_kv_heads, -1)).mean(dim=-2).flatten(-2)
""",
        },
    },
    "bugs": {
        "cache as a float": Bug(
            "kv_cache_bytes",
            _cache(f"2.0 * {_CACHE_PRODUCT}"),
            check="the arithmetic went through a float",
            hidden=r"returned a float, not an int",
        ),
        "cache of the keys only": Bug(
            "kv_cache_bytes", _cache(_CACHE_PRODUCT), check="multiply by 2", hidden=_HIDDEN_CACHE
        ),
        "cache with a default of 4 bytes": Bug(
            "kv_cache_bytes",
            _cache(f"2 * {_CACHE_PRODUCT}", defaults="batch=1, bytes_per_element=4"),
            check="the default of bytes_per_element is 2",
            hidden=_HIDDEN_CACHE,
        ),
        "cache ignores the batch": Bug(
            "kv_cache_bytes",
            _cache("2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_element"),
            check="batch is ignored",
            hidden=_HIDDEN_CACHE,
        ),
        "cache in int32": Bug(
            "kv_cache_bytes",
            """
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    total = torch.tensor(2, dtype=torch.int32)
    for size in (n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
        total = total * size
    return int(total)
""",
            check="overflowed 32-bit integers",
            hidden=_HIDDEN_CACHE,
        ),
        "cache in an int32 tensor that refuses the number": Bug(
            "kv_cache_bytes",
            """
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    elements = torch.tensor(n_layers * n_kv_heads * d_head * seq_len * batch, dtype=torch.int32)
    return int(2 * elements * bytes_per_element)
""",
            check=r"raised RuntimeError on kv_cache_bytes\(32, 32, 128, 4096, 8, 2\).*Likely cause: the product "
            r"overflowed 32-bit integers(?!.*parameter names)",
            hidden="int32 without overflow",
            hidden_error=RuntimeError,
        ),
        "cache as a NumPy integer": Bug(
            "kv_cache_bytes",
            """
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    import numpy as np

    return np.prod([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element])
""",
            check=r"a int64; the spec asks for an int: return a plain Python int",
            hidden=r"returned a int64, not an int",
        ),
        "cache as a NumPy int32": Bug(
            "kv_cache_bytes",
            """
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    import numpy as np

    return np.prod([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element], dtype=np.int32)
""",
            check=r"a 32-bit integer, not a Python int: int32 stops at 2\*\*31 − 1",
            hidden=r"returned a int32, not an int",
        ),
        "cache as a tensor": Bug(
            "kv_cache_bytes",
            _cache("torch.tensor([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element]).prod()"),
            check="not on tensors",
            hidden=r"returned a Tensor, not an int",
        ),
        "K/V heads tiled (repeat)": Bug(
            "repeat_kv",
            "\ndef repeat_kv(x, n_rep):\n    return x.repeat(1, n_rep, 1, 1)\n",
            check="tiles the whole block of heads",
            hidden=_HIDDEN_REPEAT,
            also_fails=("grouped_query_attention",),
        ),
        "K/V positions repeated": Bug(
            "repeat_kv",
            "\ndef repeat_kv(x, n_rep):\n    return x.repeat_interleave(n_rep, dim=2)\n",
            check="that repeats the positions",
            hidden=r"shape \(2, 4, 12, 8\), expected",
            also_fails=("grouped_query_attention",),
        ),
        "K/V heads repeated without dim": Bug(
            "repeat_kv",
            "\ndef repeat_kv(x, n_rep):\n    return x.repeat_interleave(n_rep)\n",
            check=r"returned shape \(240,\).*repeat_interleave without dim= flattens",
            hidden=r"shape \(\d+,\), expected \(batch, n_kv_heads · n_rep, seq, d_head\)",
            also_fails=("grouped_query_attention",),
        ),
        "K/V batch repeated": Bug(
            "repeat_kv",
            "\ndef repeat_kv(x, n_rep):\n    return x.repeat_interleave(n_rep, dim=0)\n",
            check=r"that repeats the batch \(axis 0\)",
            hidden=r"shape \(4, 4, 6, 8\), expected",
            also_fails=("grouped_query_attention",),
        ),
        "K/V heads expanded, then view": Bug(
            "repeat_kv",
            """
def repeat_kv(x, n_rep):
    batch, n_kv_heads, seq, d_head = x.shape
    return x[:, :, None].expand(batch, n_kv_heads, n_rep, seq, d_head).view(batch, n_kv_heads * n_rep, seq, d_head)
""",
            check=r"raised RuntimeError on x \(2, 3, 4, 5\), n_rep=2: view size is not compatible",
            hidden="view size is not compatible",
            hidden_error=RuntimeError,
            also_fails=("grouped_query_attention",),
        ),
        "K/V heads copied into float32 zeros": Bug(
            "repeat_kv",
            """
def repeat_kv(x, n_rep):
    batch, n_kv_heads, seq, d_head = x.shape
    out = torch.zeros(batch, n_kv_heads * n_rep, seq, d_head)
    for h in range(n_kv_heads * n_rep):
        out[:, h] = x[:, h // n_rep]
    return out
""",
            check=r"repeat_kv returned torch.float32 for x \(2, 3, 4, 5\), n_rep=2, expected torch.float64",
            hidden=r"dtype torch.float32, expected torch.float64",
            also_fails=("grouped_query_attention",),
        ),
        "K/V heads unsqueezed in place": Bug(
            "repeat_kv",
            """
def repeat_kv(x, n_rep):
    batch, n_kv_heads, seq, d_head = x.shape
    x.unsqueeze_(2)  # (batch, n_kv_heads, 1, seq, d_head)
    return x.expand(batch, n_kv_heads, n_rep, seq, d_head).reshape(batch, n_kv_heads * n_rep, seq, d_head)
""",
            check="repeat_kv changed its input x in place",
            hidden="x changed",
        ),
        "attention with tiled K/V heads": Bug(
            "grouped_query_attention",
            _gqa(share="k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)"),
            check="the K/V heads are tiled",
            hidden=_HIDDEN_GQA,
        ),
        "attention mask inverted": Bug(
            "grouped_query_attention",
            _gqa(fill="mask"),
            check="the mask is inverted",
            hidden=r"weights for x \(3, 4, 8\), 4 heads, 4 K/V heads, mask causal differs from the reference",
        ),
        "attention not scaled": Bug(
            "grouped_query_attention", _gqa(scale=""), check="the scores are not scaled", hidden=_HIDDEN_GQA
        ),
        "attention scaled by √d_model": Bug(
            "grouped_query_attention",
            _gqa(scale="/ math.sqrt(d_model)"),
            check="divided by √d_model",
            hidden=_HIDDEN_GQA,
        ),
        "attention splits K/V into n_heads heads": Bug(
            "grouped_query_attention",
            _gqa(split_kv="(x @ w).reshape(batch, seq, n_heads, -1).transpose(1, 2)", share="k, v"),
            check=r"raised RuntimeError on x \(2, 5, 12\)",
            hidden="is invalid for input of size",
            hidden_error=RuntimeError,
        ),
        "attention weights per group": Bug(
            "grouped_query_attention",
            """
def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    batch, seq, d_model = x.shape
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError("invalid head counts")
    d_head, group = d_model // n_heads, n_heads // n_kv_heads
    q = (x @ w_q).reshape(batch, seq, n_kv_heads, group, d_head).permute(0, 2, 3, 1, 4)
    k, v = ((x @ w).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2) for w in (w_k, w_v))
    scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / math.sqrt(d_head)
    if mask is not None:
        scores = scores.masked_fill(~mask.expand(batch, n_heads, seq, seq).unflatten(1, (n_kv_heads, group)), -1e9)
    weights = scores.softmax(dim=-1)
    heads = torch.einsum("bgrqk,bgkd->bqgrd", weights, v).reshape(batch, seq, d_model)
    return heads @ w_o, weights
""",
            check=r"merge the \(n_kv_heads, group\) axes",
            hidden=r"has shape \(2, 2, 3, 5, 5\), expected",
        ),
        "attention without the ValueError": Bug(
            "grouped_query_attention",
            _gqa(validate=False),
            check=r"n_heads=6, n_kv_heads=4, d_model=12, expected a ValueError",
            hidden="raised RuntimeError for n_heads=6, n_kv_heads=4, d_model=12, expected ValueError",
        ),
        "attention masked after the softmax": Bug(
            "grouped_query_attention",
            """
def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    batch, seq, d_model = x.shape
    if d_model % n_heads or n_heads % n_kv_heads:
        raise ValueError("invalid head counts")
    d_head, group = d_model // n_heads, n_heads // n_kv_heads
    q = (x @ w_q).reshape(batch, seq, n_heads, d_head).transpose(1, 2)
    k, v = ((x @ w).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2) for w in (w_k, w_v))
    k, v = repeat_kv(k, group), repeat_kv(v, group)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # the forbidden keys get no weight
    return (weights @ v).transpose(1, 2).reshape(batch, seq, d_model) @ w_o, weights
""",
            check="the mask is applied after the softmax",
            hidden=r"weights for x \(3, 4, 8\), 4 heads, 4 K/V heads, mask causal differs from the reference",
        ),
        "attention weights in float32": Bug(
            "grouped_query_attention",
            _gqa(
                softmax="torch.softmax(scores.float(), dim=-1)  # in float32, as Llama does",
                mix="weights.to(v.dtype) @ v",
            ),
            check=r"returned weights as torch.float32 for multi-head attention, n_heads = n_kv_heads = 4, expected "
            r"torch.float64",
            hidden=r"has dtype torch.float32, expected torch.float64",
        ),
        "attention folds the scale into w_q in place": Bug(
            "grouped_query_attention",
            _gqa(scale="", prelude="    w_q /= math.sqrt(d_head)\n"),
            check="changed its input w_q",
            hidden="an input changed",
        ),
        "pooling strided groups": Bug(
            "mean_pool_kv",
            _pool(
                "    return w.reshape(*lead, r, n_kv_heads, d_head).mean(dim=-3).reshape(*lead, n_kv_heads * d_head)\n"
            ),
            check="the groups are CONSECUTIVE heads",
            hidden=_HIDDEN_POOL,
        ),
        "pooling sums": Bug(
            "mean_pool_kv",
            _pool(
                "    return w.reshape(*lead, n_kv_heads, r, d_head).sum(dim=-2).reshape(*lead, n_kv_heads * d_head)\n"
            ),
            check="that is the sum",
            hidden=_HIDDEN_POOL,
        ),
        "pooling keeps the first head": Bug(
            "mean_pool_kv",
            _pool(
                "    return w.reshape(*lead, n_kv_heads, r, d_head)[..., 0, :].reshape(*lead, n_kv_heads * d_head)\n"
            ),
            check="keeps the first head of each group",
            hidden=_HIDDEN_POOL,
        ),
        "pooling without the ValueError": Bug(
            "mean_pool_kv",
            _pool(
                "    return w.reshape(*lead, n_kv_heads, r, d_head).mean(dim=-2).reshape(*lead, n_kv_heads * d_head)\n",
                validate=False,
            ),
            check=r"n_kv_heads=4, expected a ValueError",
            hidden="raised RuntimeError for n_heads=6, n_kv_heads=4, expected ValueError",
        ),
        "pooling in place": Bug(
            "mean_pool_kv",
            _pool(
                """    blocks = w.view(*lead, n_kv_heads, r, d_head)
    blocks[..., 0, :] = blocks.mean(dim=-2)  # writes into w
    return blocks[..., 0, :].reshape(*lead, n_kv_heads * d_head)
"""
            ),
            check="changed its input w",
            hidden="w changed",
        ),
        "pooling into float32 zeros": Bug(
            "mean_pool_kv",
            _pool(
                """    out = torch.zeros(*lead, n_kv_heads * d_head)
    for g in range(n_kv_heads):
        for h in range(g * r, (g + 1) * r):
            out[..., g * d_head : (g + 1) * d_head] += w[..., h * d_head : (h + 1) * d_head] / r
    return out
"""
            ),
            check=r"mean_pool_kv returned torch.float32 for w \(5, 12\), n_heads=6, n_kv_heads=2, expected "
            r"torch.float64",
            hidden=r"dtype torch.float32, expected torch.float64",
        ),
        "pooling weights only (no bias)": Bug(
            "mean_pool_kv",
            _pool("    return w.reshape(w.shape[0], n_kv_heads, r, -1).mean(dim=2).reshape(w.shape[0], -1)\n"),
            check="raised RuntimeError on a bias",
            hidden="is invalid for input of size",
            hidden_error=RuntimeError,
        ),
    },
    "mixed": {
        "loops with strided pooling": ("loops", "pooling strided groups"),
        "expand with the keys only": ("expand", "cache of the keys only"),
    },
    # The prompt gives the quality evidence its mark scheme expects (Ainslie et al.'s Table 1, DeepSeek-V2's Table 8).
    "written_prompts": {
        "heads_for_three_models": (
            "131,072 tokens",
            "| 47.2 | 47.1 | 46.6 |",
            "| 1.51 | 0.28 | 0.24 |",
            "| 45.2 | 41.2 | 37.9 |",
            "{cite}`ainslie2023gqa`",
            "{cite}`deepseek2024v2`",
        )
    },
}
