"""Chapter 7's measurements: the decoder's KV cache (bytes, tokens per second) and what K/V-head conversion costs.

Generating one token with a cache reads every weight once and every cached key and value once; the arithmetic per
weight read is small, so a decoding step is bound by memory traffic, and the cache's share of that traffic grows
with the context. :func:`decoding_speed` times single-token steps of a
:class:`~manyheads.models.llama.LlamaDecoder` after a context of ``n`` tokens and measures the cache those steps
leave (:func:`~manyheads.models.llama.kv_cache_nbytes`) beside the formula
(:func:`~manyheads.costs.kv_cache_bytes`).

What converting a model's K/V heads (:mod:`manyheads.models.kv_heads`) costs, and what training gives back:
:func:`conversion_scores` scores a converted MiniLM on chapter 5's tasks (:mod:`manyheads.analysis.pruning`) and
by the cosine of its embeddings to the unconverted model's; :func:`uptrain` converts a toy model and trains it
on, recording held-out loss and accuracy (Ainslie et al.'s uptraining, at toy scale).

The context is a cache of the right shape filled with random numbers, not the keys and values of a real text: a
step does the same work whatever the numbers are, and filling a cache of thousands of tokens by running the model
over a text would take most of a chapter's time on a CPU. ``benchmarks/kv_cache.py`` runs longer contexts.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads.costs import kv_cache_bytes
from manyheads.data.tasks import IGNORE_INDEX
from manyheads.models.kv_heads import group_kv_heads
from manyheads.models.llama import kv_cache_nbytes
from manyheads.training import TrainConfig, readout_accuracy, train

__all__ = ["DecodeRecord", "decoding_speed", "decoding_table", "conversion_scores", "UptrainRun", "uptrain"]


@dataclass(frozen=True)
class DecodeRecord:
    """One model and context length of :func:`decoding_speed`.

    context: cached tokens before the timed steps; steps: tokens generated and timed, one at a time.
    cache_bytes: the cache after the steps, measured; formula_bytes: :func:`~manyheads.costs.kv_cache_bytes` for the
    same length and element size. seconds_per_token: the median time of one step.
    """

    n_kv_heads: int
    context: int
    steps: int
    cache_bytes: int
    formula_bytes: int
    seconds_per_token: float
    device: str
    threads: int

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds_per_token


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def decoding_speed(
    model: nn.Module,
    contexts: Sequence[int],
    steps: int = 8,
    warmup: int = 1,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> list[DecodeRecord]:
    """Time ``steps`` single-token decoding steps of ``model`` (a LlamaDecoder) after each context length.

    For each n in ``contexts`` the cache starts as n random positions of shape (1, n_kv_heads, n, d_head) per layer
    (seeded by ``seed``), on the model's device and in its dtype; ``warmup`` untimed steps come first (they grow the
    context by ``warmup`` tokens), then each timed step feeds the previous step's most likely token at the next
    position. Returns one :class:`DecodeRecord` per context length, in order, batch 1.

    ``device``: where to time it (default: the model's device); on another device a copy of the model is timed, so
    the model itself stays where it is.
    """
    if not contexts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in contexts):
        raise ValueError(f"contexts must be a non-empty list of positive ints (cached tokens), got {contexts!r}")
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    if device is not None and torch.device(device) != next(model.parameters()).device:
        model = copy.deepcopy(model).to(device)
    config = model.config
    parameter = next(model.parameters())
    device, dtype = parameter.device, parameter.dtype
    layers = [layer.attention for layer in model.layers]
    if len({(layer.n_kv_heads, layer.d_head) for layer in layers}) != 1:
        raise ValueError("decoding_speed needs every layer to have the same n_kv_heads and d_head")
    n_kv_heads, d_head = layers[0].n_kv_heads, layers[0].d_head
    generator = torch.Generator().manual_seed(seed)
    records = []
    for n in contexts:
        past = tuple(
            tuple(torch.randn(1, n_kv_heads, n, d_head, generator=generator).to(device, dtype) for _ in range(2))
            for _ in layers
        )
        token = torch.full((1, 1), config.bos_token_id or 0, dtype=torch.long, device=device)
        times = []
        for step in range(warmup + steps):
            position = torch.full((1, 1), n + step, dtype=torch.long, device=device)
            _sync(device)
            start = time.perf_counter()
            out = model(token, position_ids=position, past_key_values=past, use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            _sync(device)
            if step >= warmup:
                times.append(time.perf_counter() - start)
            past = out.past_key_values
        length = n + warmup + steps
        records.append(
            DecodeRecord(
                n_kv_heads=n_kv_heads,
                context=n,
                steps=steps,
                cache_bytes=kv_cache_nbytes(past),
                formula_bytes=kv_cache_bytes(len(layers), n_kv_heads, d_head, length, 1, parameter.element_size()),
                seconds_per_token=statistics.median(times),
                device=str(device),
                threads=torch.get_num_threads(),
            )
        )
        del past, out
    return records


def decoding_table(records: Sequence[DecodeRecord]) -> tuple[list[str], list[tuple]]:
    """``(headers, rows)`` for :func:`manyheads.show_table`: one row per record, sizes in MiB."""
    headers = ["device", "K/V heads", "context (tokens)", "cache, measured (MiB)", "formula (MiB)", "tokens / s"]
    rows = [
        (
            r.device,
            r.n_kv_heads,
            r.context,
            f"{r.cache_bytes / 2**20:.1f}",
            f"{r.formula_bytes / 2**20:.1f}",
            f"{r.tokens_per_s:.1f}",
        )
        for r in records
    ]
    return headers, rows


def conversion_scores(model: nn.Module, tasks: Sequence, reference: Sequence[Tensor]) -> tuple[list[float], float]:
    """``(metrics, cosine)`` of ``model`` (e.g. a converted MiniLM) on encoder tasks built for another model.

    tasks: encoder tasks of :mod:`~manyheads.analysis.pruning` (``lee_similarity_task``, ``sentiment_probe_task``,
    any ``EncoderTask``); each is run with ``model`` in place of its own (same
    texts, same fitted probe). reference: one (n_items, d_model) tensor of unit embeddings per task, e.g.
    ``task.embeddings(task.ones())`` of the unconverted model. Returns each task's metric, and the mean cosine
    between ``model``'s embedding of every item and the reference's.
    """
    if len(tasks) != len(reference):
        raise ValueError(f"give one reference embedding tensor per task: {len(tasks)} tasks, {len(reference)} tensors")
    metrics, cosines = [], []
    for task, ref in zip(tasks, reference):
        other = copy.copy(task)  # the same tokenized texts and probe; only the model differs
        other.model = model
        embeddings = other.embeddings(other.ones())
        if embeddings.shape != ref.shape:
            raise ValueError(f"reference for {task.name!r} is {tuple(ref.shape)}, embeddings {tuple(embeddings.shape)}")
        metrics.append(other.metric(other.outputs_from_embeddings(embeddings)))
        cosines.append((embeddings * ref.to(embeddings)).sum(-1))
    return metrics, torch.cat(cosines).mean().item()


@dataclass(frozen=True)
class UptrainRun:
    """One conversion of :func:`uptrain`: held-out (loss, accuracy) before conversion, right after it, and after
    each number of uptraining steps in ``steps`` (same order as ``after``)."""

    n_kv_heads: int
    original: tuple[float, float]
    converted: tuple[float, float]
    steps: tuple[int, ...]
    after: tuple[tuple[float, float], ...]
    curve_steps: list[int]
    curve_accuracy: list[float]

    def recovered(self, i: int = -1) -> float:
        """Share of the loss lost by the conversion that ``after[i]`` has won back (1 = all; above 1 = more)."""
        lost = self.converted[0] - self.original[0]
        return (self.converted[0] - self.after[i][0]) / lost if lost else float("nan")


@torch.no_grad()
def _held_out(model: nn.Module, tokens: Tensor, targets: Tensor) -> tuple[float, float]:
    model.eval()
    logits, _ = model(tokens)  # on the model's device
    targets = targets.to(logits.device)
    loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=IGNORE_INDEX).item()
    return loss, readout_accuracy(logits, targets).mean().item()


def uptrain(
    pretrained: nn.Module,
    task,
    n_kv_heads: int,
    steps: Sequence[int],
    config: TrainConfig | None = None,
    held_out: tuple[Tensor, Tensor] | None = None,
    method: str = "mean",
) -> UptrainRun:
    """Convert a trained toy model to ``n_kv_heads`` K/V heads (:func:`~manyheads.models.kv_heads.group_kv_heads`)
    and train the copy on ``task`` with :func:`manyheads.training.train` (chapter 7).

    Each number in ``steps`` is a separate run of that many steps from the converted model, with ``config`` (its
    seed fixes the batches, so a shorter run is the start of a longer one; default: Adam at lr 3e-3, seed 1, a
    lower rate than pre-training's, since the model starts trained). held_out: (tokens, targets) to score on,
    default 1,024 sequences of ``task`` drawn with seed 99. The longest run's accuracy curve (every
    ``config.eval_every`` steps, on :func:`~manyheads.training.train`'s own held-out batch) is kept for plotting.
    It trains on ``pretrained``'s device.
    """
    config = TrainConfig(lr=3e-3, seed=1) if config is None else config
    if held_out is None:
        held_out = task.sample(1024, torch.Generator().manual_seed(99))
    converted = group_kv_heads(pretrained, n_kv_heads, method)
    device = next(pretrained.parameters()).device
    after, curve = [], None
    for n in steps:
        run = train(
            lambda: copy.deepcopy(converted), task, dataclasses.replace(config, steps=n), device=device, progress=False
        )
        after.append(_held_out(run.model, *held_out))
        if n == max(steps):
            curve = run
    return UptrainRun(
        n_kv_heads=n_kv_heads,
        original=_held_out(copy.deepcopy(pretrained), *held_out),
        converted=_held_out(converted, *held_out),
        steps=tuple(steps),
        after=tuple(after),
        curve_steps=list(curve.eval_steps),
        curve_accuracy=[sum(a) / len(a) for a in curve.eval_accuracy],
    )
