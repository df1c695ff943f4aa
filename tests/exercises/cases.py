"""What is specific to each exercise, as data: correct alternative answers, the known bugs and how each is caught, and
the package's own computation of each part. Everything else about an exercise comes from its one description
(:data:`manyheads.course.exercises.EXERCISES`) and its notebooks.

:data:`CASES` and :data:`PACKAGE` have an entry for every exercise of the description: its hand-written cases
(:data:`KNOWN`, keyed by the exercise's stem, one file each in known_cases/; none needed) and the package's
functions that compute its parts (derived from the description's ``computed_by``, plus :data:`ADAPTERS` where the
package's signature differs).

Answers are source text, what a student types into an answer cell, so the same text feeds the visible checks and
hidden tests in this process, the released notebook run with nbclient, and real nbgrader. An answer replaces the
solution's answer cell of its part; the other parts keep the solution's.

Adding an exercise: its :class:`~manyheads.course.exercises.Exercise` entry and its notebook in solutions/ are
enough (every test then covers it, with wrong answers made from its solution: ``misses.py``); known bugs written in
its file of known_cases/ (at least one per part once there are any) make its tests sharper. No new test file.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from case_types import KNOWN, Bug  # noqa: F401  (Bug: the type every test reads the cases through)

import manyheads as mh
from manyheads.course.exercises import EXERCISES, CodePart, Exercise

# Every exercise's hand-written cases, one file each (known_cases/case_<stem>.py), each adding its own to KNOWN.
for _file in sorted((Path(__file__).parent / "known_cases").glob("case_*.py")):
    importlib.import_module(f"known_cases.{_file.stem}")


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
