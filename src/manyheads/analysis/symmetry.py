"""What if all heads learned the same thing? Heads that start identical stay identical (chapter 5).

Gradient descent cannot tell apart two heads that have the same Q, K, V slices and the same block of W_o: they
compute the same output, receive the same gradient, and so take the same step. Adam keeps them together too, because
its per-parameter moment estimates see the same gradients. The heads then stay one head copied n times, and the
model is no better than a single head of width d_head. Only something that treats heads differently breaks the tie:
a different initialisation, dropout (a different mask per head), or arithmetic that sums the same numbers in a
different order for different heads (floating-point addition is not associative). The toy model has no dropout and,
on a CPU, computes every head with the same operations in the same order, so its heads stay identical bit for bit.
The identical state is a fixed point of training but an unstable one: a difference as small as one rounding error
grows until the heads are as different as independently initialised ones.

* :func:`make_heads_identical` copies one head's weights into every head of every attention layer;
* :func:`head_spread` is the largest difference between any head's weights and the first head's;
* :func:`attention_spread` is the same for what the heads do: their attention weights on a batch;
* :func:`rounding_tolerance` is the spread that float32 arithmetic may produce without anything being learned;
* :func:`symmetry_experiment` trains the chapter-1 model (:class:`~manyheads.models.TinyAttentionModel`) with the
  course's loop (:func:`manyheads.training.train`) from identical, slightly perturbed and normal initialisations,
  records the spread after every step, and measures what the lost diversity costs in accuracy;
  :func:`symmetry_table` puts the runs in a table for :func:`manyheads.show_table`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention

__all__ = [
    "SYMMETRY_INITS",
    "make_heads_identical",
    "head_spread",
    "attention_spread",
    "rounding_tolerance",
    "SymmetryRun",
    "symmetry_experiment",
    "symmetry_table",
]

SYMMETRY_INITS = ("identical", "perturbed", "normal")
"""The initialisations :func:`symmetry_experiment` compares: every head a copy of head 0; the same copies plus noise
of size ``perturbation`` (a stand-in for anything that treats heads differently); PyTorch's default initialisation."""


def _layers(model: nn.Module) -> list[MultiHeadAttention]:
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} contains no manyheads.attention.MultiHeadAttention layer")
    for layer in layers:
        if layer.n_kv_heads != layer.n_heads:
            raise ValueError(
                f"a layer shares key/value heads (n_kv_heads={layer.n_kv_heads} < n_heads={layer.n_heads}); "
                "heads can only be compared weight by weight when each has its own K and V"
            )
    return layers


def _head_blocks(layer: MultiHeadAttention) -> list[Tensor]:
    """Each projection's weights (and biases) with the heads as the first axis: (n_heads, ...) tensors.

    W_q, W_k: rows h·d_head … (h+1)·d_head; W_v: rows of width d_value; W_o: the columns that read head h.
    """
    n, d, dv = layer.n_heads, layer.d_head, layer.d_value
    blocks = [
        layer.W_q.weight.view(n, d, -1),
        layer.W_k.weight.view(n, d, -1),
        layer.W_v.weight.view(n, dv, -1),
        layer.W_o.weight.view(layer.d_model, n, dv).transpose(0, 1),
    ]
    blocks += [lin.bias.view(n, -1) for lin in (layer.W_q, layer.W_k, layer.W_v) if lin.bias is not None]
    return blocks


@torch.no_grad()
def make_heads_identical(model: nn.Module, source: int = 0) -> nn.Module:
    """Copy head ``source``'s W_q, W_k, W_v slices (and biases) and its block of W_o into every head, in place.

    Works on every :class:`~manyheads.attention.MultiHeadAttention` inside ``model`` (or on one such layer).
    W_o's bias belongs to no head and is left alone. Returns the model. Chapter 5.
    """
    for layer in _layers(model):
        if not 0 <= source < layer.n_heads:
            raise IndexError(f"source head {source} is out of range: the layer has {layer.n_heads} heads")
        for block in _head_blocks(layer):
            block.copy_(block[source].expand_as(block).clone())
    return model


@torch.no_grad()
def head_spread(model: nn.Module) -> float:
    """max over layers, projections and heads h of |θ_h − θ_0|: the largest weight difference between a head and
    head 0 (0.0 exactly when every head is a copy of head 0; also 0.0 for one-head layers). Chapter 5."""
    spread = 0.0
    for layer in _layers(model):
        for block in _head_blocks(layer):
            spread = max(spread, float((block - block[:1]).abs().max()))
    return spread


@torch.no_grad()
def attention_spread(model: nn.Module, tokens: Tensor) -> float:
    """max |weights_h − weights_0| over the batch, positions and heads: do the heads attend differently? Chapter 5.

    ``model(tokens)`` must return ``(output, weights)`` with weights (batch, n_heads, seq_q, seq_k), as the toy model
    does. 0 means every head puts exactly the same weight on every key, i.e. the heads are one head copied.
    """
    was_training = model.training
    model.eval()
    try:
        _, weights = model(tokens)
    finally:
        model.train(was_training)
    return float((weights - weights[:, :1]).abs().max())


def rounding_tolerance(model: nn.Module, steps: int, dtype: torch.dtype = torch.float32) -> float:
    """The head spread that rounding alone could produce in ``steps`` training steps: steps × ε × max |θ|.

    ε is the machine epsilon of ``dtype`` (2⁻²³ ≈ 1.2e-7 for float32) and max |θ| the largest weight of the model's
    attention layers, so ε × max |θ| is about one rounding error of that weight. If two heads' gradients were
    computed by sums taken in different orders (GPU kernels may do that; associativity does not hold in floating
    point), each step could move their weights apart by about that much, and without amplification those
    differences would add up at most linearly. A spread of exactly 0 means the heads were computed bit for bit
    alike. Beware the "without amplification": identical heads are an *unstable* fixed point of training, and
    :func:`symmetry_experiment`'s "perturbed" runs show a difference of one rounding error growing to the size of
    the weights within a few hundred steps. So a spread that stays within this tolerance all along means that no
    rounding difference ever arose, not that a small one was tolerated. Chapter 5.
    """
    if steps < 0:
        raise ValueError(f"steps must be non-negative, got {steps}")
    largest = max(float(p.detach().abs().max()) for layer in _layers(model) for p in layer.parameters())
    return max(steps, 1) * torch.finfo(dtype).eps * largest


@dataclass(frozen=True)
class SymmetryRun:
    """One training run of :func:`symmetry_experiment`.

    spread: :func:`head_spread` before every training step and after the last (steps + 1 values).
    attention_spread: :func:`attention_spread` of the trained model on the held-out batch.
    tolerance: :func:`rounding_tolerance` of the trained model for this many steps.
    accuracy: final held-out accuracy, one value per relation.
    """

    n_heads: int
    d_head: int
    init: str
    seed: int
    spread: tuple[float, ...]
    attention_spread: float
    tolerance: float
    accuracy: tuple[float, ...]
    seconds: float

    @property
    def max_spread(self) -> float:
        """The largest head spread seen at any step."""
        return max(self.spread)

    @property
    def mean_accuracy(self) -> float:
        return sum(self.accuracy) / len(self.accuracy)

    @property
    def within_tolerance(self) -> bool:
        """Whether the heads never differed by more than rounding could explain."""
        return self.max_spread <= self.tolerance


def symmetry_experiment(
    task,
    d_model: int,
    head_counts: Sequence[int],
    config,
    seeds: Sequence[int] = (0,),
    inits: Sequence[str] = SYMMETRY_INITS,
    perturbation: float = 1e-7,
    device: torch.device | str | None = "cpu",
    progress: bool = True,
    d_head: int | None = None,
) -> list[SymmetryRun]:
    """Train the chapter-1 model from each initialisation in ``inits``, for every head count and seed (chapter 5).

    ``task``: a :class:`~manyheads.data.tasks.TwoRelationTask`; ``config``: a
    :class:`~manyheads.training.TrainConfig` whose seed is replaced by each seed (so the three initialisations of
    one seed start from the same weights and see the same batches: the identical model copies head 0 of the normal
    one). ``perturbation``: the size of the uniform noise in [−p, p] added to every attention weight of the
    "perturbed" model after the copy; the default, 1e-7, is about one float32 rounding error of a weight near 1, the
    kind of difference that summing in another order would make. The model has no dropout, the loss is the course's,
    the optimiser Adam, as in every chapter. ``device`` defaults to the CPU, where a run repeats bit for bit.
    Returns one :class:`SymmetryRun` per (head count, initialisation, seed), in that order; a one-head model has no
    other head to copy, so only its "normal" runs are made. ``d_head``: every head's width, whatever the head count
    (default ``d_model // n_heads``); give it to compare n identical heads with one head **of the same width**, the
    model that n copies of one head amount to.
    """
    from manyheads.models.tiny import TinyAttentionModel
    from manyheads.runtime import progress_bar
    from manyheads.training import train

    unknown = [init for init in inits if init not in SYMMETRY_INITS]
    if unknown or not inits:
        raise ValueError(f"inits must be a non-empty selection of {SYMMETRY_INITS}, got {list(inits)}")
    if not seeds or not head_counts:
        raise ValueError("give at least one seed and one head count")
    if d_head is not None and d_head < 1:
        raise ValueError(f"d_head must be a positive width, got {d_head}")
    if perturbation < 0:
        raise ValueError(f"perturbation must be non-negative, got {perturbation}")
    runs = []
    plan = [(h, init, seed) for h in head_counts for init in inits for seed in seeds if h > 1 or init == "normal"]
    for n_heads, init, seed in progress_bar(plan, "symmetry runs", show=progress):
        spreads: list[float] = []

        def make_model(n_heads=n_heads, init=init, seed=seed, spreads=spreads) -> nn.Module:
            model = TinyAttentionModel.for_task(task, d_model, n_heads, d_head=d_head)
            if init != "normal":
                make_heads_identical(model)
            if init == "perturbed":
                noise = torch.Generator().manual_seed(seed + 1)
                with torch.no_grad():
                    for p in model.attention.parameters():
                        p.add_((torch.rand(p.shape, generator=noise) * 2 - 1) * perturbation)

            # Called at every training forward, i.e. once per step before it (evaluation runs in eval mode).
            def record(module, _inputs):
                if module.training:
                    spreads.append(head_spread(module))

            model.register_forward_pre_hook(record)
            return model

        result = train(make_model, task, replace(config, seed=seed), device=device, progress=False)
        model = result.model
        spreads.append(head_spread(model))
        eval_tokens, _ = task.sample(config.eval_size, torch.Generator().manual_seed(config.eval_seed), result.device)
        runs.append(
            SymmetryRun(
                n_heads=n_heads,
                d_head=model.d_head,
                init=init,
                seed=seed,
                spread=tuple(spreads),
                attention_spread=attention_spread(model, eval_tokens),
                tolerance=rounding_tolerance(model, config.steps),
                accuracy=tuple(result.final_accuracy),
                seconds=result.seconds,
            )
        )
    return runs


SYMMETRY_HEADERS = [
    "heads",
    "d_head",
    "initialisation",
    "seeds",
    "accuracy (mean ± sd over seeds)",
    "largest head spread",
    "rounding tolerance",
    "attention spread",
]


def symmetry_table(runs: Sequence[SymmetryRun]) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` for :func:`manyheads.show_table`, one row per head count and initialisation (chapter 5).

    Accuracy is the mean over relations, then mean ± sample standard deviation over seeds (the mean alone for one
    seed); the spreads and the
    tolerance are the largest over seeds.
    """
    groups: dict[tuple[int, str], list[SymmetryRun]] = {}
    for run in runs:
        groups.setdefault((run.n_heads, run.init), []).append(run)
    rows = []
    for (n_heads, init), group in groups.items():
        accuracy = [run.mean_accuracy for run in group]
        mean = f"{statistics.fmean(accuracy):.3f}"  # no "± 0.000" for one seed: one run has no spread to show
        shown = f"{mean} ± {statistics.stdev(accuracy):.3f}" if len(accuracy) > 1 else mean
        rows.append(
            [
                str(n_heads),
                str(group[0].d_head),
                init,
                str(len(group)),
                shown,
                f"{max(run.max_spread for run in group):.2g}",
                f"{max(run.tolerance for run in group):.2g}",
                f"{max(run.attention_spread for run in group):.2g}",
            ]
        )
    headers = list(SYMMETRY_HEADERS)
    if all(len(group) == 1 for group in groups.values()):  # one run has no spread: do not promise a "± sd"
        headers[headers.index("accuracy (mean ± sd over seeds)")] = "accuracy (one seed)"
    return headers, rows
