"""Heads removed one at a time or in groups (chapter 5): the change of a task's score, with a paired bootstrap
interval over its items (:func:`ablation_map`, :func:`joint_ablation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from manyheads.analysis.multiple_tests import normal_p_values
from manyheads.analysis.pruning_tasks import PruningTask

__all__ = ["AblationMap", "ablation_map", "JointAblation", "joint_ablation"]


# --------------------------------------------------------------------------------------------- ablation maps
@dataclass
class AblationMap:
    """The change of a task's metric when each head alone is ablated (chapter 5). All tensors (n_layers, n_heads).

    delta: metric without the head minus metric with all heads (negative = the head helped).
    low, high: a bootstrap percentile interval of delta (items resampled; same resample for both runs).
    base: the metric with all heads; mode: "zero" or "mean"; level: the interval's coverage.
    se: the bootstrap standard error of delta, for p-values (:meth:`p_values`) and corrections over many heads.
    """

    delta: Tensor
    low: Tensor
    high: Tensor
    base: float
    mode: str
    level: float
    task: str = ""
    metric_name: str = ""
    loss_delta: Tensor | None = None
    se: Tensor | None = None

    @property
    def significant(self) -> Tensor:
        """Heads whose (uncorrected) interval excludes 0 (bool, (n_layers, n_heads)). Over 72 heads, about
        72·(1 - level) of them do so by chance alone: correct with :meth:`p_values` and
        :func:`manyheads.analysis.multiple_tests.holm` before calling any one of them real."""
        return (self.low > 0) | (self.high < 0)

    def p_values(self) -> Tensor:
        """Two-sided p-value of each head's delta against 0 (normal approximation with the bootstrap standard
        error): (n_layers, n_heads) float64."""
        if self.se is None:
            raise ValueError("this map has no bootstrap standard errors (se); make it with ablation_map")
        return normal_p_values(self.delta, self.se)

    @property
    def helpful_removals(self) -> list[tuple[int, int]]:
        """Heads whose removal raises the metric with the whole interval above 0, as (layer, head) pairs."""
        return [tuple(p) for p in (self.low > 0).nonzero().tolist()]


def ablation_map(
    task: PruningTask,
    mode: str = "zero",
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    means: Tensor | None = None,
) -> AblationMap:
    """Ablate every head alone (zero or mean ablation) and measure the change of the task's metric (chapter 5).

    The noise band is a paired bootstrap over items: ``n_boot`` resamples of the items (seeded), each scored with
    and without the head, give the interval of the difference. ``loss_delta`` holds the change of the task's loss,
    which is leave-one-out importance at full gates (for zero ablation).
    """
    gates = task.ones()
    if mode == "mean" and means is None:
        means = task.head_means()
    heads = [(layer, head) for layer in range(task.grid[0]) for head in range(task.grid[1])]
    base_out = task.outputs(gates)
    removed = task.outputs_each_removed(gates, heads, mode=mode, means=means)
    generator = torch.Generator().manual_seed(seed)
    resamples = [torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot)]
    boot = task.bootstrap_metrics([base_out, *removed], resamples).double()
    boot = boot[1:] - boot[:1]  # paired: each resample scored with and without the head
    se = boot.std(dim=1).float().reshape(task.grid)
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    bounds = torch.quantile(boot, q, dim=1).float()  # (2, n_heads_total)
    low, high = bounds[0].reshape(task.grid), bounds[1].reshape(task.grid)
    base = task.metric(base_out)
    base_loss = float(task.loss_of(base_out))
    delta = torch.tensor([task.metric(out) - base for out in removed]).reshape(task.grid)
    loss_delta = torch.tensor([float(task.loss_of(out)) - base_loss for out in removed]).reshape(task.grid)
    return AblationMap(delta, low, high, base, mode, level, task.name, task.metric_name, loss_delta, se)


# --------------------------------------------------------------------------------------------- joint ablation
@dataclass
class JointAblation:
    """Heads removed together against the sum of their removals one at a time (chapter 5). One entry per group.

    groups: the groups of (layer, head); joint: metric change with the whole group removed; additive: the sum of
    the group's single-head changes; interaction = joint - additive, with a paired bootstrap interval [low, high].
    An interaction below 0 (interval below 0) means the heads together cost more than their parts: each backs the
    others up, so that removing one alone shows little. Above 0: removing them together costs less than the parts.
    """

    groups: list[tuple[tuple[int, int], ...]]
    joint: Tensor
    additive: Tensor
    interaction: Tensor
    low: Tensor
    high: Tensor
    base: float
    level: float


def joint_ablation(
    task: PruningTask,
    groups: Sequence[Sequence[tuple[int, int]]],
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> JointAblation:
    """Zero-ablate each group of heads together, and each of its heads alone; compare (chapter 5).

    The interaction of a group is (score without the group - base) - sum over its heads of (score without the head -
    base): 0 when the heads' effects add up, negative when removing them together hurts more than the parts say
    (the heads back each other up). Its interval is a paired bootstrap over items (``n_boot`` seeded resamples,
    every output scored on the same resample).
    """
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("give at least one non-empty group of (layer, head) pairs")
    groups = [tuple((int(layer), int(head)) for layer, head in g) for g in groups]
    singles = sorted({head for g in groups for head in g})
    ones = task.ones()
    base_out = task.outputs(ones)
    single_out = dict(zip(singles, task.outputs_each_removed(ones, singles)))
    group_out = []
    for group in groups:
        gates = ones.clone()
        for head in group:
            gates[head] = 0.0
        group_out.append(task.outputs(gates))
    generator = torch.Generator().manual_seed(seed)
    resamples = [None, *(torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot))]
    outputs = [base_out, *(single_out[h] for h in singles), *group_out]
    full = torch.tensor([task.metric(out) for out in outputs], dtype=torch.float64)[:, None]
    boot = task.bootstrap_metrics(outputs, resamples[1:]).double()
    values = torch.cat([full, boot], dim=1)  # (n_outputs, 1 + n_boot): column 0 on all items
    change = values[1:] - values[:1]
    single_change = dict(zip(singles, change[: len(singles)]))
    joint = change[len(singles) :]
    additive = torch.stack([sum(single_change[h] for h in group) for group in groups])
    interaction = joint - additive
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(interaction[:, 1:], q, dim=1)
    return JointAblation(groups, joint[:, 0], additive[:, 0], interaction[:, 0], low, high, float(values[0, 0]), level)
