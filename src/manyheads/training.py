"""The one training loop of the course, seeded, with a progress bar and learning curves (chapters 1-4 train with it).

Fresh batches are drawn every step from the task (there is no fixed training set to overfit); accuracy is measured
on one held-out batch that depends only on ``TrainConfig.eval_seed``, so every model in a comparison is scored on
the same sequences. The model is built and initialised on the CPU after seeding and only then moved to
``mh.device()``, so a seed gives the same starting point and the same data everywhere, and exactly the same
numbers on a CPU.

When ``$MANYHEADS_TRAIN_CACHE`` names a folder (the test suite sets it for its own run; readers, Colab and the
grader never do), a CPU run is stored there under a key of everything that decides it (the package's source, torch's
version, the task, the config and the model's initial weights) and a second identical call loads it instead of
training again: the same weights, curves and random-number state afterwards, so the rest of a notebook gives the
same numbers either way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import manyheads
from manyheads.data.tasks import IGNORE_INDEX, TwoRelationTask
from manyheads.runtime import device as default_device
from manyheads.runtime import progress_bar, seed_everything

__all__ = ["TrainConfig", "TrainResult", "readout_accuracy", "evaluate", "train", "train_grid"]


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one run. ``seed`` fixes the initialisation and the training batches."""

    steps: int = 400
    batch_size: int = 32
    lr: float = 1e-2
    eval_every: int = 20
    eval_size: int = 512
    seed: int = 0
    eval_seed: int = 1_000_003
    optimizer: str = "adam"  # or "adamw" (decoupled weight decay; chapter 6's induction recipe)
    weight_decay: float = 0.01  # AdamW's only (torch's default); Adam has none


@dataclass
class TrainResult:
    """What :func:`train` returns. Curves are plain lists of floats, ready to plot or tabulate.

    train_loss: one value per step (length ``steps``).
    eval_steps: the steps at which accuracy was measured (0, eval_every, …, steps).
    eval_accuracy: one list per evaluation, holding the accuracy of each relation (len(eval_steps) × n_relations).
    """

    model: nn.Module
    train_loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_accuracy: list[list[float]] = field(default_factory=list)
    seconds: float = 0.0
    device: str = "cpu"

    @property
    def final_accuracy(self) -> list[float]:
        """Accuracy of each relation at the end of training."""
        return self.eval_accuracy[-1]


def readout_accuracy(logits: Tensor, targets: Tensor) -> Tensor:
    """Share of correct argmax predictions, per relation, ignoring :data:`~manyheads.data.tasks.IGNORE_INDEX` targets.

    logits: (batch, seq, n_relations, vocab); targets: (batch, seq, n_relations). Returns (n_relations,).
    A language model's logits (batch, seq, vocab) with targets (batch, seq) count as one relation.
    """
    logits, targets = _with_relations(logits, targets)
    scored = targets != IGNORE_INDEX
    correct = (logits.argmax(-1) == targets) & scored
    return correct.sum(dim=(0, 1)).float() / scored.sum(dim=(0, 1)).clamp(min=1).float()


@torch.no_grad()
def evaluate(model: nn.Module, tokens: Tensor, targets: Tensor) -> list[float]:
    """Accuracy of each relation on one batch. tokens: (batch, seq); targets: (batch, seq, n_relations)."""
    was_training = model.training
    model.eval()
    logits, _ = model(tokens)
    model.train(was_training)
    return readout_accuracy(logits, targets).tolist()


def _with_relations(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Next-token targets (batch, seq) and logits (batch, seq, vocab) as one relation: (…, 1, vocab), (…, 1)."""
    if targets.dim() == 2:
        return logits[:, :, None], targets[:, :, None]
    return logits, targets


def _loss(logits: Tensor, targets: Tensor) -> Tensor:
    logits, targets = _with_relations(logits, targets)
    # Summed over relations (each relation's loss is a mean over its scored positions): each relation weighs the same.
    return (
        F.cross_entropy(logits.flatten(0, 1).transpose(1, 2), targets.flatten(0, 1), ignore_index=IGNORE_INDEX)
        * targets.shape[-1]
    )


def _adam(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer not in ("adam", "adamw"):
        raise ValueError(f"optimizer must be 'adam' or 'adamw', got {config.optimizer!r}")
    make, extra = torch.optim.Adam, {}
    if config.optimizer == "adamw":
        make, extra = torch.optim.AdamW, {"weight_decay": config.weight_decay}
    # The fused kernel is much faster for many tiny tensors; older torch builds lack it for some devices.
    try:
        return make(model.parameters(), lr=config.lr, fused=True, **extra)
    except (RuntimeError, TypeError):
        return make(model.parameters(), lr=config.lr, **extra)


def train(
    make_model: Callable[[], nn.Module],
    task: TwoRelationTask,
    config: TrainConfig = TrainConfig(),
    device: torch.device | str | None = None,
    progress: bool = True,
    desc: str | None = None,
    on_eval: Callable[[int, nn.Module], None] | None = None,
) -> TrainResult:
    """Seed, build the model with ``make_model()``, train it with Adam (or AdamW) on fresh batches, and record curves.

    The model must map (batch, seq) tokens to ``(logits, weights)`` with logits (batch, seq, n_relations, vocab),
    like :class:`manyheads.models.TinyAttentionModel`. ``device`` defaults to :func:`manyheads.device`.
    ``progress`` shows a tqdm bar (a widget in Jupyter, text elsewhere) that disappears when the run ends.
    A language model may instead return logits (batch, seq, vocab) for a task whose targets are (batch, seq).
    ``on_eval(step, model)``, if given, runs after each evaluation (step 0 included), the model in eval mode and
    gradients off, to record more than accuracy (chapter 6's induction scores and checkpoints).
    """
    device = torch.device(device) if device is not None else default_device()
    seed_everything(config.seed)
    model = make_model().to(device)
    data = torch.Generator().manual_seed(config.seed)
    eval_tokens, eval_targets = task.sample(config.eval_size, torch.Generator().manual_seed(config.eval_seed), device)
    cache = _cache_file(model, task, config, device) if on_eval is None else None
    if cache is not None and cache.is_file():
        return _load_run(cache, model, device)
    optimizer = _adam(model, config)
    result = TrainResult(model=model, device=str(device))

    def record(step: int) -> None:
        result.eval_steps.append(step)
        result.eval_accuracy.append(evaluate(model, eval_tokens, eval_targets))
        if on_eval is not None:
            model.eval()
            with torch.no_grad():
                on_eval(step, model)
            model.train()

    threads = torch.get_num_threads()
    if device.type == "cpu":
        # The tensors are tiny: spreading each operation over several threads costs more than it saves.
        torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        model.train()
        record(0)
        losses = torch.empty(config.steps, device=device)  # filled on the device: no host sync per step on a GPU
        for step in progress_bar(range(1, config.steps + 1), desc, show=progress, mininterval=0.5):
            tokens, targets = task.sample(config.batch_size, data, device)
            logits, _ = model(tokens)
            loss = _loss(logits, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses[step - 1] = loss.detach()
            if step % config.eval_every == 0 or step == config.steps:
                record(step)
        model.eval()
        result.train_loss = losses.tolist()
    finally:
        torch.set_num_threads(threads)
    result.seconds = time.perf_counter() - start
    if cache is not None:
        _save_run(cache, result)
    return result


CACHE_ENV = "MANYHEADS_TRAIN_CACHE"


@functools.cache
def _package_fingerprint() -> str:
    """sha256 of every source file of the package: a change to any model, task or this loop misses the cache."""
    root = Path(manyheads.__file__).parent
    digest = hashlib.sha256(torch.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def _cache_file(model: nn.Module, task, config: TrainConfig, device: torch.device) -> Path | None:
    folder = os.environ.get(CACHE_ENV)
    described = repr((type(task).__module__, repr(task), repr(config), repr(model)))
    if not folder or device.type != "cpu" or " at 0x" in described:  # an object without a stable repr: no key
        return None
    if _has_hooks(model):  # a hook may record something during training (chapter 3's symmetry runs): train for real
        return None
    digest = hashlib.sha256((_package_fingerprint() + described).encode())
    for name, tensor in model.state_dict().items():  # the initial weights, after seeding
        digest.update(name.encode() + tensor.detach().contiguous().numpy().tobytes())
    # Weights and repr do not tell models apart that differ only in how they use them (the number of heads splits
    # the same matrices differently), so the key also holds each module's settings and what the model computes.
    for name, module in model.named_modules():
        settings = {k: v for k, v in vars(module).items() if not k.startswith("_") and isinstance(v, SETTING_TYPES)}
        digest.update(repr((name, sorted(settings.items()))).encode())
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        was_training = model.training
        model.eval()
        tokens, _ = task.sample(2, torch.Generator().manual_seed(0), device)
        outputs = model(tokens)
        model.train(was_training)
    for tensor in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
        if isinstance(tensor, Tensor):
            digest.update(tensor.detach().float().contiguous().numpy().tobytes())
    return Path(folder) / f"{digest.hexdigest()}.pt"


SETTING_TYPES = (int, float, str, bool, tuple, type(None))


def _has_hooks(model: nn.Module) -> bool:
    from torch.nn.modules import module as torch_module

    hooks = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    global_hooks = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks")
    return (
        any(getattr(m, name, None) for m in model.modules() for name in hooks)
        or any(getattr(p, "_backward_hooks", None) for p in model.parameters())
        or any(getattr(torch_module, name, None) for name in global_hooks)
    )


def _rng_state() -> dict:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "numpy": json.dumps([kind, keys.tolist(), pos, has_gauss, gauss]),
        "random": json.dumps(random.getstate()),
    }


def _save_run(path: Path, result: TrainResult) -> None:
    run = {
        "state": result.model.state_dict(),
        "train_loss": result.train_loss,
        "eval_steps": result.eval_steps,
        "eval_accuracy": result.eval_accuracy,
        "seconds": result.seconds,
        "rng": _rng_state(),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        torch.save(run, partial)
        partial.replace(path)  # atomic: a reader never sees half a file
    except OSError:  # a read-only or full disk only costs the next caller a training run
        pass


def _load_run(path: Path, model: nn.Module, device: torch.device) -> TrainResult:
    run = torch.load(path, weights_only=True)
    model.load_state_dict(run["state"])
    model.eval()
    torch.set_rng_state(run["rng"]["torch"])
    kind, keys, pos, has_gauss, gauss = json.loads(run["rng"]["numpy"])
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, state, gauss_next = json.loads(run["rng"]["random"])
    random.setstate((version, tuple(state), gauss_next))
    return TrainResult(
        model=model,
        train_loss=run["train_loss"],
        eval_steps=run["eval_steps"],
        eval_accuracy=run["eval_accuracy"],
        seconds=run["seconds"],
        device=str(device),
    )


def train_grid(
    build: Callable[..., nn.Module],
    grid: Mapping[Hashable, Sequence],
    task: TwoRelationTask,
    config: TrainConfig = TrainConfig(),
    seeds: Sequence[int] = (0,),
    device: torch.device | str | None = None,
    progress: bool = True,
    desc: str = "training runs",
) -> dict[tuple[Hashable, int], TrainResult]:
    """Train one model per entry of ``grid`` and seed, the same way, under one progress bar (chapters 1-4).

    ``build(task, *grid[name])`` makes a model, e.g. ``build = TinyAttentionModel.for_task`` with
    ``grid = {"2 heads": (32, 2)}`` (d_model, n_heads). Every run is :func:`train` with ``config``'s seed replaced by
    the run's seed, so the same (name, seed) gives the same model wherever it is trained. Returns
    ``{(name, seed): TrainResult}`` in grid order, then seed order.
    """
    runs: dict[tuple[Hashable, int], TrainResult] = {}
    bar = progress_bar([(name, seed) for name in grid for seed in seeds], desc, show=progress)
    for name, seed in bar:
        bar.set_postfix_str(f"{name}, seed {seed}", refresh=False)
        runs[name, seed] = train(
            lambda name=name: build(task, *grid[name]), task, replace(config, seed=seed), device=device, progress=False
        )
    return runs
