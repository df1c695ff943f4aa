"""Induction heads: the score, and the from-scratch experiment on a 2-layer attention-only model (chapter 6).

On ``[BOS] + r + r`` an induction head at a token of the second copy attends to the token right after that token's
earlier occurrence (Olsson et al. 2022's "prefix matching"), and copies it: [A][B] … [A] → [B]. One attention layer
cannot do it: its queries and keys hold only their own token and position, and no information has moved between
positions yet. In a 2-layer attention-only transformer an earlier head moves it, usually into the keys: a
previous-token head in layer 0 writes "the token before me was A" into each position, and the induction head in
layer 1 forms its keys from that write (K-composition, Elhage et al. 2021). Some seeds feed the queries instead
(Q-composition); :func:`composition_test` tells the two apart. Layers count from 0 here; the papers' layers 1 and 2
are layers 0 and 1.

* :func:`induction_score`, with :func:`~manyheads.analysis.layers.previous_token_score`, scores heads;
* :func:`train_induction_model` trains one seed of the recipe (:data:`INDUCTION_RECIPE`) with the course's training
  loop and records the phase change (losses on both copies, the scores) and, if asked, checkpoints;
* :func:`repeat_metrics` measures a model on fixed probe batches (:func:`probe_batches`), under any intervention;
* :func:`composition_test` removes the previous-token head's output from only the queries, keys or values of
  layer 1 and reports what is left of the induction score and of the second copy's loss;
* :func:`train_in_background` trains several seeds at once, each in its own process (the loop runs on one thread,
  so two seeds on two cores take about the time of one), while the caller goes on with other work;
* the controls that let a pretrained model's induction heads fail the test (CONTRIBUTING.md, "Claims follow from
  evidence"): :func:`shifted_repeats` (inputs where the copy sits at a random distance, so that no fixed position
  finds the target), :func:`token_induction_score` (the target found from the tokens, on any input),
  :func:`same_layer_heads` (random heads from the same layers as the chosen ones) and :func:`bootstrap_mean`.

The induction score here is the mean over the second copy's queries of the weight on the target key, so a perfect
induction head scores 1 (TransformerLens's detector divides by the whole pattern instead, and tops out near 0.5 on
these inputs; facts §22).
"""

from __future__ import annotations

import concurrent.futures
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

from manyheads.analysis.layers import check_attention_weights, previous_token_score
from manyheads.data.repeats import RepeatedHalvesTask
from manyheads.interventions import COMPOSITION_PATHS, HeadPath, is_head_pair, paths_removed
from manyheads.models.attention_only import AttentionOnlyTransformer
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
    "induction_runs",
    "shifted_repeats",
    "token_induction_score",
    "same_layer_heads",
    "bootstrap_mean",
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
    check_attention_weights(weights)
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
    and average the losses and scores over half-lengths, with the ``remove`` paths removed
    (:func:`manyheads.paths_removed`); for head ablation, call this inside :func:`manyheads.ablated`."""
    if not probes:
        raise ValueError("probes is empty: make them with probe_batches(task)")
    device = next(model.parameters()).device
    remove = list(remove)
    firsts, seconds, inductions, previous = [], [], [], []
    for half, tokens in probes.items():
        tokens = tokens.to(device)
        _check_half(tokens, half)
        with paths_removed(model, remove):
            logits, weights = model(tokens)
        losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")  # (batch, seq − 1)
        firsts.append(losses[:, :half].mean())
        seconds.append(losses[:, half + 1 :].mean())
        inductions.append(_induction(weights, half).mean(1))  # (n_layers, n_heads)
        previous.append(torch.stack([previous_token_score(w) for w in weights]))  # (n_layers, n_heads)
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
    later layer only (:class:`~manyheads.interventions.HeadPath`). For layer 0's previous-token head and
    the induction head (layer, head) = t, compare ``[path].induction[t]``: if the induction head is built by
    K-composition, removing the source from its keys destroys the score and removing it from its queries does not;
    a seed that built it by Q-composition shows the opposite. Values cannot move an attention pattern, so the "v"
    score equals the intact one by construction; what removing the source from the values changes is what is
    copied: compare ``[path].second`` (the loss on the second copy) for that.
    """
    pairs = [source] if is_head_pair(source) else list(source)
    if not pairs or not all(is_head_pair(p) for p in pairs):
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

    def wait(self) -> None:
        """Wait until every run has finished (or failed), without loading them: :meth:`results` does that."""
        concurrent.futures.wait(self._futures)

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
    runs = BackgroundRuns(futures)
    _STARTED[_jobs_key(jobs)] = runs
    return runs


_STARTED: dict[str, BackgroundRuns] = {}  # jobs (as _jobs_key spells them) → the runs train_in_background started


def _jobs_key(jobs: Sequence[Mapping]) -> str:
    return repr([sorted((k, str(v)) for k, v in dict(job).items()) for job in jobs])


def induction_runs(jobs: Sequence[Mapping]) -> list[InductionRun]:
    """The :class:`InductionRun` of each job (keyword arguments of :func:`train_induction_model`), in order
    (chapter 6).

    If :func:`train_in_background` was started earlier with the same jobs (a chapter starts it in its set-up, so
    that training overlaps with other work), this waits for those runs and returns them; otherwise it trains each
    job here, one after the other. Either way the runs are the same (same seeds, same CPU arithmetic).
    """
    jobs = [dict(job) for job in jobs]
    started = _STARTED.pop(_jobs_key(jobs), None)
    if started is not None:
        return started.results()
    return [train_induction_model(**job, progress=False) for job in jobs]


# -- controls for a pretrained model's induction heads (chapter 6) ---------------------------------------------------


def shifted_repeats(
    length: int, *, vocabulary: Tensor, bos_id: int, seeds: Iterable[int], max_shift: int
) -> tuple[Tensor, Tensor]:
    """Repeats that position arithmetic cannot find: one row ``[BOS] + p + r + f + r`` per seed (chapter 6).

    r: ``length`` ids drawn uniformly from ``vocabulary``; p and f: filler ids from ``vocabulary`` that are not in r,
    with len(f) drawn uniformly from 1 … ``max_shift`` and len(p) = ``max_shift`` − len(f), so that every row has
    the same length, 1 + ``max_shift`` + 2·``length``, while both where r starts and how far the second copy lies
    from the first change from row to row. On ``[BOS] + r + r`` a head that always looks ``length`` − 1 tokens back
    scores like a perfect induction head; here it cannot. Returns (ids (rows, seq), second (rows,)): the position
    where each row's second copy starts. Each row depends on its seed only.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be a positive int, got {length!r}")
    if isinstance(max_shift, bool) or not isinstance(max_shift, int) or max_shift < 1:
        raise ValueError(f"max_shift must be a positive int (the longest gap between the copies), got {max_shift!r}")
    rows, second = [], []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        r = vocabulary[torch.randint(len(vocabulary), (length,), generator=generator)]
        allowed = vocabulary[~torch.isin(vocabulary, r)]
        if len(allowed) == 0:
            raise ValueError("vocabulary has no id outside r to fill the gaps with")
        filler = allowed[torch.randint(len(allowed), (max_shift,), generator=generator)]
        gap = int(torch.randint(1, max_shift + 1, (1,), generator=generator))
        prefix = max_shift - gap
        rows.append(torch.cat([torch.tensor([bos_id]), filler[:prefix], r, filler[prefix:], r]))
        second.append(1 + prefix + length + gap)
    if not rows:
        raise ValueError("seeds is empty: give at least one seed")
    return torch.stack(rows), torch.tensor(second)


def token_induction_score(weights: Tensor, tokens: Tensor, queries: Tensor | None = None) -> Tensor:
    """The induction score with the target found from the tokens, not from positions: (n_heads,) (chapter 6).

    weights (batch, n_heads, seq, seq) and the tokens they were computed on (batch, seq). At query i the target keys
    are every position j + 1 ≤ i such that j < i holds the same token as i (the token after an earlier occurrence
    of the current token); the query's score is its total weight on them. The result is the mean over ``queries``
    (a (batch, seq) bool mask; default: every query whose token occurred before). On ``[BOS] + r + r`` with no token
    repeated inside r it equals :func:`induction_score`; unlike it, it needs no fixed distance between the copies,
    so it also scores :func:`shifted_repeats` and sequences repeated several times.
    """
    check_attention_weights(weights)
    if not isinstance(tokens, Tensor) or tokens.dim() != 2 or tokens.shape != (weights.shape[0], weights.shape[-1]):
        raise ValueError(f"tokens must be (batch, seq) = {(weights.shape[0], weights.shape[-1])}, got {tokens!r}")
    seq = tokens.shape[1]
    tokens = tokens.to(weights.device)
    earlier = torch.ones(seq, seq, dtype=torch.bool, device=weights.device).tril(-1)
    match = (tokens[:, :, None] == tokens[:, None, :]) & earlier  # (batch, i, j): j < i holds i's token
    target = torch.zeros_like(match)
    target[:, :, 1:] = match[:, :, :-1]  # key j + 1 for every matching j (j + 1 ≤ i, since j < i)
    if queries is None:
        queries = match.any(-1)
    elif not isinstance(queries, Tensor) or queries.shape != tokens.shape or queries.dtype != torch.bool:
        raise ValueError(f"queries must be a (batch, seq) bool mask, got {queries!r}")
    queries = queries.to(weights.device)
    if not queries.any():
        raise ValueError("no query to score: no token occurs twice (or the queries mask is empty)")
    per_query = (weights * target[:, None].to(weights.dtype)).sum(-1)  # (batch, n_heads, seq)
    return (per_query * queries[:, None]).sum((0, 2)) / queries.sum()


def same_layer_heads(
    heads: Sequence[tuple[int, int]], n_heads: int, n_draws: int, seed: int = 0
) -> list[list[tuple[int, int]]]:
    """Random control sets for an ablation: ``n_draws`` lists, each with one head drawn from the layer of each of
    ``heads``, never one of ``heads`` and never twice in a list (chapter 6).

    A head set chosen for a property is compared with random heads **from the same layers**: random heads drawn
    from the whole model would mostly come from layers whose removal costs little, and make any chosen set look
    special. ``n_heads``: heads per layer. Seeded: the same arguments give the same draws.
    """
    chosen = [(int(layer), int(head)) for layer, head in heads]
    if not chosen or n_draws < 1:
        raise ValueError("need at least one head and one draw")
    generator = torch.Generator().manual_seed(seed)
    draws = []
    for _ in range(n_draws):
        picked: list[tuple[int, int]] = []
        for layer, _ in chosen:
            free = [h for h in range(n_heads) if (layer, h) not in chosen and (layer, h) not in picked]
            if not free:
                raise ValueError(f"layer {layer} has no head left to draw: too many chosen heads in it")
            picked.append((layer, free[int(torch.randint(len(free), (1,), generator=generator))]))
        draws.append(picked)
    return draws


def bootstrap_mean(values, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` (one per item, e.g. a loss difference per sequence) and its
    percentile bootstrap interval, items resampled with replacement ``n_boot`` times (seeded; chapter 6)."""
    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    if len(x) < 2:
        raise ValueError("a bootstrap interval needs at least two items")
    generator = torch.Generator().manual_seed(seed)
    means = x[torch.randint(len(x), (n_boot, len(x)), generator=generator)].mean(1)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return float(x.mean()), low, high
