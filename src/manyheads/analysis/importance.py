"""How much each head matters to a task (chapter 5): Michel et al.'s gradient importance, leave-one-out, a random
order; and why a self-distillation loss ranks no head at all (:func:`self_distillation_gradient`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from manyheads import interventions
from manyheads.analysis.pruning_tasks import EncoderTask, ModelTask, PruningTask, alive_heads

__all__ = ["head_importance", "self_distillation_gradient"]

IMPORTANCE_METHODS = ("gradient", "loo", "random")


# --------------------------------------------------------------------------------------------- importance
def head_importance(
    task: PruningTask, method: str, gates: Tensor | None = None, seed: int = 0, normalize_layers: bool = False
) -> Tensor:
    """Importance of every head still on in ``gates`` (default: all on): (n_layers, n_heads); removed heads -inf.

    method "gradient": Michel et al.'s |∂loss/∂gate| at ``gates``, absolute value per batch of the task's loss,
    averaged over batches (optionally L2-normalised per layer, as Michel et al. do before ranking);
    "loo": leave-one-out, how much the task's loss rises when the head alone is removed (negative: removing it
    lowers the loss); "random": a seeded random score (a random pruning order).
    Low importance = pruned first.
    """
    if method not in IMPORTANCE_METHODS:
        raise ValueError(f"method must be one of {IMPORTANCE_METHODS}, got {method!r}")
    gates = task.ones() if gates is None else gates.detach().clone()
    alive = gates != 0
    if method == "random":
        scores = torch.rand(task.grid, generator=torch.Generator().manual_seed(seed))
    elif method == "gradient":
        total, n = torch.zeros(task.grid), 0
        for gate_leaf in [gates.clone().requires_grad_(True)]:
            for loss in task.loss_terms(gate_leaf):
                (grad,) = torch.autograd.grad(loss, gate_leaf)
                total += grad.abs().cpu()
                n += 1
        scores = total / max(n, 1)
        if normalize_layers:
            scores = scores / scores.norm(dim=1, keepdim=True).clamp_min(1e-30)
    else:
        heads = alive_heads(gates)
        base = float(task.loss_of(task.outputs(gates)))
        scores = torch.zeros(task.grid)
        for head, out in zip(heads, task.outputs_each_removed(gates, heads)):
            scores[head] = float(task.loss_of(out)) - base
    return scores.masked_fill(~alive, -math.inf)


# --------------------------------------------------------------------------------------------- why not distil
def self_distillation_gradient(task: EncoderTask | ModelTask) -> tuple[float, float]:
    """(largest |∂loss/∂gate| for a self-distillation loss, the same for the task's own loss), both at gates = 1.

    The self-distillation loss is the squared distance between the gated model's outputs and the unpruned model's
    own (detached) outputs. It is 0 at gates = 1 and never negative, so gates = 1 is a minimum and the gradient
    there is exactly 0: it ranks no head. The task's loss against human labels is not at a minimum, so its
    gradient is not 0 (chapter 5).
    """
    ones = task.ones()
    target = task.outputs(ones)
    gates = ones.clone().requires_grad_(True)
    if isinstance(task, EncoderTask):
        with torch.enable_grad():
            mine = task.outputs_from_embeddings(task.embeddings_with_grad(gates))
    else:
        with torch.enable_grad(), interventions.gated(task.model, gates):
            mine = task.output_fn(task.model(task.inputs))
    (distil,) = torch.autograd.grad(((mine - target.to(mine)) ** 2).sum(), gates)
    own = head_importance(task, "gradient")
    return float(distil.abs().max()), float(own.max())
