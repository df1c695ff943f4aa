"""Induction heads: the score, and the from-scratch experiment on a 2-layer attention-only model (chapter 6).

On ``[BOS] + r + r`` an induction head at a token of the second copy attends to the token right after that token's
earlier occurrence (Olsson et al. 2022's "prefix matching"), and copies it: [A][B] … [A] → [B]. In a 2-layer
attention-only transformer it is built from two heads: a previous-token head in layer 0 writes "the token before me
was A" into each position, and the induction head in layer 1 forms its keys from that write (K-composition,
Elhage et al. 2021). Layers count from 0 here; the papers' layers 1 and 2 are layers 0 and 1.

* :func:`induction_score`, with :func:`~manyheads.analysis.layers.previous_token_score`, scores heads;
* :func:`train_induction_model` trains one seed of the recipe (:data:`INDUCTION_RECIPE`) with the course's training
  loop and records the phase change (losses on both copies, the scores) and, if asked, checkpoints;
* :func:`repeat_metrics` measures a model on fixed probe batches (:func:`probe_batches`), under any intervention;
* :func:`composition_test` removes the previous-token head's output from only the queries, keys or values of
  layer 1 and reports what is left of the induction score and of the second copy's loss;
* :func:`train_in_background` trains several seeds at once, each in its own process (the loop runs on one thread,
  so two seeds on two cores take about the time of one), while the caller goes on with other work.

The induction score here is the mean over the second copy's queries of the weight on the target key, so a perfect
induction head scores 1 (TransformerLens's detector divides by the whole pattern instead, and tops out near 0.5 on
these inputs; facts §22).
"""

from __future__ import annotations

import inspect
import io
import math
import multiprocessing
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads.analysis.layers import _check_batch, _previous
from manyheads.data.repeats import RepeatedHalvesTask
from manyheads.interventions import _is_pair
from manyheads.models.attention_only import COMPOSITION_PATHS, AttentionOnlyTransformer, HeadPath
from manyheads.training import TrainConfig, train

__all__ = [
    "induction_score",
    "INDUCTION_RECIPE",
    "RepeatMetrics",
    "probe_batches",
    "repeat_metrics",
    "InductionRun",
    "train_induction_model",
    "composition_test",
    "BackgroundRuns",
    "train_in_background",
]


def _induction(weights: Tensor, half: int) -> Tensor:
    """(..., 2·half + 1, 2·half + 1) → (...): mean over i = half + 1 … 2·half of weights[..., i, i − half + 1]."""
    queries = torch.arange(half + 1, 2 * half + 1, device=weights.device)
    return weights[..., queries, queries - half + 1].mean(-1)


def _check_half(weights: Tensor, half) -> int:
    if isinstance(half, bool) or not isinstance(half, int) or half < 1:
        raise ValueError(f"half must be a positive int (the length of r), got {half!r}")
    seq = weights.shape[-1]
    if seq != 2 * half + 1:
        raise ValueError(
            f"induction_score expects inputs [BOS] + r + r with len(r) = half, so seq = 2·half + 1 = {2 * half + 1}; "
            f"got seq = {seq}. Pass the half-length these weights were computed on."
        )
    return half


def induction_score(weights: Tensor, half: int) -> Tensor:
    """How much each head does induction: weights (batch, n_heads, seq, seq) → (n_heads,) (chapter 6).

    ``weights`` come from inputs ``[BOS] + r + r`` with len(r) = ``half``, so seq = 2·half + 1 (ValueError
    otherwise). The mean, over the batch and the second copy's queries i = half + 1 … 2·half, of
    ``weights[..., i, i − half + 1]``: the weight on the token right after the earlier copy of the current token.
    1 for a perfect induction head; about 1/i at query i for a head that spreads evenly.
    """
    _check_batch(weights)
    half = _check_half(weights, half)
    return _induction(weights, half).mean(0)


#: The recipe of issue 13 that reached the phase change on 2 CPU cores: AdamW, lr 3e-3, batch 32, 1,500 steps.
INDUCTION_RECIPE = TrainConfig(steps=1500, batch_size=32, lr=3e-3, optimizer="adamw", eval_every=50, eval_size=256)


def probe_batches(task: RepeatedHalvesTask, per_half: int = 16, seed: int = 2_000_003) -> dict[int, Tensor]:
    """Fixed evaluation inputs: for every half-length of ``task``, ``per_half`` rows of ``[BOS] + r + r``.

    Returns {half: (per_half, 2·half + 1) tokens}; the same seed gives the same rows, whatever trained the model.
    """
    generator = torch.Generator().manual_seed(seed)
    return {h: task.tokens(per_half, h, generator) for h in range(task.min_half, task.max_half + 1)}


@dataclass(frozen=True)
class RepeatMetrics:
    """A model on :func:`probe_batches`, each half-length weighing the same.

    first: mean loss (nats) predicting the first copy (positions 0 … half − 1: unpredictable, chance is ln vocab);
    second: mean loss predicting the second copy's tokens that the first copy announces (positions
    half + 1 … 2·half − 1; the second copy's first token, which nothing announces, is in neither);
    induction, previous: (n_layers, n_heads) :func:`induction_score` and previous-token score;
    log_half: the mean of ln(half) over the probes, the loss of a guess spread evenly over the tokens of r.
    """

    first: float
    second: float
    induction: Tensor
    previous: Tensor
    log_half: float


@torch.no_grad()
def repeat_metrics(model: nn.Module, probes: dict[int, Tensor], remove: Iterable[HeadPath] = ()) -> RepeatMetrics:
    """Run ``model`` (an :class:`~manyheads.models.attention_only.AttentionOnlyTransformer`) on each probe batch
    and average the losses and scores over half-lengths. ``remove`` goes to the model's forward (path removal);
    for head ablation, call this inside :func:`manyheads.ablated`."""
    if not probes:
        raise ValueError("probes is empty: make them with probe_batches(task)")
    device = next(model.parameters()).device
    remove = list(remove)
    firsts, seconds, inductions, previous = [], [], [], []
    for half, tokens in probes.items():
        tokens = tokens.to(device)
        _check_half(tokens, half)
        logits, weights = model(tokens, remove=remove)
        losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (batch, seq − 1)
        firsts.append(losses[:, :half].mean())
        seconds.append(losses[:, half + 1 :].mean())
        inductions.append(_induction(weights, half).mean(1))  # (n_layers, n_heads)
        previous.append(_previous(weights).mean(1))
    return RepeatMetrics(
        first=torch.stack(firsts).mean().item(),
        second=torch.stack(seconds).mean().item(),
        induction=torch.stack(inductions).mean(0).cpu(),
        previous=torch.stack(previous).mean(0).cpu(),
        log_half=sum(math.log(h) for h in probes) / len(probes),
    )


@dataclass
class InductionRun:
    """One seed of :func:`train_induction_model`: the trained model and what was recorded along the way.

    steps: the recorded steps (0, eval_every, …, steps); history: the :class:`RepeatMetrics` at each of them;
    snapshots: {step: state_dict} when asked for; train_loss: one value per training step; seconds: training time.
    """

    model: AttentionOnlyTransformer | None
    seed: int
    n_layers: int
    steps: list[int] = field(default_factory=list)
    history: list[RepeatMetrics] = field(default_factory=list)
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    train_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def final(self) -> RepeatMetrics:
        """The metrics at the last recorded step."""
        return self.history[-1]

    @property
    def first_loss(self) -> list[float]:
        """Loss on the first copy at each recorded step."""
        return [m.first for m in self.history]

    @property
    def second_loss(self) -> list[float]:
        """Loss on the announced tokens of the second copy at each recorded step."""
        return [m.second for m in self.history]

    @property
    def induction(self) -> Tensor:
        """(n_records, n_layers, n_heads): every head's induction score at each recorded step."""
        return torch.stack([m.induction for m in self.history])

    @property
    def previous(self) -> Tensor:
        """(n_records, n_layers, n_heads): every head's previous-token score at each recorded step."""
        return torch.stack([m.previous for m in self.history])

    def best_heads(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((0, h), (L − 1, h')): layer 0's strongest previous-token head and the last layer's strongest induction
        head, at the end of training. Needs at least 2 layers."""
        if self.n_layers < 2:
            raise ValueError("a 1-layer model has no layer to compose with; best_heads needs 2 layers")
        final = self.final
        return (0, int(final.previous[0].argmax())), (self.n_layers - 1, int(final.induction[-1].argmax()))


def train_induction_model(
    seed: int = 0,
    n_layers: int = 2,
    task: RepeatedHalvesTask | None = None,
    config: TrainConfig = INDUCTION_RECIPE,
    d_model: int = 64,
    n_heads: int = 4,
    probes: dict[int, Tensor] | None = None,
    snapshot_every: int | None = None,
    device: torch.device | str | None = "cpu",
    progress: bool = True,
) -> InductionRun:
    """Train one seed of the induction recipe with :func:`manyheads.train` and record the phase change (chapter 6).

    Every ``config.eval_every`` steps (step 0 included) it measures :func:`repeat_metrics` on ``probes``
    (default: :func:`probe_batches` of ``task``) and, every ``snapshot_every`` steps, keeps a CPU copy of the
    weights for a training-step slider (load one with ``run.model.load_state_dict(run.snapshots[step])``).
    ``task`` defaults to ``RepeatedHalvesTask()`` (vocabulary 64 + BOS, half-lengths 4-16). ``n_layers=1`` gives
    the control that cannot form an induction head. Runs on the CPU by default.
    """
    task = RepeatedHalvesTask() if task is None else task
    if snapshot_every is not None and (snapshot_every < 1 or snapshot_every % config.eval_every):
        raise ValueError(
            f"snapshot_every must be a positive multiple of config.eval_every={config.eval_every}, got {snapshot_every}"
        )
    probes = probe_batches(task) if probes is None else probes
    run = InductionRun(model=None, seed=seed, n_layers=n_layers)  # the model is set once trained

    def record(step: int, model: nn.Module) -> None:
        run.steps.append(step)
        run.history.append(repeat_metrics(model, probes))
        if snapshot_every is not None and step % snapshot_every == 0:
            run.snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    start = time.perf_counter()
    result = train(
        lambda: AttentionOnlyTransformer.for_task(task, d_model, n_heads, n_layers),
        task,
        replace(config, seed=seed),
        device=device,
        progress=progress,
        desc=f"{n_layers}-layer model, seed {seed}",
        on_eval=record,
    )
    run.seconds = time.perf_counter() - start
    run.model, run.train_loss = result.model, result.train_loss
    return run


@torch.no_grad()
def composition_test(model: AttentionOnlyTransformer, probes: dict[int, Tensor], source) -> dict[str, RepeatMetrics]:
    """The model's :class:`RepeatMetrics` with the ``source`` heads removed from one input of later layers.

    ``source``: one (layer, head) pair or an iterable of them (e.g. all of layer 0). Returns {"none": intact,
    "q": …, "k": …, "v": …}: the source heads' output subtracted from the queries, the keys or the values of every
    later layer only (:class:`~manyheads.models.attention_only.HeadPath`). For layer 0's previous-token head and
    the induction head (layer, head) = t, compare ``[path].induction[t]``: if the induction head is built by
    K-composition, removing the source from its keys destroys the score and removing it from its queries does not;
    a seed that built it by Q-composition shows the opposite. Values cannot move an attention pattern, so the "v"
    score equals the intact one by construction; what removing the source from the values changes is what is
    copied: compare ``[path].second`` (the loss on the second copy) for that.
    """
    pairs = [source] if _is_pair(source) else list(source)
    if not pairs or not all(_is_pair(p) for p in pairs):
        raise ValueError(f"source must be a (layer, head) pair or an iterable of them, got {source!r}")
    results = {"none": repeat_metrics(model, probes)}
    for path in COMPOSITION_PATHS:
        results[path] = repeat_metrics(model, probes, remove=[HeadPath(layer, head, path) for layer, head in pairs])
    return results


def _train_to_bytes(kwargs: dict) -> bytes:
    """Worker side of :func:`train_in_background`: one run, serialised with torch.save (plain bytes cross the
    process boundary without torch's shared-memory tensor passing)."""
    run = train_induction_model(**kwargs, progress=False)
    buffer = io.BytesIO()
    torch.save(run, buffer)
    return buffer.getvalue()


class BackgroundRuns:
    """Runs of :func:`train_induction_model` under way in worker processes; :meth:`results` waits for them."""

    def __init__(self, futures: list[Future]) -> None:
        self._futures = futures

    def done(self) -> bool:
        """Whether every run has finished."""
        return all(f.done() for f in self._futures)

    def results(self) -> list[InductionRun]:
        """The finished runs, in the order of the jobs (waits for those still training; re-raises a worker's error)."""
        return [torch.load(io.BytesIO(f.result()), weights_only=False) for f in self._futures]


def train_in_background(jobs: Sequence[Mapping], processes: int = 2) -> BackgroundRuns:
    """Start :func:`train_induction_model` once per job, ``processes`` at a time, each in its own process (chapter 6).

    ``jobs``: keyword arguments of :func:`train_induction_model`, one mapping per run (e.g. ``{"seed": 1,
    "snapshot_every": 100}``, ``{"seed": 0, "n_layers": 1}``); ``progress`` is always off. Returns at once; call
    ``.results()`` for the :class:`InductionRun` objects, in the order of ``jobs``, identical to training each job
    here (same seeds, same CPU arithmetic). Workers are started fresh ("spawn"), so this works from a notebook; a
    script must call it under ``if __name__ == "__main__":``, since each worker imports the script first.
    """
    jobs = [dict(job) for job in jobs]
    if not jobs:
        raise ValueError("jobs is empty: give one dict of train_induction_model arguments per run")
    allowed = set(inspect.signature(train_induction_model).parameters) - {"progress"}
    for job in jobs:
        if set(job) - allowed:
            raise ValueError(
                f"unsupported train_induction_model arguments {sorted(set(job) - allowed)}; a job takes "
                f"{sorted(allowed)}"
            )
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive int, got {processes!r}")
    executor = ProcessPoolExecutor(min(processes, len(jobs)), mp_context=multiprocessing.get_context("spawn"))
    futures = [executor.submit(_train_to_bytes, job) for job in jobs]
    executor.shutdown(wait=False)  # the submitted runs go on; the workers exit when they are done
    return BackgroundRuns(futures)
