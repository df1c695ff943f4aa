"""What a head can represent, measured: the head-count sweep and the low-rank bottleneck (chapter 3).

* **The head-count sweep** (:func:`sweep_configs`, :func:`run_head_sweep`): the chapter-1 model trained at one
  d_model with every head count that divides it, from one head to d_head = 1, over several seeds.
* **The low-rank bottleneck** (:func:`fit_attention_pattern`, :func:`random_attention_pattern`): how well a head of
  width d_head can reproduce a given n × n attention pattern (Bhojanapalli et al. 2020).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from manyheads.costs import divisors, head_dim, positive_int

__all__ = ["sweep_configs", "SweepRecord", "run_head_sweep", "random_attention_pattern", "fit_attention_pattern"]


def sweep_configs(
    d_model: int, seeds: tuple[int, ...] = (0, 1, 2), head_counts: list[int] | None = None
) -> list[tuple[int, int, int]]:
    """(n_heads, d_head, seed) for every head count (default: every divisor of d_model, 1 … d_model) and seed.

    Ordered by head count, then seed. Raises ``ValueError`` for a head count that does not divide d_model.
    """
    if not seeds:
        raise ValueError("the sweep needs at least one seed")
    counts = divisors(d_model) if head_counts is None else list(head_counts)
    return [(h, head_dim(d_model, h), seed) for h in counts for seed in seeds]


@dataclass(frozen=True)
class SweepRecord:
    """One trained model of the sweep: its configuration and final held-out accuracy per relation."""

    n_heads: int
    d_head: int
    seed: int
    accuracy: tuple[float, ...]
    final_loss: float  # mean training loss over the last 10 % of steps
    seconds: float

    @property
    def mean_accuracy(self) -> float:
        return sum(self.accuracy) / len(self.accuracy)


def run_head_sweep(
    task,
    d_model: int,
    config,
    seeds: tuple[int, ...] = (0, 1, 2),
    head_counts: list[int] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> list[SweepRecord]:
    """Train :class:`~manyheads.models.TinyAttentionModel` on ``task`` for every configuration of :func:`sweep_configs`.

    ``config`` is a :class:`~manyheads.training.TrainConfig` whose seed is replaced by each sweep seed. Everything
    else (d_model, data, steps) is the same for every head count, so the models differ only in how the width is
    split. One progress bar covers the whole sweep.
    """
    from manyheads.models.tiny import TinyAttentionModel
    from manyheads.training import train_grid

    configs = sweep_configs(d_model, seeds, head_counts)
    head_counts = list(dict.fromkeys(n_heads for n_heads, _, _ in configs))
    runs = train_grid(
        TinyAttentionModel.for_task,
        {h: (d_model, h) for h in head_counts},
        task,
        config,
        seeds,
        device=device,
        progress=progress,
        desc="head-count sweep",
    )
    records = []
    for n_heads, d_head, seed in configs:
        result = runs[n_heads, seed]
        tail = result.train_loss[-max(1, len(result.train_loss) // 10) :]
        records.append(
            SweepRecord(n_heads, d_head, seed, tuple(result.final_accuracy), sum(tail) / len(tail), result.seconds)
        )
    return records


# ----------------------------------------------------------------------------------------------------------------
# The low-rank bottleneck


def random_attention_pattern(seq_len: int, concentration: float = 0.5, seed: int = 0) -> Tensor:
    """A random (seq_len, seq_len) attention pattern: each row (query) a Dirichlet draw over the keys, all > 0.

    Small ``concentration`` gives peaked rows, large gives nearly uniform ones. float64.
    """
    seq_len = positive_int("seq_len", seq_len)
    if concentration <= 0:
        raise ValueError(f"concentration must be positive, got {concentration}")
    gen = torch.Generator().manual_seed(seed)
    gamma = torch._standard_gamma(torch.full((seq_len, seq_len), float(concentration), dtype=torch.float64), gen)
    pattern = gamma.clamp_min(1e-12)
    return pattern / pattern.sum(dim=-1, keepdim=True)


def fit_attention_pattern(x: Tensor, target: Tensor, d_head: int, steps: int = 300, seed: int = 0) -> dict[str, float]:
    """Fit one head's W_q, W_k (d_model × d_head each) so that softmax(x W_q (x W_k)ᵀ / √d_head) ≈ target.

    x: (seq, d_model) inputs; target: (seq, seq), each row a distribution over the keys. Minimises the mean
    KL(target row ‖ fitted row) with L-BFGS (at most ``steps`` iterations) in float64 from a seeded start, and
    returns ``kl`` (mean per query, nats), ``tv`` (mean total-variation distance per query, ½ Σ |p − p̂|, in [0, 1])
    and ``max_abs`` (largest error of a single weight). This is the experiment behind Bhojanapalli et al.'s theorem:
    with d_head ≥ seq and x of full rank every positive pattern can be reached; below that, most cannot.
    """
    if x.dim() != 2 or target.dim() != 2 or target.shape[0] != target.shape[1] or target.shape[0] != x.shape[0]:
        raise ValueError(
            f"x must be (seq, d_model) and target (seq, seq), got {tuple(x.shape)} and {tuple(target.shape)}"
        )
    d_head = positive_int("d_head", d_head)
    x, target = x.double(), target.double()
    gen = torch.Generator().manual_seed(seed)
    d_model = x.shape[1]
    w_q = (torch.randn(d_model, d_head, generator=gen, dtype=torch.float64) / math.sqrt(d_model)).requires_grad_()
    w_k = (torch.randn(d_model, d_head, generator=gen, dtype=torch.float64) / math.sqrt(d_model)).requires_grad_()
    # L-BFGS reaches machine-precision fits where they exist; Adam stalls around 1e-3 and blurs the threshold.
    optimizer = torch.optim.LBFGS(
        [w_q, w_k],
        lr=1,
        max_iter=steps,
        tolerance_grad=1e-12,
        tolerance_change=1e-14,
        history_size=20,
        line_search_fn="strong_wolfe",
    )
    log_target = torch.special.xlogy(target, target)

    def log_fit() -> Tensor:
        return torch.log_softmax((x @ w_q) @ (x @ w_k).T / math.sqrt(d_head), dim=-1)  # (seq_q, seq_k)

    def closure() -> Tensor:
        optimizer.zero_grad()
        kl = (log_target - target * log_fit()).sum(-1).mean()
        kl.backward()
        return kl

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads cost more than they save
    try:
        optimizer.step(closure)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        logs = log_fit()
        fit = logs.exp()
        kl = float((log_target - target * logs).sum(-1).mean())
    return {
        "kl": kl,
        "tv": 0.5 * float((fit - target).abs().sum(-1).mean()),
        "max_abs": float((fit - target).abs().max()),
    }
