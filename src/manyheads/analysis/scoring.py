"""How chapter 5's tasks score and fit (:mod:`~manyheads.analysis.pruning_tasks`): Spearman's rank correlation,
1 − Pearson's r as a loss that depends on the gates, and a closed-form ridge regression.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["spearman", "correlation_loss", "fit_ridge"]


# --------------------------------------------------------------------------------------------- statistics
def _ranks(x: Tensor) -> Tensor:
    """Ranks 1..n of a 1-D tensor, ties given their average rank (as scipy.stats.rankdata)."""
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    ranks = torch.empty_like(x, dtype=torch.float64)
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    average = ends - (counts.to(torch.float64) - 1) / 2  # mean of the ranks start..end of each run of ties
    ranks[order] = average[inverse]
    return ranks


def weighted_ranks(x: Tensor, weight: Tensor) -> Tensor:
    """Average ranks of a 1-D tensor whose entry k stands for weight[k] equal copies (ties share their mean rank)."""
    order = torch.argsort(x, stable=True)
    _, inverse, _ = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    group_weight = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).index_add_(0, inverse, weight[order])
    before = torch.cumsum(group_weight, 0) - group_weight
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = (before + (group_weight + 1) / 2)[inverse]
    return ranks


def weighted_row_ranks(x: Tensor, weight: Tensor) -> Tensor:
    """weighted_ranks of each row of x (rows, n), for continuous values (no ties between different entries)."""
    order = torch.argsort(x, dim=1)
    w = weight[order]
    return torch.empty_like(x, dtype=torch.float64).scatter_(1, order, torch.cumsum(w, 1) - w + (w + 1) / 2)


def spearman(x: Tensor, y: Tensor) -> float:
    """Spearman's rank correlation of two 1-D tensors of equal length (ties get average ranks)."""
    x, y = x.detach().reshape(-1), y.detach().reshape(-1)
    if x.shape != y.shape or x.numel() < 2:
        raise ValueError(
            f"spearman needs two 1-D tensors of the same length >= 2, got {tuple(x.shape)}, {tuple(y.shape)}"
        )
    rx, ry = _ranks(x.cpu()), _ranks(y.cpu())
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = (rx.norm() * ry.norm()).item()
    return float((rx @ ry).item() / denominator) if denominator > 0 else float("nan")


def correlation_loss(x: Tensor, y: Tensor) -> Tensor:
    """1 − Pearson's r between two 1-D tensors: a differentiable loss that, like a rank correlation, ignores the
    level and the scale of ``x`` (adding a constant to every value, or multiplying them by a positive one, leaves it
    unchanged). 0 when ``x`` is a rising linear function of ``y``, 1 when unrelated, 2 when reversed."""
    if x.dim() != 1 or x.shape != y.shape or x.numel() < 2:
        raise ValueError(
            f"correlation_loss needs two 1-D tensors of the same length >= 2, got {tuple(x.shape)}, {tuple(y.shape)}"
        )
    xc, yc = x - x.mean(), y.to(x) - y.to(x).mean()
    return 1 - (xc @ yc) / (xc.norm() * yc.norm()).clamp_min(torch.finfo(x.dtype).tiny)


def fit_ridge(features: Tensor, targets: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Ridge regression with an intercept: ``(weight (d,), bias ())`` minimising |Xw + b - y|² + alpha·|w|².

    features: (n, d); targets: (n,). Solved in float64 in closed form on the features' device (targets are moved
    there); the intercept is not penalised.
    """
    if features.dim() != 2 or targets.shape != features.shape[:1]:
        raise ValueError(
            f"fit_ridge needs features (n, d) and targets (n,), got {tuple(features.shape)}, {tuple(targets.shape)}"
        )
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    x, y = features.detach().double(), targets.detach().double().to(features.device)
    x_mean, y_mean = x.mean(0), y.mean()
    xc = x - x_mean
    gram = xc.T @ xc + alpha * torch.eye(x.shape[1], dtype=torch.float64, device=x.device)
    weight = torch.linalg.solve(gram, xc.T @ (y - y_mean))
    bias = y_mean - x_mean @ weight
    return weight.to(features.dtype), bias.to(features.dtype)
