"""Does pruning make a model faster? Heads physically removed against heads only masked (chapter 5).

A masked head (gate 0) still costs its share of W_q, W_k, W_v, the attention scores and W_o; a removed head
(:func:`manyheads.interventions.remove_heads`) is cut out of those matrices. The two models compute the same
function, which :func:`pruning_speed` checks on every batch it times, so the difference in tokens per second is
the speed that removal buys. It is bounded by the attention layers' share of the work: the feed-forward layers and
the embeddings are untouched. Michel et al. (2019, Table 4) measured BERT with 50 % of its heads removed on a GPU:
+1.9 % at batch 1 and +17.5 % at batch 16. The two models are timed in interleaved rounds (masked, then removed,
in every round), so a busy machine slows both alike, and each speed-up carries a bootstrap interval over the rounds.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from manyheads.interventions import attention_layers, call_arguments, kept_heads, real_token_mask, remove_heads

__all__ = ["SpeedRecord", "even_keep_mask", "pruning_speed", "speed_table"]


@dataclass(frozen=True)
class SpeedRecord:
    """One model, device and batch size of :func:`pruning_speed`: masked and removed, timed in turn.

    tokens: real (non-padding) tokens in one forward pass. *_tokens_per_s: tokens / median seconds per forward.
    max_abs_diff: the largest difference between the two models' outputs on this batch (0 up to rounding: they
    compute the same function). speedup_low, speedup_high: a 95 % percentile bootstrap interval of the speed-up over
    the rounds (each round times the masked and the removed model back to back, so a round's ratio is paired; the
    interval resamples rounds and takes the median ratio); NaN with fewer than 2 rounds.
    """

    model: str
    device: str
    threads: int
    batch: int
    tokens: int
    heads_kept: int
    heads_total: int
    masked_tokens_per_s: float
    removed_tokens_per_s: float
    max_abs_diff: float
    repeats: int
    speedup_low: float = math.nan  # 95 % bootstrap interval of :attr:`speedup` over the paired rounds
    speedup_high: float = math.nan

    @property
    def fraction_removed(self) -> float:
        return 1 - self.heads_kept / self.heads_total

    @property
    def speedup(self) -> float:
        """Relative gain in tokens per second of the removed model over the masked one (0.175 = +17.5 %)."""
        return self.removed_tokens_per_s / self.masked_tokens_per_s - 1


def even_keep_mask(model: nn.Module, fraction: float) -> Tensor:
    """A bool keep-mask (n_layers, n_heads) removing floor(fraction × all heads), spread as evenly as the layers allow.

    Heads are taken round-robin over the layers, the highest index first, and every layer keeps at least one head
    (:func:`~manyheads.interventions.remove_heads` requires it). Which heads go does not change the work a forward
    pass does, only how many go from each layer; pass the mask of a real pruning run to time that one instead.
    """
    fraction = float(fraction)
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must be in [0, 1) (every layer keeps a head), got {fraction}")
    heads = kept_heads(model)
    n_layers, n_heads = len(heads), max(len(ids) for ids in heads)
    if any(len(ids) != n_heads for ids in heads):
        raise ValueError("even_keep_mask needs a model with all its heads; pass keep= for a pruned one")
    k = math.floor(fraction * n_layers * n_heads)
    if k > n_layers * (n_heads - 1):
        raise ValueError(
            f"removing {k} of {n_layers * n_heads} heads would empty a layer: at most {n_layers * (n_heads - 1)} "
            "can go when every layer keeps one"
        )
    keep = torch.ones(n_layers, n_heads, dtype=torch.bool)
    for j in range(k):
        keep[j % n_layers, n_heads - 1 - j // n_layers] = False
    return keep


def _to(inputs, device: torch.device):
    if isinstance(inputs, Mapping):
        return {k: _to(v, device) for k, v in inputs.items()}
    if isinstance(inputs, tuple):
        return tuple(_to(v, device) for v in inputs)
    return inputs.to(device) if hasattr(inputs, "to") else inputs


def _output_tensor(output) -> Tensor:
    """The tensor to compare from a model's output: the encoder's last hidden state, or the first of a tuple."""
    if isinstance(output, Tensor):
        return output
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        return output[0]
    raise TypeError(f"cannot find an output tensor to compare in a {type(output).__name__}")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _masked_copy(model: nn.Module, keep: Tensor, device: torch.device) -> nn.Module:
    """A copy with the removed heads' gates at 0 in the layers' own buffers (no hooks: no extra work per forward)."""
    masked = copy.deepcopy(model).to(device)
    for layer, ids, row in zip(attention_layers(masked), kept_heads(masked), keep):
        layer.head_gates = row[list(ids)].to(device=device, dtype=layer.head_gates.dtype)
    return masked


def pruning_speed(
    model: nn.Module,
    inputs: Callable[[int], object],
    keep: Tensor | None = None,
    fraction: float = 0.5,
    batch_sizes: Sequence[int] = (1, 16),
    repeats: int = 10,
    warmup: int = 2,
    devices: Sequence[torch.device | str] | None = None,
    name: str | None = None,
    threads: int | None = None,
) -> list[SpeedRecord]:
    """Tokens per second of the model with heads masked (gates 0) and with the same heads removed (chapter 5).

    ``inputs(batch_size)`` returns one batch for the model: a TokenBatch or token ids, a dict of keyword arguments
    or a tuple of positional ones. ``keep``: a bool (n_layers, n_heads) keep-mask, e.g. from
    :func:`~manyheads.interventions.prune_mask`; by default :func:`even_keep_mask` with ``fraction``. ``devices``
    defaults to the CPU, plus CUDA when :func:`manyheads.device` finds it. Each batch is run ``warmup`` times, then
    ``repeats`` times with the two models in turn (so that a busy machine slows both alike), and the median time
    is kept. ``threads`` sets torch's CPU threads for the measurement (restored afterwards; default: as they are).
    On a machine busy with other work, one thread gives steadier numbers: threads that wait for each other at every
    operation lose much more to a busy neighbour than one thread does. The caller's model is not changed. Returns
    one :class:`SpeedRecord` per device and batch size.
    """
    from manyheads.runtime import device as best_device

    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be at least 1 and warmup at least 0, got {repeats} and {warmup}")
    if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
        raise ValueError(f"batch_sizes must be positive integers, got {list(batch_sizes)}")
    if keep is None:
        keep = even_keep_mask(model, fraction)
    keep = keep.cpu()
    if keep.dtype != torch.bool:
        raise TypeError(f"keep must be a bool keep-mask (True = keep the head), got dtype {keep.dtype}")
    if devices is None:
        devices = ["cpu"] + (["cuda"] if best_device().type == "cuda" else [])
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    name = name or type(model).__name__
    removed_cpu = remove_heads(model, ~keep)  # checks the mask's shape and that every layer keeps a head
    saved_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        return _measure(model, removed_cpu, inputs, keep, batch_sizes, repeats, warmup, devices, name)
    finally:
        torch.set_num_threads(saved_threads)


def _measure(model, removed_cpu, inputs, keep, batch_sizes, repeats, warmup, devices, name) -> list[SpeedRecord]:
    """:func:`pruning_speed`'s timing loop, once its arguments are checked and the threads set."""
    records = []
    for dev in map(torch.device, devices):
        masked, removed = _masked_copy(model, keep, dev).eval(), copy.deepcopy(removed_cpu).to(dev).eval()
        for batch_size in batch_sizes:
            batch = _to(inputs(int(batch_size)), dev)
            args, kwargs = call_arguments(batch)
            is_token = real_token_mask(masked, args, kwargs)
            first = args[0] if args else next(iter(kwargs.values()))
            n_tokens = int(is_token.sum()) if is_token is not None else int(first.numel())
            seconds = {"masked": [], "removed": []}
            with torch.inference_mode():
                diff = float(
                    (_output_tensor(masked(*args, **kwargs)) - _output_tensor(removed(*args, **kwargs))).abs().max()
                )
                for i in range(warmup + repeats):
                    for label, net in (("masked", masked), ("removed", removed)):
                        _synchronize(dev)
                        start = time.perf_counter()
                        net(*args, **kwargs)
                        _synchronize(dev)
                        if i >= warmup:
                            seconds[label].append(time.perf_counter() - start)
            records.append(
                SpeedRecord(
                    model=name,
                    device=dev.type,
                    threads=torch.get_num_threads(),
                    batch=int(batch_size),
                    tokens=n_tokens,
                    heads_kept=int(keep.sum()),
                    heads_total=keep.numel(),
                    masked_tokens_per_s=n_tokens / statistics.median(seconds["masked"]),
                    removed_tokens_per_s=n_tokens / statistics.median(seconds["removed"]),
                    max_abs_diff=diff,
                    repeats=repeats,
                    **dict(
                        zip(("speedup_low", "speedup_high"), _paired_interval(seconds["masked"], seconds["removed"]))
                    ),
                )
            )
    return records


def _paired_interval(
    masked: Sequence[float], removed: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """A percentile bootstrap interval of the speed-up (median masked time / median removed time, minus 1, as in
    :attr:`SpeedRecord.speedup`), resampling whole rounds so that each round's two timings stay paired."""
    if len(masked) < 2:
        return math.nan, math.nan
    m, r = torch.tensor(masked, dtype=torch.float64), torch.tensor(removed, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randint(len(m), (n_boot, len(m)), generator=generator)
    ratios = m[rows].quantile(0.5, dim=1) / r[rows].quantile(0.5, dim=1)
    tail = (1 - level) / 2
    low, high = torch.quantile(ratios, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low - 1, high - 1


SPEED_HEADERS = [
    "model",
    "device",
    "batch",
    "tokens",
    "heads removed",
    "masked (tokens/s)",
    "removed (tokens/s)",
    "speed-up",
    "95 % interval",
    "max |Δ output|",
]


def speed_table(records: Sequence[SpeedRecord]) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` for :func:`manyheads.show_table`: ``mh.show_table(*speed_table(records))``."""
    rows = [
        [
            r.model,
            r.device if r.device != "cpu" else f"cpu ({r.threads} threads)",
            str(r.batch),
            str(r.tokens),
            f"{r.heads_total - r.heads_kept} of {r.heads_total} ({r.fraction_removed:.0%})",
            f"{r.masked_tokens_per_s:,.0f}",
            f"{r.removed_tokens_per_s:,.0f}",
            f"{r.speedup:+.1%}",
            "n/a" if math.isnan(r.speedup_low) else f"[{r.speedup_low:+.1%}, {r.speedup_high:+.1%}]",
            f"{r.max_abs_diff:.1e}",
        ]
        for r in records
    ]
    return list(SPEED_HEADERS), rows
