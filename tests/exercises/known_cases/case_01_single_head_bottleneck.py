"""The hand-written cases of exercise 01_single_head_bottleneck:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _sdpa(
    scores="q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
    mask="scores.masked_fill(~mask, float('-inf'))",
    dim=-1,
    result="weights @ v, weights",
):
    return f"""
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = {scores}
    if mask is not None:
        scores = {mask}
    weights = torch.softmax(scores, dim={dim})
    return {result}
"""


def _softmax(body: str) -> str:
    return f"\ndef softmax(scores):\n    return {body}\n"


def _shifted_softmax(prepare="x = scores", max_="x.max(dim=-1, keepdim=True).values", sum_dim="-1") -> str:
    """A hand-written softmax (torch's own is ruled out in this part) with one step changed."""
    return f"""
def softmax(scores):
    {prepare}
    e = (x - {max_}).exp()
    return e / e.sum(dim={sum_dim}, keepdim=True)
"""


def _entropy(body: str) -> str:
    return f"\ndef attention_entropy(weights):\n    return {body}\n"


KNOWN["01_single_head_bottleneck"] = {
    "right": {
        "einsum": {
            "softmax": _softmax("torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))"),
            "scaled_dot_product_attention": """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
""",
            "attention_entropy": """
def attention_entropy(weights):
    terms = torch.where(weights > 0, weights * torch.log(weights), torch.zeros_like(weights))
    return -terms.sum(dim=-1)
""",
        },
        "float64_manual": {
            "scaled_dot_product_attention": """
def scaled_dot_product_attention(q, k, v, mask=None):
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return (weights @ v).to(dtype), weights.to(dtype)
"""
        },
        "big_negative": {
            "scaled_dot_product_attention": """
import torch.nn.functional as F

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
"""
        },
        "torch_softmax": {"scaled_dot_product_attention": _sdpa()},
    },
    "bugs": {
        "softmax returns None": Bug(
            "softmax",
            _softmax("None"),
            check="should be a torch.Tensor",
            hidden="should return a torch.Tensor",
            also_fails=("scaled_dot_product_attention",),
        ),
        "softmax without the max subtraction": Bug(
            "softmax",
            "\ndef softmax(scores):\n    e = torch.exp(scores)\n    return e / e.sum(dim=-1, keepdim=True)\n",
            check="Subtract each row's maximum",
            hidden="wrong softmax for float32 scores of shape \\(2, 5\\)",
        ),
        "softmax over the wrong axis": Bug(
            "softmax",
            _shifted_softmax(max_="x.max(dim=-2, keepdim=True).values", sum_dim="-2"),
            check="columns sum to 1",
            hidden="Dimension out of range",
            hidden_error=IndexError,  # on 1-D scores
            also_fails=("scaled_dot_product_attention",),
        ),
        "softmax not normalised": Bug(
            "softmax",
            _softmax("(scores - scores.max(dim=-1, keepdim=True).values).exp()"),
            check="each row should sum to 1",
            hidden="wrong softmax",
            also_fails=("scaled_dot_product_attention",),
        ),
        "softmax reduces the axis": Bug(
            "softmax",
            _softmax("scores.exp().sum(dim=-1)"),
            check="should keep the shape",
            hidden="shape \\(\\), expected \\(7,\\)",
            also_fails=("scaled_dot_product_attention",),
        ),
        "softmax crashes": Bug(
            "softmax",
            _softmax("scores.foo()"),
            check="raised AttributeError",
            hidden="no attribute 'foo'",
            hidden_error=AttributeError,
            also_fails=("scaled_dot_product_attention",),
        ),
        "softmax in float32 inside": Bug(
            "softmax",
            _shifted_softmax(prepare="x = scores.float()"),
            check="keep the input's dtype",
            hidden="softmax returned torch.float32 for torch.float64 scores",
            also_fails=("scaled_dot_product_attention",),
        ),  # float weights @ double v
        "softmax returns float64 for float32 scores": Bug(
            "softmax",
            _shifted_softmax(prepare="x = scores.double()"),
            check=r"returned torch\.float64 weights for float32 scores: the weights must have the scores' dtype",
            hidden="softmax returned torch.float64 for float32 scores",
            also_fails=("scaled_dot_product_attention",),
        ),  # double weights @ float v
        "softmax changes its input in place": Bug(
            "softmax",
            """
def softmax(scores):
    scores -= scores.max(dim=-1, keepdim=True).values
    scores.exp_()
    return scores / scores.sum(dim=-1, keepdim=True)
""",
            check="changed its input scores in place",
            hidden="softmax changed its input scores in place",
        ),
        "softmax max without keepdim": Bug(
            "softmax",
            _shifted_softmax(max_="x.max(dim=-1).values"),
            check="without keepdim=True drops that axis",
            hidden="must match the size",
            hidden_error=RuntimeError,  # right on 1-D scores, a size mismatch on (3, 4, 9)
            also_fails=("scaled_dot_product_attention",),
        ),
        "attention without 1/sqrt(d_k)": Bug(
            "scaled_dot_product_attention",
            _sdpa(scores="q @ k.transpose(-2, -1)"),
            check="divide the scores by √d_k",
            hidden="weights for .* differs from the reference",
        ),
        "attention divides by d_k": Bug(
            "scaled_dot_product_attention",
            _sdpa(scores="q @ k.transpose(-2, -1) / q.shape[-1]"),
            check="not d_k",
            hidden="weights for .* differs from the reference",
        ),
        "softmax over the queries": Bug(
            "scaled_dot_product_attention",
            _sdpa(dim=-2),
            check="softmax runs over the wrong axis",
            hidden="weights for .* differs from the reference",
        ),
        "mask ignored": Bug(
            "scaled_dot_product_attention",
            _sdpa(mask="scores"),
            check="the mask is ignored",
            hidden="weights for .* mask \\(7, 4\\) differs from the reference",
        ),
        "mask inverted": Bug(
            "scaled_dot_product_attention",
            _sdpa(mask="scores.masked_fill(mask, float('-inf'))"),
            check="the mask is inverted",
            hidden="weights for .* mask \\(7, 4\\) differs from the reference",
        ),
        "weights transposed": Bug(
            "scaled_dot_product_attention",
            _sdpa(result="weights @ v, weights.transpose(-2, -1)"),
            check=r"should be \(2, 3, 5\).*did you transpose\?",
            hidden=r"weights for .* has shape \(2, 5, 3\), expected \(2, 3, 5\)",
        ),
        "k.T on 3-D inputs": Bug(
            "scaled_dot_product_attention",
            # the classic `k.T` reverses every axis (spelled out: torch deprecates .T on 3-D)
            _sdpa(scores="q @ k.permute(*reversed(range(k.dim()))) / math.sqrt(q.shape[-1])"),
            check="raised RuntimeError on q",
            hidden="size mismatch|must match|cannot be multiplied",
            hidden_error=RuntimeError,
        ),
        "transpose(1, 2) instead of the last two axes": Bug(
            "scaled_dot_product_attention",
            _sdpa(scores="q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])"),
            check="4-D inputs",
            hidden="Dimension out of range",
            hidden_error=IndexError,
        ),
        "attention scales q in place": Bug(
            "scaled_dot_product_attention",
            """
def scaled_dot_product_attention(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
""",
            check="changed its input q in place",
            hidden="scaled_dot_product_attention changed its input q in place",
        ),
        "attention returns float64 for float32 inputs": Bug(
            "scaled_dot_product_attention",
            """
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
""",
            check=r"returned output as torch\.float64 for float32 inputs .*expected torch\.float32",
            hidden=r"has dtype torch\.float64, expected torch\.float32",
        ),
        "mask applied after the softmax": Bug(
            "scaled_dot_product_attention",
            """
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights
""",
            check="the mask is applied after the softmax",
            hidden="weights for .* mask \\(7, 4\\) differs from the reference",
        ),
        "returns the output only": Bug(
            "scaled_dot_product_attention",
            _sdpa(result="weights @ v"),
            check="should return a tuple",
            hidden="must return \\(output, weights\\)",
        ),
        "entropy with 0 log 0 = nan": Bug(
            "attention_entropy",
            _entropy("-(weights * weights.log()).sum(dim=-1)"),
            check="0 · log 0",
            hidden="entropy nan instead of",
        ),
        "entropy without the minus sign": Bug(
            "attention_entropy",
            _entropy("torch.special.xlogy(weights, weights).sum(dim=-1)"),
            check="minus sign",
            hidden="entropy -[0-9.]+ instead of [0-9]",
        ),
        "entropy in bits": Bug(
            "attention_entropy",
            _entropy("-torch.special.xlogy(weights, weights).sum(dim=-1) / math.log(2)"),
            check="natural logarithm",
            hidden="entropy [0-9.]+ instead of",
        ),
        "entropy changes its input in place": Bug(
            "attention_entropy",
            """
def attention_entropy(weights):
    weights[weights == 0] = 1.0  # log 1 = 0, so the zero weights add nothing
    return -(weights * weights.log()).sum(dim=-1)
""",
            check="changed its input weights in place",
            hidden="attention_entropy changed its input weights in place",
        ),
        "entropy returns float64 for float32 weights": Bug(
            "attention_entropy",
            _entropy("-torch.special.xlogy(weights.double(), weights.double()).sum(dim=-1)"),
            check=r"returned torch\.float64 for float32 weights of shape \(2, 3, 4, 6\) .*expected torch\.float32",
            hidden="attention_entropy returned torch.float64 for torch.float32 weights",
        ),
        "entropy with a 1e-300 guard in the log": Bug(
            "attention_entropy",
            _entropy("-(weights * (weights + 1e-300).log()).sum(dim=-1)"),
            check="1e-300 is 0 in float32",
            hidden="entropy nan instead of",
        ),
        "entropy sums over the queries": Bug(
            "attention_entropy",
            _entropy("-torch.special.xlogy(weights, weights).sum(dim=-2)"),
            check=r"one number per query, \(2, 3\)",
            hidden=r"shape \(2, 3, 7\), expected \(2, 3, 4\)",
        ),
        "entropy sums everything": Bug(
            "attention_entropy",
            _entropy("-torch.special.xlogy(weights, weights).sum()"),
            check=r"one number per query, \(2, 3\)",
            hidden=r"shape \(\), expected \(2, 3, 4\)",
        ),
    },
    # Several answers in one submission: a correct part keeps its points when another part is wrong.
    "mixed": {
        "float64_manual with two wrong parts": (
            "float64_manual",
            "softmax without the max subtraction",
            "entropy with 0 log 0 = nan",
        ),
        "big_negative with entropy in bits": ("big_negative", "entropy in bits"),
    },
}
