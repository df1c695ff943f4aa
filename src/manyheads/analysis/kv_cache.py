"""Chapter 7's measurements: the decoder's KV cache (bytes, tokens per second) and what K/V-head conversion costs.

Generating one token with a cache reads every weight once and every cached key and value once; the arithmetic per
weight read is small, so on hardware whose memory is the bottleneck a decoding step takes a time set by the bytes
it moves. :func:`decoding_step_bytes` computes those bytes for a given model (its own weights + its cache), which is
what can be trusted on any machine; the speed-up they predict (:func:`predicted_speedup`, the ratio of two
:attr:`StepBytes.total`, refused when the two were counted unlike: another precision, context or cache passes, or
one parameter count for K/V variants of different size) is a *prediction*.

Timings are measured, with their spread: :func:`decoding_speed` times single-token steps of a
:class:`~manyheads.models.llama.LlamaDecoder` after a context of ``n`` tokens and measures the cache those steps
leave (:func:`~manyheads.models.llama.kv_cache_nbytes`) beside the formula
(:func:`~manyheads.costs.kv_cache_bytes`); :func:`compare_decoding` times several models in turn, round after
round, so that a busy machine slows them alike, and :func:`decoding_comparison` gives each model's tokens per
second with a bootstrap interval over the rounds and its paired difference from a reference model. Where that
interval contains 0 the machine could not tell the two apart (``manyheads.analysis.claims.compare_words`` turns
it into "inconclusive here").

What converting a model's K/V heads (:mod:`manyheads.models.kv_heads`) costs, and what training gives back:
:func:`conversion_scores` scores a converted MiniLM on chapter 5's tasks (:mod:`manyheads.analysis.pruning_tasks`) and
by the cosine of its embeddings to the unconverted model's (:func:`conversion_outputs` gives what the tasks score,
and :func:`paired_difference` a bootstrap interval for the difference of two models' scores on the same items,
e.g. a converted model against the no-attention floor); :func:`uptrain` converts a toy model and trains it
on, recording held-out loss and accuracy (Ainslie et al.'s uptraining, at toy scale), beside a control: the same
architecture trained from scratch for the same steps with the same recipe (``scratch=``).

The context is a cache of the right shape filled with random numbers, not the keys and values of a real text: a
step does the same work whatever the numbers are, and filling a cache of thousands of tokens by running the model
over a text would take most of a chapter's time on a CPU. ``benchmarks/kv_cache.py`` runs longer contexts.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads.costs import kv_cache_bytes
from manyheads.data.tasks import IGNORE_INDEX
from manyheads.models.kv_heads import group_kv_heads
from manyheads.models.llama import kv_cache_nbytes
from manyheads.training import TrainConfig, readout_accuracy, train

__all__ = [
    "DecodeRecord",
    "decoding_speed",
    "decoding_table",
    "StepBytes",
    "decoding_step_bytes",
    "predicted_speedup",
    "compare_decoding",
    "DecodeComparison",
    "decoding_comparison",
    "conversion_outputs",
    "conversion_scores",
    "paired_difference",
    "UptrainRun",
    "uptrain",
]


@dataclass(frozen=True)
class DecodeRecord:
    """One model and context length of :func:`decoding_speed`.

    context: cached tokens before the timed steps; steps: tokens generated and timed, one at a time.
    cache_bytes: the cache after the steps, measured; formula_bytes: :func:`~manyheads.costs.kv_cache_bytes` for the
    same length and element size. seconds_per_token: the median time of one step; seconds: every timed step, in
    order. round: which round of :func:`compare_decoding` (0 for :func:`decoding_speed`).
    """

    n_kv_heads: int
    context: int
    steps: int
    cache_bytes: int
    formula_bytes: int
    seconds_per_token: float
    device: str
    threads: int
    seconds: tuple[float, ...] = ()
    round: int = 0

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds_per_token


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _check_contexts(contexts) -> None:
    if not contexts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in contexts):
        raise ValueError(f"contexts must be a non-empty list of positive ints (cached tokens), got {contexts!r}")


def _kv_shape(model: nn.Module) -> tuple[int, int, int]:
    """(n_layers, n_kv_heads, d_head) of a decoder whose layers all share them."""
    layers = [layer.attention for layer in model.layers]
    if len({(layer.n_kv_heads, layer.d_head) for layer in layers}) != 1:
        raise ValueError("decoding_speed needs every layer to have the same n_kv_heads and d_head")
    return len(layers), layers[0].n_kv_heads, layers[0].d_head


def _random_cache(model: nn.Module, n: int, generator: torch.Generator) -> tuple:
    """A cache of n random positions per layer, (1, n_kv_heads, n, d_head) each, on the model's device and dtype."""
    parameter = next(model.parameters())
    n_layers, n_kv_heads, d_head = _kv_shape(model)
    return tuple(
        tuple(
            torch.randn(1, n_kv_heads, n, d_head, generator=generator).to(parameter.device, parameter.dtype)
            for _ in range(2)
        )
        for _ in range(n_layers)
    )


@torch.no_grad()
def _timed_steps(model: nn.Module, past: tuple, n: int, steps: int, warmup: int, round_: int = 0) -> DecodeRecord:
    """``warmup`` untimed then ``steps`` timed single-token steps after the n-position cache ``past`` (not changed:
    each step makes a new, longer cache)."""
    config = model.config
    parameter = next(model.parameters())
    device = parameter.device
    n_layers, n_kv_heads, d_head = _kv_shape(model)
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
    return DecodeRecord(
        n_kv_heads=n_kv_heads,
        context=n,
        steps=steps,
        cache_bytes=kv_cache_nbytes(past),
        formula_bytes=kv_cache_bytes(n_layers, n_kv_heads, d_head, length, 1, parameter.element_size()),
        seconds_per_token=statistics.median(times),
        device=str(device),
        threads=torch.get_num_threads(),
        seconds=tuple(times),
        round=round_,
    )


def _on(model: nn.Module, device) -> nn.Module:
    if device is not None and torch.device(device) != next(model.parameters()).device:
        return copy.deepcopy(model).to(device)
    return model


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
    the model itself stays where it is. To compare models on a shared machine use :func:`compare_decoding`.
    """
    _check_contexts(contexts)
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    model = _on(model, device)
    _kv_shape(model)
    generator = torch.Generator().manual_seed(seed)
    records = []
    for n in contexts:
        past = _random_cache(model, n, generator)
        records.append(_timed_steps(model, past, n, steps, warmup))
        del past
    return records


@torch.no_grad()
def compare_decoding(
    models: Sequence[nn.Module],
    contexts: Sequence[int],
    steps: int = 3,
    rounds: int = 5,
    warmup: int = 1,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> list[DecodeRecord]:
    """Time several decoders in turn, ``rounds`` times, after each context length (chapter 7).

    For each n in ``contexts`` every model gets one random cache of n positions (as in :func:`decoding_speed`,
    seeded), kept for all rounds; in each round the models take ``warmup`` + ``steps`` single-token steps from
    that same cache, one model after the other. Taking turns means that a neighbour's load slows every model of a
    round alike, and the rounds give the spread a single timing hides. Returns one :class:`DecodeRecord` per
    context, round and model (``record.round``), for :func:`decoding_comparison`.
    """
    _check_contexts(contexts)
    if steps < 1 or warmup < 0 or rounds < 1:
        raise ValueError(f"need steps >= 1, warmup >= 0 and rounds >= 1, got {steps}, {warmup}, {rounds}")
    models = [_on(model, device) for model in models]
    if not models:
        raise ValueError("give at least one model to time")
    records = []
    for n in contexts:
        generator = torch.Generator().manual_seed(seed)
        caches = [_random_cache(model, n, generator) for model in models]
        for r in range(rounds):
            for model, past in zip(models, caches):
                records.append(_timed_steps(model, past, n, steps, warmup, r))
        del caches
    return records


def _bootstrap_mean(values: Sequence[float], n_boot: int, seed: int, level: float) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and its percentile bootstrap interval (seeded)."""
    x = torch.tensor([float(v) for v in values], dtype=torch.float64)
    if len(x) < 2:
        raise ValueError("an interval needs at least two rounds")
    generator = torch.Generator().manual_seed(seed)
    means = x[torch.randint(len(x), (n_boot, len(x)), generator=generator)].mean(1)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return x.mean().item(), low, high


@dataclass(frozen=True)
class DecodeComparison:
    """One model and context of :func:`decoding_comparison`: tokens per second over the rounds, and the paired
    difference from the reference model (tokens per second, this model minus the reference), each (mean, low, high)
    with a bootstrap interval over the rounds."""

    n_kv_heads: int
    context: int
    rounds: int
    tokens_per_s: tuple[float, float, float]
    difference: tuple[float, float, float]
    reference: int

    @property
    def ratio(self) -> float:
        """Mean tokens per second over the reference's (1.44 = 44 % faster)."""
        return self.tokens_per_s[0] / (self.tokens_per_s[0] - self.difference[0])


def decoding_comparison(
    records: Sequence[DecodeRecord], reference: int, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> list[DecodeComparison]:
    """Summarise :func:`compare_decoding`'s records per (K/V heads, context), against the model with ``reference``
    K/V heads (chapter 7).

    Each round of a model gives one speed, 1 / its median step time. Its mean over the rounds gets a percentile
    bootstrap interval (rounds resampled, ``n_boot`` times, seeded); so does the paired difference from the
    reference in the same rounds (resampled together, since a busy round slows both). With few rounds the
    interval is rough; it still shows when the spread swamps the difference.
    """
    speed: dict[tuple[int, int], dict[int, float]] = {}
    for r in records:
        speed.setdefault((r.n_kv_heads, r.context), {})[r.round] = r.tokens_per_s
    out = []
    for (n_kv, context), by_round in speed.items():
        ref = speed.get((reference, context))
        if ref is None:
            raise ValueError(f"no records with {reference} K/V heads at context {context} to compare with")
        rounds = sorted(set(by_round) & set(ref))
        out.append(
            DecodeComparison(
                n_kv_heads=n_kv,
                context=context,
                rounds=len(rounds),
                tokens_per_s=_bootstrap_mean([by_round[i] for i in rounds], n_boot, seed, level),
                difference=_bootstrap_mean([by_round[i] - ref[i] for i in rounds], n_boot, seed, level),
                reference=reference,
            )
        )
    return sorted(out, key=lambda c: (c.context, -c.n_kv_heads))


@dataclass(frozen=True)
class StepBytes:
    """The bytes one decoding step of one model reads: every weight once, and the cache ``cache_passes`` times.

    It remembers what it was computed from (the model's own parameter count, its K/V heads, the context, the bytes
    per number and the cache passes), so that :func:`predicted_speedup` can refuse to compare unlike with unlike."""

    weights: int
    cache: int
    n_parameters: int = 0
    n_kv_heads: int = 0
    context: int = 0
    bytes_per_element: int = 0
    cache_passes: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.cache

    @property
    def precision(self) -> str:
        """ "16-bit", "float32", ...: the number format the bytes assume (say it wherever bytes are quoted)."""
        return {2: "16-bit", 4: "float32", 1: "8-bit"}.get(self.bytes_per_element, f"{self.bytes_per_element}-byte")


def _n_parameters(model: nn.Module) -> int:
    """Every weight of ``model`` counted once (a tied embedding and output matrix is one tensor, read once)."""
    seen, total = set(), 0
    for p in model.parameters():  # parameters() already skips a tied tensor's second name
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def decoding_step_bytes(model: nn.Module, context: int, bytes_per_element: int = 2, cache_passes: int = 1) -> StepBytes:
    """What a single-token decoding step of ``model`` (a decoder such as
    :class:`~manyheads.models.llama.LlamaDecoder`, or a K/V variant of one made by
    :func:`~manyheads.models.kv_heads.repeat_kv_heads` or :func:`~manyheads.models.kv_heads.group_kv_heads`) reads
    from memory after ``context`` cached tokens (batch 1; chapter 7): its *own* weights once (each is used for one
    multiply-add) and its KV cache (:func:`~manyheads.costs.kv_cache_bytes`, with the model's layers, K/V heads and
    d_head) ``cache_passes`` times (1 for a kernel that reads it in place; an implementation that copies the cache
    to append a token reads and writes it once more).

    The model is passed, not a parameter count: K/V variants of one model differ in size (repeating SmolLM2's 3 K/V
    heads as 9 copies W_K and W_V, 134.5 M → 147.8 M parameters; mean-pooling them to 1 gives 130.1 M), so one count
    for all of them gets the weights, the largest part of a step's bytes, wrong (issue 35, B-1).

    If a step's time were set by these bytes alone, one model would run ``a.total / b.total`` times faster than
    another (:func:`predicted_speedup`): a prediction for memory-bound hardware, to be set beside a measurement.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"decoding_step_bytes counts the weights of the model it is given: pass the decoder (each K/V variant its "
            f"own model), not {type(model).__name__} {model!r}; one parameter count for variants of different size "
            f"gets their weights wrong"
        )
    if cache_passes < 1:
        raise ValueError(f"cache_passes must be at least 1, got {cache_passes}")
    if bytes_per_element < 1:
        raise ValueError(f"bytes_per_element must be at least 1, got {bytes_per_element}")
    _check_contexts([context])
    n_layers, n_kv_heads, d_head = _kv_shape(model)
    n_parameters = _n_parameters(model)
    weights = n_parameters * int(bytes_per_element)
    cache = kv_cache_bytes(n_layers, n_kv_heads, d_head, context, 1, bytes_per_element) * int(cache_passes)
    return StepBytes(weights, cache, n_parameters, n_kv_heads, int(context), int(bytes_per_element), int(cache_passes))


def predicted_speedup(step: StepBytes, reference: StepBytes) -> float:
    """How many times as fast as ``reference`` the byte model predicts ``step``'s model to decode:
    ``reference.total / step.total`` (chapter 7).

    Only like with like: both must count the same bytes per number and cache passes at the same context, and
    variants with different numbers of K/V heads must carry different parameter counts (their K/V projections
    differ in size). A ``ValueError`` names what differs, e.g. a byte model fed one parameter count for every
    variant (issue 35, B-1), or a 16-bit prediction set beside a float32 one (B-2).
    """
    for name in ("bytes_per_element", "cache_passes", "context"):
        a, b = getattr(step, name), getattr(reference, name)
        if a != b:
            raise ValueError(f"compare like with like: {name} is {a} for one model and {b} for the reference")
    if step.n_kv_heads != reference.n_kv_heads and (
        step.n_parameters == reference.n_parameters or step.weights == reference.weights
    ):
        raise ValueError(
            f"{step.n_kv_heads} and {reference.n_kv_heads} K/V heads with the same parameter count "
            f"({step.n_parameters:,}, {step.weights:,} bytes of weights): variants with different K/V heads have "
            f"K/V projections of different size, so each must be counted from its own model "
            f"(decoding_step_bytes(model, ...))"
        )
    return reference.total / step.total


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


def conversion_outputs(model: nn.Module, tasks: Sequence) -> tuple[list[Tensor], list[Tensor]]:
    """``(outputs, embeddings)`` of ``model`` (e.g. a converted MiniLM) on encoder tasks built for another model: for
    each task of :mod:`~manyheads.analysis.pruning_tasks` (``lee_similarity_task``, ``sentiment_probe_task``, any
    ``EncoderTask``), what its metric scores and the unit embeddings, with ``model`` in place of the task's own (same
    texts, same fitted probe)."""
    outputs, embeddings = [], []
    for task in tasks:
        other = copy.copy(task)  # the same tokenized texts and probe; only the model differs
        other.model = model
        e = other.embeddings(other.ones())
        outputs.append(other.outputs_from_embeddings(e))
        embeddings.append(e)
    return outputs, embeddings


def conversion_scores(
    model: nn.Module, tasks: Sequence, reference: Sequence[Tensor], keep: list | None = None
) -> tuple[list[float], float]:
    """``(metrics, cosine)`` of ``model`` (e.g. a converted MiniLM) on encoder tasks built for another model.

    tasks: encoder tasks of :mod:`~manyheads.analysis.pruning_tasks` (``lee_similarity_task``, ``sentiment_probe_task``,
    any ``EncoderTask``); each is run with ``model`` in place of its own (same
    texts, same fitted probe). reference: one (n_items, d_model) tensor of unit embeddings per task, e.g.
    ``task.embeddings(task.ones())`` of the unconverted model. Returns each task's metric, and the mean cosine
    between ``model``'s embedding of every item and the reference's. ``keep``: a list that receives each task's
    outputs (what :func:`conversion_outputs` gives), for :func:`paired_difference` without running the model again.
    """
    if len(tasks) != len(reference):
        raise ValueError(f"give one reference embedding tensor per task: {len(tasks)} tasks, {len(reference)} tensors")
    outputs, embeddings = conversion_outputs(model, tasks)
    if keep is not None:
        keep.extend(outputs)
    metrics, cosines = [], []
    for task, out, e, ref in zip(tasks, outputs, embeddings, reference):
        if e.shape != ref.shape:
            raise ValueError(f"reference for {task.name!r} is {tuple(ref.shape)}, embeddings {tuple(e.shape)}")
        metrics.append(task.metric(out))
        cosines.append((e * ref.to(e)).sum(-1))
    return metrics, torch.cat(cosines).mean().item()


def paired_difference(
    task, outputs: Tensor, reference: Tensor, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """``(difference, low, high)``: ``task.metric(outputs) - task.metric(reference)`` and its percentile bootstrap
    interval over the task's items (documents, sentences), both outputs scored on the *same* resamples, so that
    what the items share cancels (chapter 7: a converted model against the no-attention floor, or against the
    unconverted model). ``outputs`` and ``reference``: what :func:`conversion_outputs` or ``task.outputs(gates)``
    give for the same items."""
    if n_boot < 2:
        raise ValueError(f"n_boot must be at least 2, got {n_boot}")
    generator = torch.Generator().manual_seed(seed)
    resamples = [torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot)]
    boot = task.bootstrap_metrics([outputs, reference], resamples).double()
    differences = boot[0] - boot[1]
    tail = (1 - level) / 2
    # A resample too degenerate to score (a correlation over fewer than two distinct documents) gives NaN: left out.
    low, high = torch.nanquantile(differences, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return task.metric(outputs) - task.metric(reference), low, high


@dataclass(frozen=True)
class UptrainRun:
    """One conversion of :func:`uptrain`: held-out (loss, accuracy) before conversion, right after it, and after
    each number of uptraining steps in ``steps`` (same order as ``after``). With a from-scratch control,
    ``scratch`` holds the control's (loss, accuracy) after the same numbers of steps, and ``scratch_curve_accuracy``
    its curve at ``curve_steps``; otherwise both are empty."""

    n_kv_heads: int
    original: tuple[float, float]
    converted: tuple[float, float]
    steps: tuple[int, ...]
    after: tuple[tuple[float, float], ...]
    curve_steps: list[int]
    curve_accuracy: list[float]
    scratch: tuple[tuple[float, float], ...] = ()
    scratch_curve_accuracy: list[float] = dataclasses.field(default_factory=list)

    def recovered(self, i: int = -1) -> float:
        """Share of the loss lost by the conversion that ``after[i]`` has won back (1 = all; above 1 = more)."""
        lost = self.converted[0] - self.original[0]
        return (self.converted[0] - self.after[i][0]) / lost if lost else float("nan")

    def first_step_at(self, accuracy: float, scratch: bool = False) -> int | None:
        """The first logged step at which the uptrained curve (or the control's) reaches ``accuracy``; else None."""
        curve = self.scratch_curve_accuracy if scratch else self.curve_accuracy
        return next((step for step, a in zip(self.curve_steps, curve) if a >= accuracy), None)


@torch.no_grad()
def _held_out(model: nn.Module, tokens: Tensor, targets: Tensor) -> tuple[float, float]:
    model.eval()
    logits, _ = model(tokens)  # on the model's device
    targets = targets.to(logits.device)
    loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=IGNORE_INDEX).item()
    return loss, readout_accuracy(logits, targets).mean().item()


def _run(make_model, task, config: TrainConfig, steps: Sequence[int], held_out, device):
    """One training run of max(steps) steps, scored on ``held_out`` at each of ``steps`` (a run's batches depend
    only on its seed, so the score at step n is that of an n-step run). Returns (scores, eval steps, accuracy)."""
    every = math.gcd(config.eval_every, *steps)
    scores = {}

    def score(step: int, model: nn.Module) -> None:
        if step in steps:
            scores[step] = _held_out(model, *held_out)

    run = train(
        make_model,
        task,
        dataclasses.replace(config, steps=max(steps), eval_every=every),
        device=device,
        progress=False,
        on_eval=score,
    )
    keep = [i for i, step in enumerate(run.eval_steps) if step % config.eval_every == 0]
    return (
        tuple(scores[n] for n in steps),
        [run.eval_steps[i] for i in keep],
        [sum(run.eval_accuracy[i]) / len(run.eval_accuracy[i]) for i in keep],
    )


def uptrain(
    pretrained: nn.Module,
    task,
    n_kv_heads: int,
    steps: Sequence[int],
    config: TrainConfig | None = None,
    held_out: tuple[Tensor, Tensor] | None = None,
    method: str = "mean",
    scratch: Callable[[], nn.Module] | None = None,
) -> UptrainRun:
    """Convert a trained toy model to ``n_kv_heads`` K/V heads (:func:`~manyheads.models.kv_heads.group_kv_heads`)
    and train the copy on ``task`` with :func:`manyheads.training.train` (chapter 7).

    ``steps``: the step counts to score at, all in one run of max(steps) steps from the converted model, with
    ``config`` (its seed fixes the batches, so the score after n steps is that of an n-step run; default: Adam at
    lr 3e-3, seed 1). held_out: (tokens, targets) to score on, default 1,024 sequences of ``task`` drawn with seed
    99. The accuracy curve (every ``config.eval_every`` steps, on :func:`~manyheads.training.train`'s own held-out
    batch) is kept for plotting. It trains on ``pretrained``'s device.

    ``scratch``: the control, a function that builds a *freshly initialised* model with ``n_kv_heads`` K/V heads;
    it is trained with the same ``config`` (seed, batches, learning rate) for the same steps. Without it,
    uptraining has nothing to be compared with: a task that a model learns from scratch in fewer steps than the
    uptraining took shows no benefit of converting.
    """
    config = TrainConfig(lr=3e-3, seed=1) if config is None else config
    steps = tuple(int(n) for n in steps)
    if not steps or min(steps) < 1:
        raise ValueError(f"steps must be positive step counts, got {steps}")
    if held_out is None:
        held_out = task.sample(1024, torch.Generator().manual_seed(99))
    converted = group_kv_heads(pretrained, n_kv_heads, method)
    device = next(pretrained.parameters()).device
    after, curve_steps, curve = _run(lambda: copy.deepcopy(converted), task, config, steps, held_out, device)
    control, control_curve = (), []
    if scratch is not None:
        control, _, control_curve = _run(scratch, task, config, steps, held_out, device)
    return UptrainRun(
        n_kv_heads=n_kv_heads,
        original=_held_out(copy.deepcopy(pretrained), *held_out),
        converted=_held_out(converted, *held_out),
        steps=steps,
        after=after,
        curve_steps=curve_steps,
        curve_accuracy=curve,
        scratch=control,
        scratch_curve_accuracy=control_curve,
    )
