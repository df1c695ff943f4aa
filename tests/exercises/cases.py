"""What is specific to each exercise, as data: correct alternative answers, the known bugs and how each is caught,
and the package's own computation of each part. Everything else about an exercise comes from its one description
(:data:`manyheads.course.exercises.EXERCISES`) and its notebooks.

:data:`CASES` and :data:`PACKAGE` have an entry for every exercise of the description: its hand-written cases
(:data:`KNOWN`, keyed by the exercise's stem; none needed) and the package's functions that compute its parts
(derived from the description's ``computed_by``, plus :data:`ADAPTERS` where the package's signature differs).

Answers are source text, what a student types into an answer cell, so the same text feeds the visible checks and
hidden tests in this process, the released notebook run with nbclient, and real nbgrader. An answer replaces the
solution's answer cell of its part; the other parts keep the solution's.

Adding an exercise: its :class:`~manyheads.course.exercises.Exercise` entry and its notebook in solutions/ are
enough (every test then covers it, with wrong answers made from its solution: ``misses.py``); known bugs written here
(at least one per part once there are any) make its tests sharper. No new test file.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

import manyheads as mh
from manyheads.course.exercises import EXERCISES, CodePart, Exercise

KNOWN: dict[str, dict] = {}  # stem → {"right", "bugs", "mixed", "written_prompts"}: the hand-written cases


@dataclass(frozen=True)
class Bug:
    """A known wrong answer to one part, and how it must be caught.

    ``check``: a regular expression that the visible check's ``AssertionError`` message matches, naming the bug;
    ``None`` when the visible check accepts the answer (only the hidden tests catch it). ``hidden``: what the hidden
    tests raise on their own (``hidden_error``, ``AssertionError`` unless the answer crashes on a hidden input) and
    a regular expression for its message. ``also_fails``: the parts whose solution calls this one and so fail too.
    """

    part: str
    source: str
    check: str | None
    hidden: str
    hidden_error: type[BaseException] = AssertionError
    also_fails: tuple[str, ...] = ()

    @property
    def touches(self) -> frozenset[str]:
        return frozenset({self.part, *self.also_fails})

    @property
    def graded_failure(self) -> tuple[str, str]:
        """(exception name, message pattern) of the graded test cell's error: it runs the visible check first."""
        if self.check is not None:
            return "AssertionError", self.check
        return self.hidden_error.__name__, self.hidden


# ------------------------------------------------------------------------------------------------------------------
# 01_single_head_bottleneck


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
            _softmax("torch.softmax(scores, dim=-2)"),
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
            _softmax("torch.softmax(scores.float(), dim=-1)"),
            check="keep the input's dtype",
            hidden="wrong softmax for float64 scores",
            also_fails=("scaled_dot_product_attention",),
        ),  # float weights @ double v
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


# ------------------------------------------------------------------------------------------------------------------
# 02_subspaces


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


# ------------------------------------------------------------------------------------------------------------------
# 03_head_size


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


# ------------------------------------------------------------------------------------------------------------------
# 04_specialization

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


# ------------------------------------------------------------------------------------------------------------------
# 05_pruning


def _ablate(body: str, check_keep: bool = True, check_mode: bool = True) -> str:
    """An ablate_heads with the contract's validation (unless left out) and the given body."""
    mode = (
        '    if mode not in ("zero", "mean"):\n        raise ValueError(f"unknown mode {mode!r}")\n'
        if check_mode
        else ""
    )
    keep = (
        "    if tuple(keep.shape) != (head_outputs.shape[1],):\n        raise ValueError('keep must be (n_heads,)')\n"
        if check_keep
        else ""
    )
    means = (
        '    if mode == "mean" and (means is None or tuple(means.shape) != (head_outputs.shape[1], '
        "head_outputs.shape[-1])):\n        raise ValueError('mode mean needs means (n_heads, d_head)')\n"
    )
    return f'\ndef ablate_heads(head_outputs, keep, mode="zero", means=None):\n{mode}{keep}{means}{body}'


_WHERE_ZERO = "torch.zeros_like(head_outputs)"
_WHERE_MEAN = "means[None, :, None, :]"


def _where(kept="keep[None, :, None, None]", zero=_WHERE_ZERO, mean=_WHERE_MEAN, swap=False) -> str:
    a, b = ("other", "head_outputs") if swap else ("head_outputs", "other")
    return f'    other = {zero} if mode == "zero" else {mean}\n    return torch.where({kept}, {a}, {b})\n'


def _importance(body: str) -> str:
    return f"\ndef gate_importance(loss_fn, batches, shape):\n{body}"


def _prune(body: str, validate: bool = True) -> str:
    check = (
        "    if not 0 <= fraction <= 1:\n        raise ValueError('fraction must lie in [0, 1]')\n" if validate else ""
    )
    return f"\ndef prune_mask(importance, fraction):\n{check}{body}"


_ARGSORT_PRUNE = """    k = {k}
    keep = torch.ones(importance.numel(), dtype=torch.bool)
    keep[torch.argsort(importance.flatten(){descending})[:k]] = False
    return keep.reshape(importance.shape){suffix}
"""


def _argsort_prune(k="math.floor(fraction * importance.numel())", descending="", suffix="", validate=True) -> str:
    return _prune(_ARGSORT_PRUNE.format(k=k, descending=descending, suffix=suffix), validate)


_HIDDEN_ABLATE = r"head \d+ \((kept|removed)\) of item \d+ is wrong"
_HIDDEN_IMPORTANCE = r"importance -?[0-9.e+-]+, expected"
_HIDDEN_PRUNE_COUNT = r"heads removed, expected \d+"

KNOWN["05_pruning"] = {
    "right": {
        "alternatives": {
            "ablate_heads": """
def ablate_heads(head_outputs, keep, mode="zero", means=None):
    n_heads, d_head = head_outputs.shape[1], head_outputs.shape[3]
    if mode != "zero" and mode != "mean":
        raise ValueError("mode must be 'zero' or 'mean'")
    if keep.dim() != 1 or keep.shape[0] != n_heads:
        raise ValueError("keep must have shape (n_heads,)")
    if mode == "mean":
        if means is None:
            raise ValueError("mean ablation needs means")
        if means.shape != (n_heads, d_head):
            raise ValueError("means must have shape (n_heads, d_head)")
    out = head_outputs.clone()
    for h in range(n_heads):
        if not keep[h]:
            out[:, h] = 0.0 if mode == "zero" else means[h]
    return out
""",
            "gate_importance": """
def gate_importance(loss_fn, batches, shape):
    grads = []
    for batch in batches:
        gates = torch.ones(shape).requires_grad_()
        loss_fn(gates, batch).backward()
        grads.append(gates.grad.abs())
    return torch.stack(grads).mean(dim=0)
""",
            "prune_mask": """
def prune_mask(importance, fraction):
    if fraction < 0 or fraction > 1:
        raise ValueError(f"fraction {fraction} is not in [0, 1]")
    n = importance.numel()
    k = int(math.floor(fraction * n))
    keep = torch.ones(n, dtype=torch.bool)
    if k > 0:
        keep[torch.topk(importance.reshape(-1), k, largest=False).indices] = False
    return keep.view(importance.shape)
""",
        },
        "arithmetic": {
            "ablate_heads": _ablate(
                """    k = keep.to(head_outputs.dtype)[None, :, None, None]
    if mode == "zero":
        return head_outputs * k
    return head_outputs * k + (1 - k) * means.to(head_outputs.dtype)[None, :, None, :]
"""
            ),
            "gate_importance": """
def gate_importance(loss_fn, batches, shape):
    total = None
    for n, batch in enumerate(batches, start=1):
        gates = torch.ones(*shape, requires_grad=True)
        loss = loss_fn(gates, batch)
        grad = torch.autograd.grad(loss, [gates])[0].detach().abs()
        total = grad if total is None else total + grad
    return total / n
""",
            "prune_mask": """
def prune_mask(importance, fraction):
    if not (0.0 <= fraction <= 1.0):
        raise ValueError("fraction must be between 0 and 1")
    flat = importance.detach().reshape(-1)
    k = math.floor(fraction * flat.numel())
    ranks = torch.empty(flat.numel(), dtype=torch.long)
    ranks[flat.argsort(stable=True)] = torch.arange(flat.numel())
    return (ranks >= k).reshape(importance.shape)
""",
        },
    },
    "bugs": {
        "ablation in place": Bug(
            "ablate_heads",
            _ablate(
                """    for h in range(keep.shape[0]):
        if not keep[h]:
            head_outputs[:, h] = 0.0 if mode == "zero" else means[h]
    return head_outputs
"""
            ),
            check="changed its input head_outputs",
            hidden="an input changed",
        ),
        "ablation mask inverted": Bug(
            "ablate_heads", _ablate(_where(swap=True)), check="the mask is inverted", hidden=_HIDDEN_ABLATE
        ),
        "means used in zero mode": Bug(
            "ablate_heads",
            _ablate(_where().replace('if mode == "zero"', "if means is None")),
            check="means is ignored in mode 'zero'",
            hidden=r"mode 'zero' with means given on .*: head \d+ \(removed\)",
        ),
        "means from the batch, not the argument": Bug(
            "ablate_heads",
            _ablate(_where(mean="head_outputs.mean(dim=(0, 2), keepdim=True)")),
            check="wrong mean ablation of head_outputs",
            hidden=r"mode 'mean' on .*: head \d+ \(removed\)",
        ),
        "means aligned with the positions": Bug(
            "ablate_heads",
            _ablate(_where(mean="means[None, None]")),
            check="raised RuntimeError on mode='mean'",
            hidden="must match the size",
            hidden_error=RuntimeError,
        ),
        "unknown mode taken for zero": Bug(
            "ablate_heads",
            _ablate(
                """    other = means[None, :, None, :] if mode == "mean" else torch.zeros_like(head_outputs)
    return torch.where(keep[None, :, None, None], head_outputs, other)
""",
                check_mode=False,
            ),
            check=r"mode='max', but should raise ValueError",
            hidden="should raise ValueError for unknown mode 'Zero'",
        ),
        "keep not checked": Bug(
            "ablate_heads",
            _ablate(_where(), check_keep=False),
            check="raised RuntimeError on keep of length 3 for 4 heads, expected a ValueError",
            hidden="raised RuntimeError for keep of length 2 for 3 heads, expected ValueError",
        ),
        "ablation in float32": Bug(
            "ablate_heads",
            _ablate(
                """    out = torch.zeros(head_outputs.shape)
    for h in range(keep.shape[0]):
        if keep[h]:
            out[:, h] = head_outputs[:, h]
        elif mode == "mean":
            out[:, h] = means[h]
    return out
"""
            ),
            check="keep the dtype of head_outputs",
            hidden="dtype torch.float32, expected torch.float64",
        ),
        "importance: abs after averaging": Bug(
            "gate_importance",
            _importance(
                """    total, n = torch.zeros(shape), 0
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0]
        n += 1
    return (total / n).abs()
"""
            ),
            check="absolute value of each batch's gradient first",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance keeps its autograd history": Bug(
            "gate_importance",
            _importance(
                """    total, n = 0, 0
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total = total + torch.autograd.grad(loss_fn(gates, batch), gates, create_graph=True)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="still has autograd history",
            hidden="the result still has autograd history",
        ),
        "importance iterates the batches twice": Bug(
            "gate_importance",
            _importance(
                """    n = sum(1 for _ in batches)
    total = torch.zeros(shape)
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
    return total / n
"""
            ),
            check="a generator can be iterated only once",
            hidden=r"a generator, \(6,\): importance 0\.0, expected",
        ),
        "importance summed over batches": Bug(
            "gate_importance",
            _importance(
                """    total = torch.zeros(shape)
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
    return total
"""
            ),
            check="that is the sum over the batches",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance with accumulated gates.grad": Bug(
            "gate_importance",
            _importance(
                """    gates = torch.ones(shape, requires_grad=True)
    total, n = torch.zeros(shape), 0
    for batch in batches:
        loss_fn(gates, batch).backward()
        total += gates.grad.abs()
        n += 1
    return total / n
"""
            ),
            check="gates.grad accumulates",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance at gates = 0": Bug(
            "gate_importance",
            _importance(
                """    total, n = torch.zeros(shape), 0
    for batch in batches:
        gates = torch.zeros(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="gates that are not all 1",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance of the first batch only": Bug(
            "gate_importance",
            _importance(
                """    gates = torch.ones(shape, requires_grad=True)
    return torch.autograd.grad(loss_fn(gates, next(iter(batches))), gates)[0].abs()
"""
            ),
            check="the first batch alone",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance in float64": Bug(
            "gate_importance",
            _importance(
                """    total, n = 0, 0
    for batch in batches:
        gates = torch.ones(shape, dtype=torch.float64, requires_grad=True)
        total = total + torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="float64 gates: gates = torch.ones\\(shape\\) is float32",
            hidden="dtype torch.float64, expected torch.float32",
        ),
        "pruning per layer": Bug(
            "prune_mask",
            _prune(
                """    rows = importance.reshape(-1, importance.shape[-1])
    k = math.floor(fraction * rows.shape[1])
    keep = torch.ones(rows.shape, dtype=torch.bool)
    for i in range(rows.shape[0]):
        keep[i, rows[i].argsort()[:k]] = False
    return keep.reshape(importance.shape)
"""
            ),
            check="1 head in each layer",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning rounds k": Bug(
            "prune_mask",
            _argsort_prune(k="round(fraction * importance.numel())"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning with math.ceil": Bug(
            "prune_mask",
            _argsort_prune(k="math.ceil(fraction * importance.numel())"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning one head too many": Bug(
            "prune_mask",
            _argsort_prune(k="math.floor(fraction * importance.numel()) + 1"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning mask inverted": Bug(
            "prune_mask",
            _argsort_prune(suffix=".logical_not()"),
            check="the mask is inverted",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning the most important heads": Bug(
            "prune_mask",
            _argsort_prune(descending=", descending=True"),
            check="prunes the MOST important heads",
            hidden="a removed head is more important than a kept one",
        ),
        "pruning by a threshold": Bug(
            "prune_mask",
            _prune(
                """    k = math.floor(fraction * importance.numel())
    if k == 0:
        return torch.ones(importance.shape, dtype=torch.bool)
    return importance > importance.flatten().kthvalue(k).values
"""
            ),
            check="tied importances",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "fraction not checked": Bug(
            "prune_mask",
            _argsort_prune(validate=False),
            check=r"fraction -0\.1, but should raise ValueError",
            hidden="should raise ValueError for fraction -0.5",
        ),
        "pruning changes importance": Bug(
            "prune_mask",
            _prune(
                """    flat = importance.view(-1)
    keep = torch.ones(flat.numel(), dtype=torch.bool)
    for _ in range(math.floor(fraction * flat.numel())):
        i = int(flat.argmin())
        keep[i] = False
        flat[i] = float("inf")
    return keep.reshape(importance.shape)
"""
            ),
            check="prune_mask changed importance",
            hidden="importance changed",
        ),
        "pruning returns a float mask": Bug(
            "prune_mask", _argsort_prune(suffix=".float()"), check="return a bool tensor", hidden="dtype torch.float32"
        ),
    },
    "mixed": {
        "alternatives with per-layer pruning": ("alternatives", "pruning per layer"),
        "arithmetic with abs after averaging": ("arithmetic", "importance: abs after averaging"),
    },
    "written_prompts": {"would_you_ship": "90 %", "identical_heads": "same block of $W_O$"},
}


# ------------------------------------------------------------------------------------------------------------------
# 06_layer_hierarchy


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
    return total / (batch * seq)
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


# ------------------------------------------------------------------------------------------------------------------
# 07_grouped_query_attention


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
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).transpose(1, 2).reshape(batch, seq, d_model) @ w_o, weights
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


# ------------------------------------------------------------------------------------------------------------------
# The package's own computation of each part, adapted to the student's signature (where the package's differs).
# Each must pass the part's visible check and hidden tests: the exercise's solution and the package the chapters
# use agree on the contract.


def _qk_circuits(w_q, w_k, n_heads):
    split = lambda w: w.reshape(w.shape[0], n_heads, -1).permute(1, 0, 2)  # noqa: E731
    return mh.analysis.circuits.qk_circuit(split(w_q), split(w_k))


def _module(d_model: int, n_heads: int, weights, dtype) -> mh.MultiHeadAttention:
    """A bias-free MultiHeadAttention whose projections are ``x @ w`` (nn.Linear stores w transposed)."""
    mha = mh.MultiHeadAttention(d_model, n_heads, bias=False).to(dtype)
    with torch.no_grad():
        for layer, w in zip((mha.W_q, mha.W_k, mha.W_v, mha.W_o), weights):
            layer.weight.copy_(w.T)
    return mha


def _head_scores(x, w_q, w_k, n_heads):
    mha = _module(x.shape[-1], n_heads, (w_q, w_k), x.dtype)
    return torch.stack([mh.analysis.circuits.pair_scores(mha, row) for row in x])


def _multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    if mask is not None:  # the exercise broadcasts a mask against (batch, n_heads, seq, seq): make that explicit
        mask = torch.broadcast_to(mask, (x.shape[0], n_heads, x.shape[1], x.shape[1]))
    with torch.no_grad():
        return _module(x.shape[-1], n_heads, (w_q, w_k, w_v, w_o), x.dtype)(x, mask=mask)


class _OneLayer(torch.nn.Module):
    """A model of one MultiHeadAttention layer whose input is the heads' outputs (batch, n_heads, seq, d_head): its
    gates multiply them and its W_o, the identity, concatenates them, where mh.interventions.ablated intervenes."""

    def __init__(self, n_heads: int, d_head: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.layer = mh.MultiHeadAttention(n_heads * d_head, n_heads, bias=False).to(dtype)
        with torch.no_grad():
            self.layer.W_o.weight.copy_(torch.eye(n_heads * d_head, dtype=dtype))

    def forward(self, head_outputs):
        gated = head_outputs * self.layer.head_gates.to(head_outputs.dtype)[None, :, None, None]
        merged = self.layer.W_o(gated.transpose(1, 2).flatten(-2))  # (batch, seq, n_heads · d_head)
        return merged.unflatten(-1, (self.layer.n_heads, -1)).transpose(1, 2)


def _ablate_heads(head_outputs, keep, mode="zero", means=None):
    _, n_heads, _, d_head = head_outputs.shape
    model = _OneLayer(n_heads, d_head, head_outputs.dtype)
    means = None if mode == "zero" or means is None else means[None]  # (n_layers = 1, n_heads, d_head)
    with torch.no_grad(), mh.interventions.ablated(model, ~keep[None], mode=mode, means=means):
        return model(head_outputs)


class _GateModel(torch.nn.Module):
    """A "model" whose output is loss_fn(gates, batch): one MultiHeadAttention layer per row of gates, so that the
    package's gate_importance differentiates through the layers' head_gates exactly as it does for a real model."""

    def __init__(self, loss_fn, shape) -> None:
        super().__init__()
        self.loss_fn, self.shape = loss_fn, tuple(shape)
        n_heads = self.shape[-1]
        rows = math.prod(self.shape[:-1]) if len(self.shape) > 1 else 1
        self.layers = torch.nn.ModuleList(mh.MultiHeadAttention(n_heads, n_heads) for _ in range(rows))

    def forward(self, batch):
        for layer in self.layers:  # each forward refreshes the layer's gates from the ones being differentiated
            layer(torch.zeros(1, 1, layer.d_model))
        gates = torch.stack([layer.head_gates for layer in self.layers]).reshape(self.shape)
        return self.loss_fn(gates, batch)


def _gate_importance(loss_fn, batches, shape):
    model = _GateModel(loss_fn, shape)
    pairs = (((batch,), None) for batch in batches)  # model(batch), then the "loss" is the model's output
    return mh.interventions.gate_importance(model, lambda output, _: output, pairs).reshape(tuple(shape))


def _head_budget_cache(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
    """head_budget's cache: a layer of n_kv_heads heads of width d_head, each its own K/V head."""
    width = n_kv_heads * d_head
    budget = mh.costs.head_budget(
        width, n_kv_heads, n_kv_heads, seq_len=seq_len, batch=batch, n_layers=n_layers, cache_bytes=bytes_per_element
    )
    return budget.kv_cache_bytes


def _grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
    mha = mh.MultiHeadAttention(x.shape[-1], n_heads, bias=False, n_kv_heads=n_kv_heads).to(x.dtype)
    with torch.no_grad():
        for layer, w in zip((mha.W_q, mha.W_k, mha.W_v, mha.W_o), (w_q, w_k, w_v, w_o)):
            layer.weight.copy_(w.T)  # nn.Linear stores the transpose of the exercise's x @ w
        return mha(x, mask=mask)


def _mean_pool_kv(w, n_heads, n_kv_heads):
    """group_kv_heads(method="mean") on a layer whose W_k holds w (a weight applied as x @ w, or a bias)."""
    d_head = w.shape[-1] // n_heads
    d_model = w.shape[0] if w.dim() == 2 else 1
    layer = mh.MultiHeadAttention(d_model, n_heads, d_head=d_head, bias=w.dim() == 1).to(w.dtype)
    with torch.no_grad():
        if w.dim() == 2:
            layer.W_k.weight.copy_(w.T)  # nn.Linear stores the transpose of the exercise's x @ w
        else:
            layer.W_k.bias.copy_(w)
    pooled = mh.group_kv_heads(layer, n_kv_heads, method="mean").W_k
    return (pooled.weight.T if w.dim() == 2 else pooled.bias).detach().clone()


# Where the package's function has another signature than the part's: its computation, adapted (part → {what: f}).
ADAPTERS: dict[str, dict[str, Callable]] = {
    "qk_circuits": {"analysis.circuits.qk_circuit per head": _qk_circuits},
    "head_scores": {"analysis.circuits.pair_scores of MultiHeadAttention": _head_scores},
    "multi_head_attention": {"MultiHeadAttention": _multi_head_attention},
    "ablate_heads": {"interventions.ablated on a one-layer model": _ablate_heads},
    "gate_importance": {"interventions.gate_importance on a model of gates": _gate_importance},
    "kv_cache_bytes": {"costs.head_budget": _head_budget_cache},
    "grouped_query_attention": {"MultiHeadAttention with n_kv_heads": _grouped_query_attention},
    "mean_pool_kv": {"models.kv_heads.group_kv_heads (mean) on one layer": _mean_pool_kv},
}


def resolve(dotted: str):
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


def _answers_the_part(function, part: CodePart) -> bool:
    """Whether a package function is the part's contract as it stands: its name (or the checks' reference_<name>),
    and the part's parameters first, any others with defaults."""
    if not inspect.isfunction(function) or function.__name__ not in (part.function, f"reference_{part.function}"):
        return False
    wanted = [p.split("=")[0].strip() for p in part.signature.split(",") if p.strip()]
    params = list(inspect.signature(function).parameters.values())
    return [p.name for p in params[: len(wanted)]] == wanted and all(
        p.default is not inspect.Parameter.empty for p in params[len(wanted) :]
    )


def _package(exercise: Exercise) -> dict[str, tuple[str, Callable]]:
    """{what: (part, function)}: each package function the description names that has the part's contract, then the
    adapted ones. Each must pass the part's visible check and hidden tests."""
    found: dict[str, tuple[str, Callable]] = {}
    for part in exercise.code_parts:
        for dotted in part.computed_by:
            function = resolve(dotted)
            if _answers_the_part(function, part):
                found[dotted.removeprefix("manyheads.")] = (part.function, function)
        found.update({what: (part.function, f) for what, f in ADAPTERS.get(part.function, {}).items()})
    return found


PACKAGE: dict[str, dict[str, tuple[str, Callable]]] = {e.stem: _package(e) for e in EXERCISES}

# The capstone has no code parts: no right or buggy answers to grade automatically, only its written prompts.
KNOWN["08_capstone"] = {"written_prompts": {"hypothesis": "refute", "design": "controls", "predictions": "refute"}}

NO_CASES = {"right": {}, "bugs": {}, "mixed": {}, "written_prompts": {}}
CASES: dict[str, dict] = {e.stem: {**NO_CASES, **KNOWN.get(e.stem, {})} for e in EXERCISES}


# ------------------------------------------------------------------------------------------------------------------
# What real nbgrader grades: submissions made from the cases above (each a release answered with the solution, then
# these answers replacing some parts).


@dataclass(frozen=True)
class Submission:
    answers: dict[str, str]  # {function: source}
    bugs: tuple[str, ...]  # the known bugs it contains, by name
    rights: tuple[str, ...]  # the correct alternatives it contains, by name
    zero: frozenset[str]  # the parts (functions) that must get no points


def _submission(case: dict, rights: tuple[str, ...], bugs: tuple[str, ...]) -> Submission:
    answers = {f: src for name in rights for f, src in case["right"][name].items()}
    answered_right = set(answers)
    for name in bugs:
        answers[case["bugs"][name].part] = case["bugs"][name].source
    zero = {case["bugs"][n].part for n in bugs} | {f for n in bugs for f in case["bugs"][n].also_fails} - answered_right
    return Submission(answers, bugs, rights, frozenset(zero))


def submissions(stem: str) -> dict[str, Submission]:
    """The exercise's nbgrader submissions by student id: each correct alternative on its own, each mixed case, and
    the known bugs packed into as few submissions as possible, no two of them touching the same part (so each bug's
    test cell fails for that bug alone)."""
    case = CASES[stem]
    packs: list[list[str]] = []
    for name, bug in case["bugs"].items():
        pack = next((p for p in packs if not any(case["bugs"][n].touches & bug.touches for n in p)), None)
        if pack is None:
            packs.append(pack := [])
        pack.append(name)
    found = {f"right{i}": _submission(case, (name,), ()) for i, name in enumerate(case["right"], 1)}
    for i, names in enumerate(case["mixed"].values(), 1):
        found[f"mixed{i}"] = _submission(
            case, tuple(n for n in names if n in case["right"]), tuple(n for n in names if n in case["bugs"])
        )
    found.update({f"bugs{i}": _submission(case, (), tuple(p)) for i, p in enumerate(packs, 1)})
    return found
