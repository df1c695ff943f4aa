"""The visible checks try every input form an exercise's spec allows and its hidden tests use.

For each such form there is a plausible answer that handles every other form but not this one: the visible check
must reject it with an ``AssertionError`` that names the form (so a student who passes the visible check never
loses hidden points on a form the check never tried). The reference answers in ``solutions/`` pass every check.
"""

from __future__ import annotations

import math
import re
import textwrap

import nbformat
import pytest
import torch
from helpers.nbgrader_course import ROOT

import manyheads as mh
from manyheads.course import release

EXERCISES = (
    "01_single_head_bottleneck",
    "02_subspaces",
    "03_head_size",
    "04_specialization",
    "05_pruning",
    "06_layer_hierarchy",
    "07_grouped_query_attention",
)
CHECKED = {  # exercise → the functions its visible checks take
    "01_single_head_bottleneck": ("softmax", "scaled_dot_product_attention", "attention_entropy"),
    "02_subspaces": ("qk_circuits", "head_scores", "principal_angles"),
    "03_head_size": ("head_dim", "split_heads", "merge_heads", "mha_param_count", "multi_head_attention"),
    "04_specialization": ("mean_attention_entropy", "offset_attention", "relation_accuracy"),
    "05_pruning": ("ablate_heads", "gate_importance", "prune_mask"),
    "06_layer_hierarchy": ("mean_attention_distance", "induction_score", "attention_rollout"),
    "07_grouped_query_attention": ("kv_cache_bytes", "repeat_kv", "grouped_query_attention", "mean_pool_kv"),
}


def _solution_namespace(exercise: str) -> dict:
    """Every answer cell of the exercise's nbgrader source, run in order (later answers may use earlier ones)."""
    nb = nbformat.read(ROOT / release.SOURCE_DIR / exercise / f"{exercise}.ipynb", as_version=4)
    namespace = {"torch": torch, "math": math, "mh": mh}
    for cell in nb.cells:
        grading = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and grading.get("solution") and not grading.get("grade"):
            exec(cell.source, namespace)  # noqa: S102 -- the course's own reference answers
    return namespace


def _define(source: str, name: str):
    """A student's answer, written as source text, as a function (with torch and math imported, as in the notebooks)."""
    namespace = {"torch": torch, "math": math}
    exec(textwrap.dedent(source), namespace)  # noqa: S102
    return namespace[name]


def _check(name: str):
    return getattr(mh.checks, f"check_{name}")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_reference_answers_pass_every_visible_check(exercise, capsys):
    namespace = _solution_namespace(exercise)
    for name in CHECKED[exercise]:
        _check(name)(namespace[name])
    assert capsys.readouterr().out.count("all visible checks passed") == len(CHECKED[exercise])


# ------------------------------------------------------------------------------------------------------------------
# (check, source of an answer that handles every other form, regex the AssertionError must match)

FORMS = {
    # ------------------------------------------------------------------------------------------- exercise 1
    "softmax: no leading axes (1-D scores)": (
        "softmax",
        """
        def softmax(scores):
            rows = scores.flatten(end_dim=-2)  # every leading axis into one
            e = (rows - rows.max(dim=1, keepdim=True).values).exp()
            return (e / e.sum(dim=1, keepdim=True)).reshape(scores.shape)
        """,
        r"1-D tensor of shape \(6,\)",
    ),
    "softmax: float32 scores": (
        "softmax",
        """
        def softmax(scores):
            safe = scores.masked_fill(torch.isinf(scores), -1e300)  # no inf - inf
            e = (safe - safe.max(dim=-1, keepdim=True).values).exp()
            return e / e.sum(dim=-1, keepdim=True)
        """,
        r"float32 scores",
    ),
    "attention: no leading axes (2-D q, k, v)": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            lead = q.shape[:-2]
            q3, k3, v3 = (t.flatten(0, -3) for t in (q, k, v))  # batched matrix products need 3-D
            scores = torch.bmm(q3, k3.transpose(1, 2)).reshape(*lead, q.shape[-2], k.shape[-2]) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            out = torch.bmm(weights.reshape(-1, q.shape[-2], k.shape[-2]), v3)
            return out.reshape(*lead, q.shape[-2], v.shape[-1]), weights
        """,
        r"2-D inputs with no leading axes",
    ),
    "attention: float32 inputs": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, -1e300)
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
        r"float32 inputs",
    ),
    "attention: a 3-D mask for 3-D inputs": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                if mask.dim() == 3:  # taken for (batch, seq_q, seq_k), to be broadcast over heads
                    mask = mask.unsqueeze(1)
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
        r"3-D mask of shape \(2, 3, 5\)",
    ),
    "attention: a 2-D mask for 4-D inputs": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                if mask.dim() == 2 and q.dim() == 4:  # "one mask per sequence"
                    mask = mask.expand(q.shape[0], *mask.shape)
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
        r"4-D inputs \(2, 3, seq, d\) with a 2-D \(3, 5\) mask",
    ),
    "attention: a leading axis of size 1": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = (q @ k.transpose(-2, -1)).squeeze() / math.sqrt(q.shape[-1])
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
        r"leading axes \(2, 1\) and a full mask",
    ),
    "attention: a (2, 1, q, k) mask broadcast over heads": (
        "scaled_dot_product_attention",
        """
        def scaled_dot_product_attention(q, k, v, mask=None):
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if mask is not None:
                if mask.dim() == 4 and mask.shape[-2] != 1:  # taken to have the weights' exact shape
                    mask = mask.reshape(scores.shape)
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
        r"\(2, 1, 3, 5\) mask that broadcasts over the heads",
    ),
    "entropy: 4-D weights": (
        "attention_entropy",
        """
        def attention_entropy(weights):
            terms = -torch.special.xlogy(weights, weights)
            return terms.sum(dim=1) if weights.dim() == 2 else terms.sum(dim=2)
        """,
        r"shape \(2, 3, 4, 6\)",
    ),
    "entropy: float32 weights": (
        "attention_entropy",
        """
        def attention_entropy(weights):
            return -(weights * weights.clamp(min=1e-300).log()).sum(dim=-1)
        """,
        r"float32 weights of shape \(2, 3, 4, 6\)",
    ),
    # ------------------------------------------------------------------------------------------- exercise 2
    "circuits: one head": (
        "qk_circuits",
        """
        def qk_circuits(w_q, w_k, n_heads):
            d = w_q.shape[0]
            q = w_q.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)
            k = w_k.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)
            return (q @ k.transpose(-2, -1)).squeeze()
        """,
        r"one head \(n_heads=1",
    ),
    "circuits: heads of width 1": (
        "qk_circuits",
        """
        def qk_circuits(w_q, w_k, n_heads):
            dh = w_q.shape[0] // n_heads
            cols = [slice(h * dh, (h + 1) * dh) for h in range(n_heads)]
            blocks = [(w_q[:, c].squeeze(), w_k[:, c].squeeze()) for c in cols]
            return torch.stack([a @ b.mT if a.dim() == 2 else a @ b for a, b in blocks])
        """,
        r"heads of width 1",
    ),
    "circuits: float32 weights": (
        "qk_circuits",
        """
        def qk_circuits(w_q, w_k, n_heads):
            d = w_q.shape[0]
            dh = d // n_heads
            out = torch.empty(n_heads, d, d, dtype=torch.float64)
            for h in range(n_heads):
                torch.matmul(w_q[:, h * dh:(h + 1) * dh], w_k[:, h * dh:(h + 1) * dh].T, out=out[h])
            return out
        """,
        r"float32 weights",
    ),
    "scores: a batch of one": (
        "head_scores",
        """
        def head_scores(x, w_q, w_k, n_heads):
            b, s, d = x.shape
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k = (x @ w_k).reshape(b, s, n_heads, dh).transpose(1, 2)
            return (q @ k.transpose(-2, -1) / math.sqrt(dh)).squeeze()
        """,
        r"a batch of one sequence",
    ),
    "scores: one head": (
        "head_scores",
        """
        def head_scores(x, w_q, w_k, n_heads):
            d = x.shape[-1]
            q = w_q.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)
            k = w_k.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)
            circuits = (q @ k.transpose(-2, -1)).squeeze()  # part 1's answer, squeezed
            return torch.einsum("bid,hde,bje->bhij", x, circuits, x) / math.sqrt(d // n_heads)
        """,
        r"one head, x \(2, 3, 5\)",
    ),
    "scores: heads of width 1": (
        "head_scores",
        """
        def head_scores(x, w_q, w_k, n_heads):
            dh = x.shape[-1] // n_heads
            cols = [slice(h * dh, (h + 1) * dh) for h in range(n_heads)]
            blocks = [(w_q[:, c].squeeze(), w_k[:, c].squeeze()) for c in cols]
            circuits = torch.stack([a @ b.mT if a.dim() == 2 else a @ b for a, b in blocks])
            return torch.einsum("bid,hde,bje->bhij", x, circuits, x) / math.sqrt(dh)
        """,
        r"heads of width 1",
    ),
    "scores: float32 inputs": (
        "head_scores",
        """
        def head_scores(x, w_q, w_k, n_heads):
            b, s, d = x.shape
            dh = d // n_heads
            q = (x.double() @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k = (x.double() @ w_k).reshape(b, s, n_heads, dh).transpose(1, 2)
            return q @ k.transpose(-2, -1) / math.sqrt(dh)
        """,
        r"float32 inputs",
    ),
    "angles: the wider subspace first": (
        "principal_angles",
        """
        def principal_angles(a, b):
            m = torch.linalg.qr(a)[0].T @ torch.linalg.qr(b)[0]
            cos2 = torch.linalg.eigvalsh(m @ m.T).flip(0).clamp(0.0, 1.0)  # one per column of a
            return torch.arccos(cos2.sqrt())
        """,
        r"the first subspace wider than the second",
    ),
    "angles: float32": (
        "principal_angles",
        """
        def principal_angles(a, b):
            qa, qb = torch.linalg.qr(a)[0], torch.linalg.qr(b.double())[0]
            return torch.arccos(torch.linalg.svdvals(qa.T @ qb).clamp(-1.0, 1.0))
        """,
        r"float32 a \(4, 2\) and b \(4, 2\)",
    ),
    # ------------------------------------------------------------------------------------------- exercise 3
    "head_dim: returns a float": (
        "head_dim",
        """
        def head_dim(d_model, n_heads):
            if not isinstance(d_model, int) or not isinstance(n_heads, int) or isinstance(d_model, bool) \\
                    or isinstance(n_heads, bool) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                raise ValueError("invalid")
            return d_model / n_heads
        """,
        r"head_dim\(1024, 16\) returned 64\.0, a float.*d_model // n_heads",
    ),
    "head_dim: accepts float arguments": (
        "head_dim",
        """
        def head_dim(d_model, n_heads):
            if d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                raise ValueError("invalid")
            return int(d_model // n_heads)
        """,
        r"head_dim\(1024\.0, 16\) returned 64, but should raise ValueError: d_model is a float",
    ),
    "head_dim: accepts a string": (
        "head_dim",
        """
        def head_dim(d_model, n_heads):
            if isinstance(d_model, float) or isinstance(n_heads, float):
                raise ValueError("whole numbers only")
            d_model, n_heads = int(d_model), int(n_heads)
            if d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                raise ValueError("invalid")
            return d_model // n_heads
        """,
        r"head_dim\('1024', 16\) returned 64, but should raise ValueError: d_model is a str",
    ),
    "head_dim: accepts a bool": (
        "head_dim",
        """
        def head_dim(d_model, n_heads):
            if not isinstance(d_model, int) or not isinstance(n_heads, int) or d_model <= 0 or n_heads <= 0:
                raise ValueError("both must be positive ints")
            if d_model % n_heads:
                raise ValueError("n_heads must divide d_model")
            return d_model // n_heads
        """,
        r"head_dim\(64, True\) returned 64, but should raise ValueError: n_heads is a bool",
    ),
    "split: numbers copied through float32": (
        "split_heads",
        """
        def split_heads(x, n_heads):
            b, s, d = x.shape
            dh = d // n_heads
            out = torch.zeros(b, n_heads, s, dh)
            for i in range(n_heads):
                out[:, i] = x[:, :, i * dh:(i + 1) * dh]
            return out
        """,
        r"split_heads changed the numbers for x of shape \(2, 6, 6\) in float64",
    ),
    "split: a batch of one": (
        "split_heads",
        """
        def split_heads(x, n_heads):
            b, s, d = x.shape
            return x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2).squeeze(0)
        """,
        r"one head and a batch of one",
    ),
    "split: one head": (
        "split_heads",
        """
        def split_heads(x, n_heads):
            b, s, d = x.shape
            return x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2).squeeze(1)
        """,
        r"one head and a batch of one",
    ),
    "split: heads of width 1": (
        "split_heads",
        """
        def split_heads(x, n_heads):
            b, s, d = x.shape
            return x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2).squeeze(-1)
        """,
        r"heads of width 1, x \(2, 3, 8\)",
    ),
    "split: a single position": (
        "split_heads",
        """
        def split_heads(x, n_heads):
            b, s, d = x.shape
            return x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2).squeeze(2)
        """,
        r"a single position, x \(3, 1, 6\)",
    ),
    "merge: numbers copied through float32": (
        "merge_heads",
        """
        def merge_heads(x):
            b, h, s, dh = x.shape
            out = torch.zeros(b, s, h * dh)
            for i in range(h):
                out[:, :, i * dh:(i + 1) * dh] = x[:, i]
            return out
        """,
        r"merge_heads changed the numbers for x of shape \(2, 3, 5, 4\) in float64",
    ),
    "merge: a batch of one": (
        "merge_heads",
        """
        def merge_heads(x):
            return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1).squeeze(0)
        """,
        r"one head and a batch of one",
    ),
    "merge: a single position": (
        "merge_heads",
        """
        def merge_heads(x):
            return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1).squeeze(1)
        """,
        r"one position and heads of width 1",
    ),
    "param count: bias by keyword": (
        "mha_param_count",
        """
        def mha_param_count(d_model, n_heads, biases=True):
            return 4 * d_model * d_model + (4 * d_model if biases else 0)
        """,
        r"bias=False\) \(keep the parameter name bias\)",
    ),
    "mha: a batch of one and one head, float32": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            out = (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o
            return out, weights.squeeze()
        """,
        r"a batch of one and one head, x \(1, 5, 6\) float32",
    ),
    "mha: heads of width 1": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2).squeeze(-1)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            out = (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o
            return out, weights
        """,
        r"heads of width 1, x \(3, 4, 6\)",
    ),
    "mha: a padding mask (batch, 1, 1, seq)": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                scores[..., ~mask] = float("-inf")
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a padding mask of shape \(2, 1, 1, 5\)",
    ),
    "mha: a (batch, 1, seq, seq) mask": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                if mask.dim() == 4:  # taken for a padding mask (batch, 1, 1, seq)
                    mask = mask.squeeze(1).squeeze(1)[:, None, None, :]
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a mask of shape \(2, 1, 5, 5\)",
    ),
    "mha: a (batch, n_heads, seq, seq) mask": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            d_head = x.shape[-1] // n_heads
            outputs, patterns = [], []
            for i in range(n_heads):
                cols = slice(i * d_head, (i + 1) * d_head)
                q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
                scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
                if mask is not None:
                    m = mask if mask.dim() < 4 else mask[:, 0]
                    scores = torch.where(m, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
                w = torch.softmax(scores, dim=-1)
                patterns.append(w)
                outputs.append(w @ v)
            return torch.cat(outputs, dim=-1) @ w_o, torch.stack(patterns, dim=1)
        """,
        r"a mask of shape \(2, 3, 5, 5\), one per head.*mask\[:, i\]",
    ),
    "mha: a 3-D (n_heads, seq, seq) mask": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                if mask.dim() == 3:  # taken for (batch, seq, seq)
                    mask = mask.unsqueeze(1)
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a 3-D mask of shape \(3, 5, 5\) = \(n_heads, seq, seq\)",
    ),
    "mha: a 3-D (1, seq, seq) mask": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            d_head = x.shape[-1] // n_heads
            outputs, patterns = [], []
            for i in range(n_heads):
                cols = slice(i * d_head, (i + 1) * d_head)
                q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
                scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
                if mask is not None:
                    if mask.dim() == 4:
                        m = mask.expand(x.shape[0], n_heads, *mask.shape[-2:])[:, i]
                    else:
                        m = mask[i] if mask.dim() == 3 else mask  # 3-D: taken for exactly one mask per head
                    scores = scores.masked_fill(~m, float("-inf"))
                w = torch.softmax(scores, dim=-1)
                patterns.append(w)
                outputs.append(w @ v)
            return torch.cat(outputs, dim=-1) @ w_o, torch.stack(patterns, dim=1)
        """,
        r"a 3-D mask of shape \(1, 5, 5\)",
    ),
    "mha: float32 with a mask": (
        "multi_head_attention",
        """
        def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
            b, s, d = x.shape
            split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
            q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
            if mask is not None:
                scores = scores.masked_fill(~mask, -1e300)
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"float32 inputs with a \(3, 1, 1, 4\) padding mask",
    ),
    # ------------------------------------------------------------------------------------------- exercise 4
    "mean entropy: a leading axis of size 1": (
        "mean_attention_entropy",
        """
        def mean_attention_entropy(weights):
            return (-torch.special.xlogy(weights, weights).sum(dim=-1).mean(dim=-1)).squeeze()
        """,
        r"weights of shape \(2, 1, 3, 5\) with zeros.*no squeeze",
    ),
    "mean entropy: float32": (
        "mean_attention_entropy",
        """
        def mean_attention_entropy(weights):
            return -(weights * weights.clamp(min=1e-300).log()).sum(dim=-1).mean(dim=-1)
        """,
        r"float32 weights of shape \(2, 1, 3, 5\)",
    ),
    "mean entropy: 3-D weights": (
        "mean_attention_entropy",
        """
        def mean_attention_entropy(weights):
            rows = -torch.special.xlogy(weights, weights)
            return rows.sum(dim=1).mean(dim=0) if weights.dim() == 2 else rows.sum(dim=3).mean(dim=2)
        """,
        r"3-D weights of shape \(2, 3, 5\)",
    ),
    "offset: more queries than keys": (
        "offset_attention",
        """
        def offset_attention(weights, offset):
            n = min(weights.shape[-2], weights.shape[-1])
            valid = [i for i in range(n) if 0 <= i + offset < weights.shape[-1]]
            return torch.stack([weights[..., i, i + offset] for i in valid], dim=-1).mean(dim=-1)
        """,
        r"more queries than keys, offset −3",
    ),
    "offset: no leading axes": (
        "offset_attention",
        """
        def offset_attention(weights, offset):
            flat = weights.flatten(0, -3)  # (heads, seq_q, seq_k)
            return flat.diagonal(offset=offset, dim1=1, dim2=2).mean(dim=-1).reshape(weights.shape[:-2])
        """,
        r"2-D weights \(4, 6\) with no leading axes",
    ),
    "offset: offset 0": (
        "offset_attention",
        """
        def offset_attention(weights, offset):
            seq_q, seq_k = weights.shape[-2:]
            if offset > 0:
                queries = range(0, min(seq_q, seq_k - offset))
            elif offset < 0:
                queries = range(-offset, min(seq_q, seq_k - offset))
            queries = list(queries)
            return weights[..., queries, [i + offset for i in queries]].mean(dim=-1)
        """,
        r"offset 0 \(the token itself\)",
    ),
    "relation accuracy: several layers": (
        "relation_accuracy",
        """
        def relation_accuracy(weights, arcs):
            w = weights[0]  # (n_heads, seq, seq)
            w = w.masked_fill(torch.eye(w.shape[-1], dtype=torch.bool), float("-inf"))
            predicted = w.argmax(dim=-1)
            hits = torch.stack([predicted[:, d] == h for d, h in arcs], dim=-1)
            return hits.float().mean(dim=-1).unsqueeze(0)
        """,
        r"three layers",
    ),
    "relation accuracy: a single arc": (
        "relation_accuracy",
        """
        def relation_accuracy(weights, arcs):
            deps, heads = torch.tensor(arcs).squeeze().t()
            w = weights.masked_fill(torch.eye(weights.shape[-1], dtype=torch.bool), float("-inf"))
            return (w.argmax(dim=-1)[..., deps] == heads).float().mean(dim=-1)
        """,
        r"a single arc",
    ),
    "relation accuracy: float32": (
        "relation_accuracy",
        """
        def relation_accuracy(weights, arcs):
            w = weights.masked_fill(torch.eye(weights.shape[-1], dtype=torch.bool), -1e300)
            deps = torch.tensor([d for d, _ in arcs])
            heads = torch.tensor([h for _, h in arcs])
            return (w.argmax(dim=-1)[..., deps] == heads).float().mean(dim=-1)
        """,
        r"float32 weights \(3, 2, 5, 5\)",
    ),
    # ------------------------------------------------------------------------------------------- exercise 5
    "ablate: a batch of one": (
        "ablate_heads",
        """
        def ablate_heads(head_outputs, keep, mode="zero", means=None):
            if mode not in ("zero", "mean") or keep.shape != head_outputs.shape[1:2]:
                raise ValueError("bad mode or keep")
            if mode == "mean" and (means is None or means.shape != (head_outputs.shape[1], head_outputs.shape[3])):
                raise ValueError("bad means")
            other = torch.zeros_like(head_outputs) if mode == "zero" else means[None, :, None, :]
            return torch.where(keep[None, :, None, None], head_outputs, other).squeeze(0)
        """,
        r"a batch of one, head_outputs \(1, 3, 4, 2\)",
    ),
    "ablate: one head": (
        "ablate_heads",
        """
        def ablate_heads(head_outputs, keep, mode="zero", means=None):
            if mode not in ("zero", "mean") or keep.shape != head_outputs.shape[1:2]:
                raise ValueError("bad mode or keep")
            if mode == "mean" and (means is None or means.shape != (head_outputs.shape[1], head_outputs.shape[3])):
                raise ValueError("bad means")
            other = torch.zeros_like(head_outputs) if mode == "zero" else means.squeeze()[None, :, None, :]
            return torch.where(keep[None, :, None, None], head_outputs, other)
        """,
        r"one head, head_outputs \(3, 1, 4, 2\)",
    ),
    "ablate: means given in mode zero": (
        "ablate_heads",
        """
        def ablate_heads(head_outputs, keep, mode="zero", means=None):
            if mode not in ("zero", "mean") or keep.shape != head_outputs.shape[1:2]:
                raise ValueError("bad mode or keep")
            if mode == "mean" and (means is None or means.shape != (head_outputs.shape[1], head_outputs.shape[3])):
                raise ValueError("bad means")
            other = torch.zeros_like(head_outputs) if means is None else means[None, :, None, :]
            return torch.where(keep[None, :, None, None], head_outputs, other)
        """,
        r"mode 'zero' with means given",
    ),
    "ablate: float32": (
        "ablate_heads",
        """
        def ablate_heads(head_outputs, keep, mode="zero", means=None):
            if mode not in ("zero", "mean") or keep.shape != head_outputs.shape[1:2]:
                raise ValueError("bad mode or keep")
            if mode == "mean" and (means is None or means.shape != (head_outputs.shape[1], head_outputs.shape[3])):
                raise ValueError("bad means")
            out = head_outputs.double().clone()  # computed in float64 for accuracy
            for h in range(keep.shape[0]):
                if not keep[h]:
                    out[:, h] = 0.0 if mode == "zero" else means[h].double()
            return out
        """,
        r"float32 head_outputs",
    ),
    "importance: a generator of batches": (
        "gate_importance",
        """
        def gate_importance(loss_fn, batches, shape):
            total = torch.zeros(shape)
            for batch in batches:
                gates = torch.ones(shape, requires_grad=True)
                total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
            return total / len(batches)
        """,
        r"a generator of 3 batches",
    ),
    "importance: 1-D gates": (
        "gate_importance",
        """
        def gate_importance(loss_fn, batches, shape):
            n_layers, n_heads = shape  # taken for (n_layers, n_heads)
            total, count = torch.zeros(n_layers, n_heads), 0
            for batch in batches:
                gates = torch.ones(n_layers, n_heads, requires_grad=True)
                total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
                count += 1
            return total / count
        """,
        r"gates of shape \(4,\)",
    ),
    "importance: (inputs, targets) batches": (
        "gate_importance",
        """
        def gate_importance(loss_fn, batches, shape):
            total, count = torch.zeros(shape), 0
            for batch in batches:
                inputs = batch[0] if isinstance(batch, tuple) else batch  # "the batch is its inputs"
                gates = torch.ones(shape, requires_grad=True)
                total += torch.autograd.grad(loss_fn(gates, inputs), gates)[0].abs()
                count += 1
            return total / count
        """,
        r"\(inputs, targets\) tuples",
    ),
    "prune: fraction 0": (
        "prune_mask",
        """
        def prune_mask(importance, fraction):
            if not 0 <= fraction <= 1:
                raise ValueError("fraction outside [0, 1]")
            flat = importance.flatten()
            k = math.floor(fraction * flat.numel())
            cut = flat.kthvalue(k).values  # the k-th smallest importance
            keep = flat >= cut
            ties = (flat == cut).nonzero().flatten()
            keep[ties[: k - int((flat < cut).sum())]] = False  # exactly k, also with ties
            return keep.reshape(importance.shape)
        """,
        r"fraction 0 \(nothing pruned\)",
    ),
    "prune: fraction 1": (
        "prune_mask",
        """
        def prune_mask(importance, fraction):
            if not 0 <= fraction <= 1:
                raise ValueError("fraction outside [0, 1]")
            n = importance.numel()
            k = math.floor(fraction * n)
            keep = torch.zeros(n, dtype=torch.bool)
            keep[torch.argsort(importance.flatten())[-(n - k):]] = True  # the n - k most important
            return keep.reshape(importance.shape)
        """,
        r"fraction 1 \(every head pruned\)",
    ),
    "prune: 1-D importance": (
        "prune_mask",
        """
        def prune_mask(importance, fraction):
            if not 0 <= fraction <= 1:
                raise ValueError("fraction outside [0, 1]")
            flat = importance.flatten(0, 1)  # (n_layers, n_heads) → one row of heads
            k = math.floor(fraction * importance.numel())
            keep = torch.ones(importance.numel(), dtype=torch.bool)
            keep[torch.argsort(flat.reshape(-1))[:k]] = False
            return keep.reshape(importance.shape)
        """,
        r"1-D importance \(7,\)",
    ),
    "prune: 3-D importance": (
        "prune_mask",
        """
        def prune_mask(importance, fraction):
            if not 0 <= fraction <= 1:
                raise ValueError("fraction outside [0, 1]")
            k = math.floor(fraction * importance.numel())
            keep = torch.ones(importance.numel(), dtype=torch.bool)
            keep[torch.argsort(importance.flatten())[:k]] = False
            return keep.reshape(importance.shape[0], -1) if importance.dim() > 1 else keep
        """,
        r"3-D importance \(2, 2, 3\)",
    ),
    "prune: ties": (
        "prune_mask",
        """
        def prune_mask(importance, fraction):
            if not 0 <= fraction <= 1:
                raise ValueError("fraction outside [0, 1]")
            k = math.floor(fraction * importance.numel())
            if k == 0:
                return torch.ones(importance.shape, dtype=torch.bool)
            return importance > importance.flatten().kthvalue(k).values
        """,
        r"tied importances",
    ),
    # ------------------------------------------------------------------------------------------- exercise 6
    "distance: a batch of one": (
        "mean_attention_distance",
        """
        def mean_attention_distance(weights):
            positions = torch.arange(weights.shape[-1])
            gaps = (positions[:, None] - positions[None, :]).abs().to(weights.dtype)
            return (weights * gaps).sum(dim=-1).mean(dim=-1).squeeze().mean(dim=0)
        """,
        r"a batch of one, weights \(1, 4, 6, 6\)",
    ),
    "distance: one head": (
        "mean_attention_distance",
        """
        def mean_attention_distance(weights):
            positions = torch.arange(weights.shape[-1])
            gaps = (positions[:, None] - positions[None, :]).abs().to(weights.dtype)
            return (weights * gaps).sum(dim=-1).mean(dim=(0, 2)).squeeze()
        """,
        r"one head, weights \(3, 1, 5, 5\)",
    ),
    "distance: a single token": (
        "mean_attention_distance",
        """
        def mean_attention_distance(weights):
            seq = weights.shape[-1]
            # the keys k tokens away lie on the k-th diagonals below and above the main one (distance 0 adds nothing)
            per_offset = [
                k * (weights.diagonal(-k, -2, -1).sum(-1) + weights.diagonal(k, -2, -1).sum(-1)) for k in range(1, seq)
            ]
            return torch.stack(per_offset).sum(dim=0).mean(dim=0) / seq
        """,
        r"a single token, weights \(2, 3, 1, 1\)",
    ),
    "distance: keys after the query": (
        "mean_attention_distance",
        """
        def mean_attention_distance(weights):
            positions = torch.arange(weights.shape[-1])
            gaps = (positions[:, None] - positions[None, :]).clamp(min=0).to(weights.dtype)  # decoders look back
            return (weights * gaps).sum(dim=-1).mean(dim=(0, 2))
        """,
        r"bidirectional weights \(batch 2, n_heads 3, seq 5\)",
    ),
    "distance: float32": (
        "mean_attention_distance",
        """
        def mean_attention_distance(weights):
            positions = torch.arange(weights.shape[-1], dtype=torch.float64)
            gaps = (positions[:, None] - positions[None, :]).abs()
            return torch.einsum("bhij,ij->bhi", weights, gaps).mean(dim=(0, 2))
        """,
        r"float32 weights \(2, 3, 6, 6\)",
    ),
    "induction: a batch of one": (
        "induction_score",
        """
        def induction_score(weights, half):
            if weights.shape[-1] != 2 * half + 1:
                raise ValueError("seq must be 2 * half + 1")
            queries = torch.arange(half + 1, 2 * half + 1)
            return weights.squeeze()[..., queries, queries - half + 1].mean(dim=-1).mean(dim=0)
        """,
        r"a batch of one, weights \(1, 4, 9, 9\)",
    ),
    "induction: one head": (
        "induction_score",
        """
        def induction_score(weights, half):
            if weights.shape[-1] != 2 * half + 1:
                raise ValueError("seq must be 2 * half + 1")
            queries = torch.arange(half + 1, 2 * half + 1)
            return weights[..., queries, queries - half + 1].mean(dim=(0, 2)).squeeze()
        """,
        r"one head, weights \(3, 1, 7, 7\)",
    ),
    "induction: float32": (
        "induction_score",
        """
        def induction_score(weights, half):
            seq = weights.shape[-1]
            if seq != 2 * half + 1:
                raise ValueError("seq must be 2 * half + 1")
            target = torch.zeros(seq, seq, dtype=torch.float64)  # 1 where query i meets key i - half + 1
            for i in range(half + 1, seq):
                target[i, i - half + 1] = 1.0
            return torch.einsum("bhij,ij->bh", weights, target).mean(dim=0) / half
        """,
        r"float32 weights \(2, 2, 13, 13\), half 6",
    ),
    "rollout: a single layer": (
        "attention_rollout",
        """
        def attention_rollout(weights):
            eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
            mixes = 0.5 * weights.mean(dim=2) + 0.5 * eye  # (n_layers, batch, seq, seq)
            rollout = mixes[1] @ mixes[0]
            for mix in mixes[2:]:
                rollout = mix @ rollout
            return rollout
        """,
        r"a single layer, weights \(1, 2, 3, 5, 5\)",
    ),
    "rollout: a batch of one": (
        "attention_rollout",
        """
        def attention_rollout(weights):
            eye = torch.eye(weights.shape[-1], dtype=weights.dtype)
            rollout = eye
            for layer in weights:
                rollout = (0.5 * layer.mean(dim=1, keepdim=True).squeeze() + 0.5 * eye) @ rollout
            return rollout
        """,
        r"a batch of one, weights \(2, 1, 3, 5, 5\)",
    ),
    "rollout: float32": (
        "attention_rollout",
        """
        def attention_rollout(weights):
            seq = weights.shape[-1]
            eye = torch.eye(seq, dtype=torch.float64)
            rollout = eye.expand(weights.shape[1], seq, seq)
            for layer in weights:
                rollout = torch.lerp(layer.mean(dim=1), eye, 0.5) @ rollout  # halfway between the heads' mean and I
            return rollout
        """,
        r"float32 weights \(3, 2, 2, 5, 5\)",
    ),
    # ------------------------------------------------------------------------------------------- exercise 7
    "kv cache: a positional call": (
        "kv_cache_bytes",
        """
        def kv_cache_bytes(*, n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
            return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element
        """,
        r"kv_cache_bytes\(32, 32, 128, 4096, 8, 2\)",
    ),
    "kv cache: the defaults": (
        "kv_cache_bytes",
        """
        def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
            return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element
        """,
        r"kv_cache_bytes\(80, 8, 128, 4096\)",
    ),
    "kv cache: sizes beyond 2**31": (
        "kv_cache_bytes",
        """
        def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2):
            total = torch.ones((), dtype=torch.int32)
            for size in (2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
                total = total * size
            return int(total)
        """,
        r"overflowed 32-bit integers",
    ),
    "repeat_kv: a batch of one": (
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            return torch.stack([x] * n_rep, dim=2).flatten(1, 2).squeeze(0)
        """,
        r"a batch of one",
    ),
    "repeat_kv: float32": (
        "repeat_kv",
        """
        def repeat_kv(x, n_rep):
            out = torch.zeros(x.shape[0], x.shape[1] * n_rep, *x.shape[2:], dtype=torch.float64)
            for h in range(out.shape[1]):
                out[:, h] = x[:, h // n_rep]
            return out
        """,
        r"float32",
    ),
    "gqa: a padding mask (batch, 1, 1, seq)": (
        "grouped_query_attention",
        """
        def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
            b, s, d = x.shape
            if d % n_heads or n_heads % n_kv_heads:
                raise ValueError("invalid head counts")
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k, v = ((x @ w).reshape(b, s, n_kv_heads, dh).transpose(1, 2) for w in (w_k, w_v))
            k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
            if mask is not None:
                scores[..., ~mask] = float("-inf")
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a padding mask of shape \(3, 1, 1, 5\)",
    ),
    "gqa: a (batch, 1, seq, seq) mask": (
        "grouped_query_attention",
        """
        def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
            b, s, d = x.shape
            if d % n_heads or n_heads % n_kv_heads:
                raise ValueError("invalid head counts")
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k, v = ((x @ w).reshape(b, s, n_kv_heads, dh).transpose(1, 2) for w in (w_k, w_v))
            k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
            if mask is not None:
                if mask.dim() == 4:  # taken for a padding mask (batch, 1, 1, seq)
                    mask = mask.squeeze(1).squeeze(1)[:, None, None, :]
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a mask of shape \(2, 1, 5, 5\)",
    ),
    "gqa: a (batch, n_heads, seq, seq) mask": (
        "grouped_query_attention",
        """
        def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
            b, s, d = x.shape
            if d % n_heads or n_heads % n_kv_heads:
                raise ValueError("invalid head counts")
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k, v = ((x @ w).reshape(b, s, n_kv_heads, dh).transpose(1, 2) for w in (w_k, w_v))
            k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
            if mask is not None:
                scores = scores.masked_fill(~(mask if mask.dim() < 4 else mask[:, :1]), float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"a mask of shape \(2, 4, 5, 5\), one per query head",
    ),
    "gqa: a batch of one": (
        "grouped_query_attention",
        """
        def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
            b, s, d = x.shape
            if d % n_heads or n_heads % n_kv_heads:
                raise ValueError("invalid head counts")
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k, v = ((x @ w).reshape(b, s, n_kv_heads, dh).transpose(1, 2) for w in (w_k, w_v))
            k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d).squeeze(0) @ w_o, weights
        """,
        r"a batch of one",
    ),
    "gqa: float32 with a mask": (
        "grouped_query_attention",
        """
        def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):
            b, s, d = x.shape
            if d % n_heads or n_heads % n_kv_heads:
                raise ValueError("invalid head counts")
            dh = d // n_heads
            q = (x @ w_q).reshape(b, s, n_heads, dh).transpose(1, 2)
            k, v = ((x @ w).reshape(b, s, n_kv_heads, dh).transpose(1, 2) for w in (w_k, w_v))
            k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=1) for t in (k, v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
            if mask is not None:
                scores = scores.masked_fill(~mask, -1e300)
            weights = torch.softmax(scores, dim=-1)
            return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights
        """,
        r"float32 inputs with a \(3, 1, 1, 4\) padding mask",
    ),
    "pool: a bias": (
        "mean_pool_kv",
        """
        def mean_pool_kv(w, n_heads, n_kv_heads):
            if n_heads % n_kv_heads:
                raise ValueError("n_kv_heads must divide n_heads")
            rows, width = w.shape
            d_head = width // n_heads
            return w.reshape(rows, n_kv_heads, n_heads // n_kv_heads, d_head).mean(dim=2).reshape(rows, -1)
        """,
        r"a bias of shape \(12,\)",
    ),
    "pool: float32": (
        "mean_pool_kv",
        """
        def mean_pool_kv(w, n_heads, n_kv_heads):
            if n_heads % n_kv_heads:
                raise ValueError("n_kv_heads must divide n_heads")
            blocks = w.double().unflatten(-1, (n_kv_heads, n_heads // n_kv_heads, -1))
            return blocks.mean(dim=-2).flatten(-2)
        """,
        r"float32",
    ),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_an_answer_that_misses_one_form_fails_the_visible_check_with_a_message_naming_it(form):
    name, source, message = FORMS[form]
    student = _define(source, name)
    with pytest.raises(AssertionError, match=message) as failure:
        _check(name)(student)
    assert "NotImplementedError" not in str(failure.value)


def test_every_check_with_added_forms_has_an_answer_that_misses_each():
    covered = {name for name, _, _ in FORMS.values()}
    assert covered == {name for names in CHECKED.values() for name in names}


def test_a_float_returning_head_dim_fails_the_visible_check_and_the_hidden_tests():
    student = _define(
        """
        def head_dim(d_model, n_heads):
            if not isinstance(d_model, int) or not isinstance(n_heads, int) or isinstance(d_model, bool) \\
                    or isinstance(n_heads, bool) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                raise ValueError("invalid")
            return d_model / n_heads
        """,
        "head_dim",
    )
    with pytest.raises(AssertionError, match=r"returned 64\.0, a float"):
        mh.checks.check_head_dim(student)
    hidden = _hidden_tests("03_head_size", "test_head_dim")
    with pytest.raises(AssertionError, match=r"returned 64\.0, a float"):
        exec(hidden, {"torch": torch, "math": math, "mh": mh, "head_dim": student})  # noqa: S102


def test_the_hidden_head_dim_tests_refuse_non_int_arguments():
    hidden = _hidden_tests("03_head_size", "test_head_dim")
    for bad in ("isinstance(d_model, int)", "isinstance(d_model, int) and not isinstance(d_model, bool)"):
        # an answer that checks d_model's type but not n_heads' (or forgets bool) must lose the point
        student = _define(
            f"""
            def head_dim(d_model, n_heads):
                if not ({bad}) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                    raise ValueError("invalid")
                return int(d_model // n_heads)
            """,
            "head_dim",
        )
        with pytest.raises(AssertionError, match=r"expected a ValueError"):
            exec(hidden, {"torch": torch, "math": math, "mh": mh, "head_dim": student})  # noqa: S102
    namespace = _solution_namespace("03_head_size")
    exec(hidden, {**namespace})  # noqa: S102 -- the reference passes


def _hidden_tests(exercise: str, grade_id: str) -> str:
    """The hidden part of one autograded test cell (what nbgrader restores at grading time)."""
    nb = nbformat.read(ROOT / release.SOURCE_DIR / exercise / f"{exercise}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    match = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
    return match.group(1)
