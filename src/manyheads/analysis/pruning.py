"""Pruning many heads, step by step (chapter 5): an iterative pruning curve read against the task's floor, and how
many heads can go within a tolerance (:func:`pruning_curve`, :func:`prunable_fraction`, :func:`prunable_interval`).
The tasks are in :mod:`~manyheads.analysis.pruning_tasks`, importance in :mod:`~manyheads.analysis.importance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from manyheads import interventions
from manyheads.analysis.importance import head_importance
from manyheads.analysis.pruning_tasks import PruningTask

__all__ = ["PruningCurve", "pruning_curve", "prunable_fraction", "prunable_interval", "pruned_per_layer"]


# --------------------------------------------------------------------------------------------- pruning curves
@dataclass
class PruningCurve:
    """An iterative pruning run (chapter 5).

    fractions: share of heads removed at each point (0 first); scores: the task's metric there.
    removed_at: (n_layers, n_heads) index of the point from which each head is gone (len(fractions) if never).
    """

    method: str
    fractions: list[float]
    scores: list[float]
    removed_at: Tensor
    seed: int = 0
    task: str = ""
    estimates: int = 0
    history: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)

    @property
    def base(self) -> float:
        return self.scores[0]

    @property
    def floor(self) -> float:
        """The score with every head removed (the curve's last point when it runs to 100 %), else NaN: what the
        task gives with no attention at all, the baseline the curve is read against."""
        return self.scores[-1] if self.fractions and self.fractions[-1] >= 1.0 - 1e-9 else math.nan

    def relative_scores(self, floor: float | None = None) -> list[float]:
        """Each score as the share of the gap between the floor (0) and the unpruned score (1) that is kept.

        ``floor`` defaults to :attr:`floor`. NaN throughout when the floor is not below the unpruned score: then
        removing every head does not hurt, and the task cannot show what heads are worth.
        """
        floor = self.floor if floor is None else floor
        gap = self.base - floor
        if not gap > 0:
            return [math.nan] * len(self.scores)
        return [(s - floor) / gap for s in self.scores]

    def mask_at(self, point: int) -> Tensor:
        """Keep-mask (bool (n_layers, n_heads)) of the heads still on at point ``point``."""
        return self.removed_at > point


def pruning_curve(
    task: PruningTask,
    method: str,
    step: float = 0.1,
    max_fraction: float = 1.0,
    reestimate_every: int = 1,
    seed: int = 0,
    normalize_layers: bool = False,
    initial: Tensor | None = None,
    importance_task: PruningTask | None = None,
    scored: dict[bytes, float] | None = None,
    keep_outputs: bool = False,
) -> PruningCurve:
    """Remove the least important ``step`` of all heads at a time, re-estimating importance (chapter 5).

    At point t the floor(t·step·n) least important heads are gated to 0 (:func:`manyheads.interventions.prune_mask`
    on the current importance, already removed heads ranked lowest) and the task's metric is measured.
    Importance (:func:`head_importance` with ``method``) is re-estimated on the pruned model every
    ``reestimate_every`` points (e.g. 2 for leave-one-out: every other step); in between the last ranking is reused.
    ``initial`` (n_layers, n_heads) replaces the first estimate, at full gates: e.g. a zero-ablation map's
    ``loss_delta``, which is leave-one-out importance already computed. ``importance_task`` (default: ``task``)
    estimates importance on other items than the ones scored, so the ranking is not fitted to the test items (the
    same model, e.g. a sentiment task's ``importance_task``). ``scored``, a dict shared by the curves of one task,
    scores identical gates once: every order starts with all heads and ends with none. Share it only between
    curves of the same task and an unchanged model. ``keep_outputs`` keeps the task's outputs at every point
    (``curve.outputs``, each scored afresh), for intervals over items (:func:`prunable_interval`). Works for any
    :class:`PruningTask`: the toy models, MiniLM and SmolLM2 alike.
    """
    if not 0 < step <= 1:
        raise ValueError(f"step must be in (0, 1], got {step}")
    if reestimate_every < 1:
        raise ValueError(f"reestimate_every must be >= 1, got {reestimate_every}")
    n_points = int(math.floor(max_fraction / step + 1e-9)) + 1
    gates = task.ones()
    removed_at = torch.full(task.grid, n_points, dtype=torch.long)
    fractions, scores, history, outputs = [], [], [], []
    importance, estimates = None, 0
    if initial is not None:
        if tuple(initial.shape) != task.grid:
            raise ValueError(f"initial importance must have shape {task.grid}, got {tuple(initial.shape)}")
        importance, estimates = initial.detach().float().clone(), 1
        history.append(importance.clone())
    for t in range(n_points):
        fraction = t * step
        if t > 0:
            if importance is None or (t > 1 and (t - 1) % reestimate_every == 0):
                importance = head_importance(
                    importance_task or task, method, gates, seed=seed, normalize_layers=normalize_layers
                )
                estimates += 1
                history.append(importance.clone())
            ranked = importance.masked_fill(gates == 0, -math.inf)
            keep = interventions.prune_mask(ranked, min(fraction, 1.0))
            newly = (~keep) & (gates != 0)
            removed_at[newly] = t
            gates = keep.float()
        fractions.append(float((gates == 0).float().mean()))
        key = None if scored is None else gates.bool().cpu().numpy().tobytes()  # gates are 0 or 1 here
        if keep_outputs:  # scored afresh, and the score shared with the curves that use the same ``scored``
            outputs.append(task.outputs(gates))
            score = task.metric(outputs[-1])
            if scored is not None:
                scored[key] = score
        elif scored is None:
            score = task.score(gates)
        else:
            if key not in scored:
                scored[key] = task.score(gates)
            score = scored[key]
        scores.append(score)
    return PruningCurve(method, fractions, scores, removed_at, seed, task.name, estimates, history, outputs)


def prunable_fraction(
    curve: PruningCurve, drop: float | None = None, floor: float | None = None, tolerance: float | None = None
) -> float:
    """The largest share of heads removed before the metric first falls more than ``drop`` below the unpruned score.

    Without ``floor``: ``drop`` is relative to the unpruned score (drop=0.05 for "within 5 %"), which says nothing
    when the task keeps most of its score with no heads at all. With ``floor`` (the score with every head removed,
    e.g. ``curve.floor``): ``drop`` is a share of the gap between the unpruned score and the floor ("within 10 % of
    what attention adds"); NaN when the floor is not below the unpruned score, since the task cannot show then how
    many heads can go (chapter 5). With ``tolerance`` instead of ``drop``: an absolute fall in the metric's own units
    (for :func:`next_token_task`, nats per token: 0.1 nats is a perplexity 1.105 times the unpruned one), which does
    not depend on how far below uniform guessing the floor happens to lie.
    """
    if (drop is None) == (tolerance is None):
        raise ValueError("give either drop (a share) or tolerance (an absolute fall of the metric), not both")
    if tolerance is not None:
        if tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {tolerance}")
        threshold = curve.base - tolerance
    elif floor is not None:
        gap = curve.base - floor
        if not gap > 0:
            return math.nan
        threshold = curve.base - drop * gap
    else:
        threshold = curve.base - drop * abs(curve.base)
    best = 0.0
    for fraction, score in zip(curve.fractions, curve.scores):
        if score < threshold:
            break
        best = fraction
    return best


def prunable_interval(
    task: PruningTask,
    curve: PruningCurve,
    drop: float | None = None,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    tolerance: float | None = None,
) -> tuple[float, float]:
    """A bootstrap interval over items for :func:`prunable_fraction` read against the floor (chapter 5).

    ``curve`` must keep its outputs (``pruning_curve(..., keep_outputs=True)``) and run to 100 %. Each of ``n_boot``
    seeded resamples of the task's items rescores every point of the curve (the same resample for all points, the
    floor included), and the share of heads removed before the score first falls ``drop`` of the way to the floor
    is read off the resampled curve (with ``tolerance``: before it first falls ``tolerance`` below the resampled
    unpruned score, as in :func:`prunable_fraction`). The pruning order stays as it was chosen: the interval says how
    much the reading depends on which items were scored, not how the ranking would change.
    """
    if not curve.outputs or len(curve.outputs) != len(curve.scores):
        raise ValueError("the curve has no outputs: make it with pruning_curve(..., keep_outputs=True)")
    if math.isnan(curve.floor):
        raise ValueError("the curve must run to 100 % of heads removed, where its floor is measured")
    generator = torch.Generator().manual_seed(seed)
    resamples = [torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot)]
    boot = task.bootstrap_metrics(curve.outputs, resamples)  # (points, n_boot)
    values = []
    for column in boot.T.tolist():
        resampled = PruningCurve(curve.method, curve.fractions, column, curve.removed_at)
        if tolerance is not None:
            values.append(prunable_fraction(resampled, tolerance=tolerance))
        else:
            values.append(prunable_fraction(resampled, drop, floor=resampled.floor))
    values = torch.tensor(values, dtype=torch.float64)
    values = values[~values.isnan()]
    if values.numel() == 0:
        return math.nan, math.nan
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(values, q).tolist()
    return low, high


def pruned_per_layer(curve: PruningCurve, fraction: float) -> Tensor:
    """How many heads of each layer are gone once ``fraction`` of all heads is removed: (n_layers,) int."""
    points = [t for t, f in enumerate(curve.fractions) if f <= fraction + 1e-9]
    return (~curve.mask_at(points[-1])).sum(1)
