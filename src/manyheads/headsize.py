"""Head size d_head = d_model / n_heads: what it costs and what it limits (chapter 3).

Three groups of tools, each used by chapter 3 and its exercise:

* **Budget formulas** (:func:`head_dim`, :func:`mha_param_count`, :func:`attention_flops`,
  :func:`attention_matrix_bytes`, :func:`kv_cache_bytes`, :func:`head_budget`): the cost of one multi-head attention
  layer as a function of d_model, n_heads, n_kv_heads (grouped-query attention, chapter 7) and the sequence length.
  Invalid combinations raise ``ValueError`` with a message that says what would be valid.
* **The head-count sweep** (:func:`sweep_configs`, :func:`run_head_sweep`): the chapter-1 model trained at one
  d_model with every head count that divides it, from one head to d_head = 1, over several seeds.
* **The low-rank bottleneck** (:func:`fit_attention_pattern`, :func:`random_attention_pattern`): how well a head of
  width d_head can reproduce a given n × n attention pattern (Bhojanapalli et al. 2020).

Conventions: FLOPs count a multiply-add as 2 operations; "attention matrix" means the (batch, n_heads, seq, seq)
weights a layer materialises when it does not use a fused kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "divisors",
    "head_dim",
    "mha_param_count",
    "attention_flops",
    "attention_matrix_bytes",
    "kv_cache_bytes",
    "HeadBudget",
    "head_budget",
    "sweep_configs",
    "SweepRecord",
    "run_head_sweep",
    "random_attention_pattern",
    "fit_attention_pattern",
]


def _positive_int(name: str, value: object) -> int:
    # bool is an int subclass, but head_dim(True, True) is surely a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            as_int = int(value)  # numpy and torch integers, integer-valued floats
            ok = not isinstance(value, bool) and as_int == value
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        value = as_int
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order: the head counts a width of ``n`` can be split into."""
    n = _positive_int("n", n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def head_dim(d_model: int, n_heads: int) -> int:
    """d_head = d_model / n_heads (chapter 3), e.g. ``head_dim(1024, 16) == 64``.

    Raises ``ValueError`` when either is not a positive integer or n_heads does not divide d_model; the message
    lists the head counts that would work.
    """
    d_model, n_heads = _positive_int("d_model", d_model), _positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(
            f"n_heads={n_heads} does not divide d_model={d_model}, so the heads cannot share the width equally; "
            f"valid head counts for d_model={d_model} are {divisors(d_model)}"
        )
    return d_model // n_heads


def _kv_heads(n_heads: int, n_kv_heads: int | None) -> int:
    if n_kv_heads is None:
        return n_heads
    n_kv_heads = _positive_int("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(
            f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}: each key/value head must serve the same "
            f"number of query heads; valid values are {divisors(n_heads)} (1 = multi-query, {n_heads} = multi-head)"
        )
    return n_kv_heads


def mha_param_count(d_model: int, n_heads: int, bias: bool = True, n_kv_heads: int | None = None) -> int:
    """Parameters of one attention layer with d_head = d_model / n_heads (chapter 3).

    W_q and W_o are (d_model, d_model); W_k and W_v are (d_model, n_kv_heads·d_head), which is (d_model, d_model)
    for ordinary multi-head attention (n_kv_heads = n_heads, the default). With n_kv_heads = n_heads the result is
    4·d_model² (+ 4·d_model biases) whatever n_heads is.
    """
    d_head = head_dim(d_model, n_heads)
    kv_width = _kv_heads(n_heads, n_kv_heads) * d_head
    weights = 2 * d_model * d_model + 2 * d_model * kv_width
    biases = 2 * d_model + 2 * kv_width if bias else 0
    return weights + biases


def attention_flops(
    d_model: int, n_heads: int, seq_len: int, n_kv_heads: int | None = None, batch: int = 1
) -> dict[str, int]:
    """Floating-point operations of one self-attention layer's forward pass (a multiply-add counts 2).

    Returns a dict with ``projections`` (the four linear maps), ``scores`` (q·kᵀ for every head), ``weighted_sum``
    (weights @ v for every head), ``softmax`` (scaling, max-subtraction, exp, sum and division: 5 element-wise
    operations per score) and ``total``. The matrix products do not depend on n_heads; only the softmax, which
    runs over n_heads·seq² scores, grows with it.
    """
    d_head = head_dim(d_model, n_heads)
    seq_len, batch = _positive_int("seq_len", seq_len), _positive_int("batch", batch)
    kv_width = _kv_heads(n_heads, n_kv_heads) * d_head
    projections = 2 * batch * seq_len * d_model * (2 * d_model + 2 * kv_width)
    scores = 2 * batch * n_heads * seq_len * seq_len * d_head
    weighted_sum = 2 * batch * n_heads * seq_len * seq_len * d_head
    softmax = 5 * batch * n_heads * seq_len * seq_len
    flops = {"projections": projections, "scores": scores, "weighted_sum": weighted_sum, "softmax": softmax}
    return {**flops, "total": sum(flops.values())}


def attention_matrix_bytes(n_heads: int, seq_len: int, batch: int = 1, bytes_per_element: int = 4) -> int:
    """Memory for the (batch, n_heads, seq, seq) attention weights of one layer: it grows linearly with n_heads."""
    n_heads, seq_len = _positive_int("n_heads", n_heads), _positive_int("seq_len", seq_len)
    batch, size = _positive_int("batch", batch), _positive_int("bytes_per_element", bytes_per_element)
    return batch * n_heads * seq_len * seq_len * size


def kv_cache_bytes(
    n_kv_heads: int, d_head: int, seq_len: int, batch: int = 1, n_layers: int = 1, bytes_per_element: int = 2
) -> int:
    """Memory a decoder keeps for past keys and values: 2 · layers · batch · seq · n_kv_heads · d_head elements.

    The default of 2 bytes per element is 16-bit floats, as served models usually store their cache (chapter 7).
    """
    values = [_positive_int(name, v) for name, v in (("n_kv_heads", n_kv_heads), ("d_head", d_head),
              ("seq_len", seq_len), ("batch", batch), ("n_layers", n_layers), ("bytes_per_element", bytes_per_element))]
    n_kv_heads, d_head, seq_len, batch, n_layers, size = values
    return 2 * n_layers * batch * seq_len * n_kv_heads * d_head * size


@dataclass(frozen=True)
class HeadBudget:
    """Everything the head-budget explorer shows for one configuration (one layer unless ``n_layers`` says more)."""

    d_model: int
    n_heads: int
    n_kv_heads: int
    seq_len: int
    d_head: int
    params: int
    flops: int
    softmax_flops: int
    attention_matrix_bytes: int
    kv_cache_bytes: int
    low_rank_bottleneck: bool  # d_head < seq_len: some n × n patterns cannot be represented (Bhojanapalli et al.)


def head_budget(
    d_model: int,
    n_heads: int,
    n_kv_heads: int | None = None,
    seq_len: int = 512,
    batch: int = 1,
    bias: bool = True,
    n_layers: int = 1,
    attention_bytes: int = 4,
    cache_bytes: int = 2,
) -> HeadBudget:
    """The cost of one attention configuration (chapter 3's explorer). Raises ``ValueError`` for invalid ones."""
    d_head = head_dim(d_model, n_heads)
    n_kv = _kv_heads(n_heads, n_kv_heads)
    layers = _positive_int("n_layers", n_layers)
    flops = attention_flops(d_model, n_heads, seq_len, n_kv, batch)
    return HeadBudget(
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        seq_len=seq_len,
        d_head=d_head,
        params=layers * mha_param_count(d_model, n_heads, bias, n_kv),
        flops=layers * flops["total"],
        softmax_flops=layers * flops["softmax"],
        attention_matrix_bytes=layers * attention_matrix_bytes(n_heads, seq_len, batch, attention_bytes),
        kv_cache_bytes=kv_cache_bytes(n_kv, d_head, seq_len, batch, layers, cache_bytes),
        low_rank_bottleneck=d_head < seq_len,
    )


# ----------------------------------------------------------------------------------------------------------------
# The head-count sweep


def sweep_configs(d_model: int, seeds: tuple[int, ...] = (0, 1, 2), head_counts: list[int] | None = None) -> list[tuple[int, int, int]]:
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
    from dataclasses import replace

    from tqdm.auto import tqdm

    from manyheads.models import TinyAttentionModel
    from manyheads.training import train

    records = []
    configs = sweep_configs(d_model, seeds, head_counts)
    for n_heads, d_head, seed in tqdm(configs, desc="head-count sweep", disable=not progress, leave=False):
        def make(n_heads=n_heads):
            return TinyAttentionModel(task.vocab_size, task.seq_len, d_model, n_heads, n_relations=task.n_relations)

        result = train(make, task, replace(config, seed=seed), device=device, progress=False)
        tail = result.train_loss[-max(1, len(result.train_loss) // 10):]
        records.append(SweepRecord(n_heads, d_head, seed, tuple(result.final_accuracy), sum(tail) / len(tail),
                                   result.seconds))
    return records


# ----------------------------------------------------------------------------------------------------------------
# The low-rank bottleneck


def random_attention_pattern(seq_len: int, concentration: float = 0.5, seed: int = 0) -> Tensor:
    """A random (seq_len, seq_len) attention pattern: each row (query) a Dirichlet draw over the keys, all > 0.

    Small ``concentration`` gives peaked rows, large gives nearly uniform ones. float64.
    """
    seq_len = _positive_int("seq_len", seq_len)
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
        raise ValueError(f"x must be (seq, d_model) and target (seq, seq), got {tuple(x.shape)} and {tuple(target.shape)}")
    d_head = _positive_int("d_head", d_head)
    x, target = x.double(), target.double()
    gen = torch.Generator().manual_seed(seed)
    d_model = x.shape[1]
    w_q = (torch.randn(d_model, d_head, generator=gen, dtype=torch.float64) / math.sqrt(d_model)).requires_grad_()
    w_k = (torch.randn(d_model, d_head, generator=gen, dtype=torch.float64) / math.sqrt(d_model)).requires_grad_()
    # L-BFGS reaches machine-precision fits where they exist; Adam stalls around 1e-3 and blurs the threshold.
    optimizer = torch.optim.LBFGS([w_q, w_k], lr=1, max_iter=steps, tolerance_grad=1e-12, tolerance_change=1e-14,
                                  history_size=20, line_search_fn="strong_wolfe")
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
    return {"kl": kl, "tv": 0.5 * float((fit - target).abs().sum(-1).mean()), "max_abs": float((fit - target).abs().max())}
