"""Interventions on attention heads for any course model: gates, zero and mean ablation, gate gradients, removal.

Taught in chapter 5 (redundancy and pruning); chapters 6 and 7 reuse it to ablate heads of other models. Every
function takes a whole model -- the toy :class:`~manyheads.models.tiny.TinyAttentionModel`, the MiniLM
:class:`~manyheads.models.bert.BertEncoder`, any module holding :class:`~manyheads.attention.MultiHeadAttention`
layers -- and works through hooks and the layers' own ``head_gates`` buffers, as TransformerLens does: no model's
forward knows about interventions, and every context manager removes what it added on exit, also after an error.

Layers are the model's ``MultiHeadAttention`` modules in module order (:func:`attention_layers`); layer ``i`` is
position ``i`` in that list. Heads are named ``(layer, head)`` by their original index, also in a copy whose heads
were removed (:func:`remove_heads` records each layer's remaining original indices as ``head_ids``). A head
selection, ``heads`` below, is one ``(layer, head)`` pair, an iterable of pairs, or a bool tensor
(n_layers, n_heads), True = selected. Gates and masks are (n_layers, n_heads) tensors in that original numbering.

Path removal (chapter 6, :func:`paths_removed`) is finer than ablation: a head's output is subtracted from only one
*input* of the later layers (their queries, keys or values), which separates Q-, K- and V-composition (Elhage et
al. 2021). It too works through hooks, on any model whose attention layers are called as ``layer(q, k, v, ...)``
and add their output to a residual stream.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention

__all__ = [
    "attention_layers",
    "kept_heads",
    "head_mask",
    "current_gates",
    "gated",
    "gate_gradients",
    "gate_importance",
    "prune_mask",
    "head_output_means",
    "ablated",
    "ablated_each",
    "remove_heads",
    "HeadPath",
    "COMPOSITION_PATHS",
    "paths_removed",
    "remaining_head_ids",
    "has_intervention",
    "is_head_pair",
    "call_arguments",
    "real_token_mask",
]

ABLATION_MODES = ("zero", "mean")


def attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    """The model's ``MultiHeadAttention`` modules in module order: n_layers of them (the model itself if it is one)."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} contains no manyheads.attention.MultiHeadAttention layer")
    return layers


def remaining_head_ids(layer: MultiHeadAttention) -> tuple[int, ...]:
    """Original indices of the heads the layer still has, in the order of its weights (n_heads of them)."""
    return getattr(layer, "head_ids", tuple(range(layer.n_heads)))


def _original_n_heads(layer: MultiHeadAttention) -> int:
    return getattr(layer, "original_n_heads", layer.n_heads)


def _grid(layers: list[MultiHeadAttention]) -> tuple[int, int]:
    """(n_layers, n_heads) of gates and masks: n_heads counts the heads before any removal."""
    return len(layers), max(_original_n_heads(layer) for layer in layers)


def kept_heads(model: nn.Module) -> list[tuple[int, ...]]:
    """For each layer (n_layers entries), the original indices of the heads it still has, in order."""
    return [remaining_head_ids(layer) for layer in attention_layers(model)]


def _pairs(heads, layers: list[MultiHeadAttention]) -> list[tuple[int, int]]:
    """A head selection as a sorted list of distinct (layer, head) pairs, each naming a head the model still has."""
    n_layers, n_heads = _grid(layers)
    if isinstance(heads, Tensor):
        if heads.dtype != torch.bool:
            raise TypeError(f"a head mask must be a bool tensor (True = selected), got dtype {heads.dtype}")
        if heads.shape != (n_layers, n_heads):
            raise ValueError(
                f"a head mask must have shape ({n_layers}, {n_heads}) = (n_layers, n_heads), got {tuple(heads.shape)}"
            )
        pairs = [tuple(p) for p in heads.nonzero().tolist()]
    elif is_head_pair(heads):
        pairs = [heads]
    else:
        pairs = list(heads)
        bad = [p for p in pairs if not is_head_pair(p)]
        if bad:
            raise ValueError(
                f"heads must be (layer, head) pairs of ints, an iterable of them or a bool mask; got {bad[0]!r}"
            )
    pairs = sorted({(int(layer), int(head)) for layer, head in pairs})
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < _original_n_heads(layers[layer])):
            raise IndexError(
                f"head ({layer}, {head}) is out of range: the model has {n_layers} layers × {n_heads} heads"
            )
        if head not in remaining_head_ids(layers[layer]):
            raise ValueError(
                f"head ({layer}, {head}) was already removed; layer {layer} keeps heads "
                f"{list(remaining_head_ids(layers[layer]))}"
            )
    return pairs


def is_head_pair(value) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    )


def head_mask(model: nn.Module, heads) -> Tensor:
    """A head selection as a bool (n_layers, n_heads) tensor, True = selected, on the model's device.

    Checks that every selected head exists (IndexError) and was not removed (ValueError).
    """
    layers = attention_layers(model)
    mask = torch.zeros(_grid(layers), dtype=torch.bool, device=layers[0].head_gates.device)
    for layer, head in _pairs(heads, layers):
        mask[layer, head] = True
    return mask


def current_gates(model: nn.Module) -> Tensor:
    """The gates every head has now: (n_layers, n_heads), detached, on the model's device and in its gates' dtype.

    Removed heads read as 0.
    """
    layers = attention_layers(model)
    first = layers[0].head_gates
    gates = torch.zeros(_grid(layers), device=first.device, dtype=first.dtype)
    for i, layer in enumerate(layers):
        gates[i, list(remaining_head_ids(layer))] = layer.head_gates.detach().to(gates)
    return gates


@contextlib.contextmanager
def gated(model: nn.Module, gates: Tensor) -> Iterator[nn.Module]:
    """Run the model with every head's gate taken from ``gates`` (n_layers, n_heads), restored on exit.

    A gate multiplies its head's output before W_o: 0 masks the head, 1 leaves it as it is. ``gates`` may require
    grad: each forward inside the block then depends on it, so ``torch.autograd.grad(loss, gates)`` works after
    every forward. Gates of removed heads have no effect. Yields the model.
    """
    layers = attention_layers(model)
    if gates.shape != _grid(layers):
        raise ValueError(f"gates must have shape {_grid(layers)} = (n_layers, n_heads), got {tuple(gates.shape)}")
    saved = [layer.head_gates for layer in layers]
    handles = []
    try:
        for i, layer in enumerate(layers):
            ids = torch.tensor(remaining_head_ids(layer), device=layer.head_gates.device)
            row = gates.to(layer.head_gates.device)[i]

            # Indexing again at each forward gives every forward its own graph to backpropagate through.
            def refresh(module, _inputs, row=row, ids=ids):
                module.head_gates = row.index_select(0, ids)

            refresh.is_intervention = True
            layer.head_gates = row.detach().index_select(0, ids)  # so that current_gates reads them inside the block
            handles.append(layer.register_forward_pre_hook(refresh))
        yield model
    finally:
        for handle in handles:
            handle.remove()
        # Restoring the saved tensors also drops the graph pieces the hooks left in the buffers.
        for layer, gate in zip(layers, saved):
            layer.head_gates = gate


def gate_gradients(model: nn.Module, loss_fn: Callable, *args, **kwargs) -> Tensor:
    """∂loss/∂gate of every head at the current gates: (n_layers, n_heads), 0 for removed heads (chapter 5).

    ``loss_fn(output) -> scalar tensor`` receives ``model(*args, **kwargs)``. Parameter gradients are neither
    computed nor touched. Michel et al.'s importance of a head is the absolute value of this, averaged over data.
    """
    gates = current_gates(model).requires_grad_(True)
    with gated(model, gates), torch.enable_grad():
        loss = loss_fn(model(*args, **kwargs))
    (grad,) = torch.autograd.grad(loss, gates)
    return grad


def gate_importance(model: nn.Module, loss_fn: Callable, batches, normalize_layers: bool = False) -> Tensor:
    """Michel et al.'s head importance: the mean over batches of |∂loss/∂gate| at the current gates (chapter 5).

    ``batches`` is a non-empty iterable of ``(inputs, targets)`` pairs; ``inputs`` go to the model (a Mapping as
    keyword arguments, a tuple as positional ones, anything else as the one input) and ``loss_fn(output, targets)``
    must return a scalar that depends on the gates. Returns (n_layers, n_heads), detached, 0 for removed heads.

    The absolute value is taken per batch, before averaging: Michel et al.'s Eq. 2 takes it per example, which
    this is exactly with batches of one. With ``normalize_layers=True`` each layer's row is divided by its L2 norm,
    as Michel et al. do before ranking heads over the whole model; by default the raw scores are returned.
    A loss that is minimal at the current gates (a self-distillation loss at gates = 1) has zero gradient there
    and ranks nothing.
    """
    total, n = None, 0
    for batch in batches:
        try:
            inputs, targets = batch
        except (TypeError, ValueError):
            raise ValueError(
                f"each batch must be an (inputs, targets) pair for model(inputs) and loss_fn(output, targets); "
                f"got {type(batch).__name__}"
            ) from None
        args, kwargs = call_arguments(inputs)
        grad = gate_gradients(model, lambda output, targets=targets: loss_fn(output, targets), *args, **kwargs).abs()
        total = grad if total is None else total + grad
        n += 1
    if n == 0:
        raise ValueError("batches is empty: gate_importance needs at least one (inputs, targets) pair")
    importance = total / n
    if normalize_layers:
        # A layer whose scores are all 0 (every head removed or irrelevant) stays 0 instead of becoming NaN.
        importance = importance / importance.norm(dim=1, keepdim=True).clamp_min(torch.finfo(importance.dtype).tiny)
    return importance


def prune_mask(importance: Tensor, fraction: float) -> Tensor:
    """A bool keep-mask of ``importance``'s shape: the floor(fraction × n) least important heads are False (chapter 5).

    The heads are ranked over the whole model, not per layer (normalise per layer first if you want Michel et al.'s
    ranking, see :func:`gate_importance`); exactly k = floor(fraction × number of heads) are False, ties broken by
    position. ``importance`` is not changed. ``fraction`` must lie in [0, 1]. Use ``~prune_mask(...)`` as the head
    selection for :func:`ablated` or :func:`remove_heads`.
    """
    if not isinstance(importance, Tensor):
        raise TypeError(f"importance must be a tensor of scores, got {type(importance).__name__}")
    fraction = float(fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be between 0 and 1 (the share of heads to prune), got {fraction}")
    if importance.is_floating_point() and torch.isnan(importance).any():
        raise ValueError("importance contains NaN: the ranking would be arbitrary; check the scores first")
    k = math.floor(fraction * importance.numel())
    keep = torch.ones(importance.numel(), dtype=torch.bool, device=importance.device)
    # A stable sort makes the tie-break reproducible: among equal scores the earlier head goes first.
    order = torch.sort(importance.detach().reshape(-1), stable=True).indices
    keep[order[:k]] = False
    return keep.reshape(importance.shape)


def call_arguments(inputs) -> tuple[tuple, dict]:
    """A model input as (args, kwargs): a Mapping is keyword arguments, a tuple positional ones, else the one input."""
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    if isinstance(inputs, tuple):
        return inputs, {}
    return (inputs,), {}


def real_token_mask(model: nn.Module, args: tuple, kwargs: dict) -> Tensor | None:
    """The (batch, seq) "real token" mask among the model's inputs: an ``attention_mask`` argument or a TokenBatch."""
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    except TypeError:
        bound = kwargs
    if bound.get("attention_mask") is not None:
        return bound["attention_mask"]
    for value in bound.values():
        if hasattr(value, "attention_mask"):
            return value.attention_mask
    return None


@torch.no_grad()
def head_output_means(model: nn.Module, *args, **kwargs) -> Tensor:
    """Each head's output (its slice of W_o's input), averaged: (n_layers, n_heads, d_head) (chapter 5).

    ``args, kwargs`` are a reference batch for ``model(*args, **kwargs)``.
    The average runs over the real tokens when the inputs carry an attention mask (a TokenBatch, or an
    ``attention_mask`` argument, as for the encoder) and over every position otherwise (the toy model). Removed
    heads' rows are 0. Computed on the model as it is, current gates and ablations included. (Where a layer's value
    width d_v differs from d_head, the last axis is d_v.)
    """
    layers = attention_layers(model)
    d_values = {layer.d_value for layer in layers}
    if len(d_values) > 1:
        raise ValueError(f"head_output_means needs one value width for all layers, got d_value {sorted(d_values)}")
    is_token = real_token_mask(model, args, kwargs)
    sums = [None] * len(layers)
    counts = [0] * len(layers)

    def accumulate(i: int, heads_in: Tensor) -> None:  # heads_in: (batch, seq, n_heads·d_head)
        if is_token is None:
            rows = heads_in.reshape(-1, heads_in.shape[-1])
        else:
            rows = heads_in[is_token.to(heads_in.device).bool()]  # (real tokens, n_heads·d_head)
        sums[i] = rows.sum(0) if sums[i] is None else sums[i] + rows.sum(0)
        counts[i] += rows.shape[0]

    handles = [
        layer.W_o.register_forward_pre_hook(lambda _, inputs, i=i: accumulate(i, inputs[0]))
        for i, layer in enumerate(layers)
    ]
    try:
        model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    n_layers, n_heads = _grid(layers)
    means = torch.zeros(n_layers, n_heads, d_values.pop(), device=sums[0].device, dtype=sums[0].dtype)
    for i, layer in enumerate(layers):
        means[i, list(remaining_head_ids(layer))] = (sums[i] / counts[i]).reshape(layer.n_heads, layer.d_value)
    return means


def _means_of(model: nn.Module, reference) -> Tensor:
    """head_output_means on a reference batch: a Mapping is keyword arguments, a tuple positional ones, anything
    else the one input (a TokenBatch, token ids)."""
    args, kwargs = call_arguments(reference)
    return head_output_means(model, *args, **kwargs)


def _replace_columns(columns: Tensor, values: Tensor):
    """A forward pre-hook for W_o that overwrites the given input features with constant values."""

    def hook(_module, inputs):
        (x,) = inputs
        x = x.clone()  # the caller's tensor must not change: it may be saved for backward or captured by a hook
        x[..., columns.to(x.device)] = values.to(x.device, x.dtype)
        return (x,)

    hook.is_intervention = True
    return hook


def has_intervention(layer: MultiHeadAttention) -> bool:
    """Whether a gated() or ablated() block is active on the layer (its hooks are registered)."""
    return any(
        getattr(hook, "is_intervention", False)
        for module in (layer, layer.W_o)
        for hook in module._forward_pre_hooks.values()
    )


@contextlib.contextmanager
def ablated(
    model: nn.Module, heads, mode: str = "zero", reference=None, means: Tensor | None = None
) -> Iterator[nn.Module]:
    """Run the model with the selected heads ablated, restoring it on exit (chapter 5). Yields the model.

    mode ``"zero"``: the head's output is 0 (its gate is set to 0, other gates stay as they are).
    mode ``"mean"``: the head's output is replaced by its mean, from ``means`` (n_layers, n_heads, d_head) as
    :func:`head_output_means` returns them (to reuse across many ablations), or computed now on ``reference``, a
    batch for the model (a TokenBatch or token ids, a dict of keyword arguments, or a tuple of positional ones).
    Mean ablation keeps the average a head adds and removes only what depends on the input.
    """
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}")
    layers = attention_layers(model)
    pairs = _pairs(heads, layers)
    if mode == "zero":
        if reference is not None or means is not None:
            raise ValueError("zero ablation takes neither a reference batch nor means")
        gates = current_gates(model)
        for layer, head in pairs:
            gates[layer, head] = 0.0
        with gated(model, gates):
            yield model
        return
    if (reference is None) == (means is None):
        raise ValueError("mean ablation needs exactly one of reference= (a batch) and means= (from head_output_means)")
    if means is None:
        means = _means_of(model, reference)
    n_layers, n_heads = _grid(layers)
    expected = (n_layers, n_heads, layers[0].d_value)
    if means.shape != expected:
        raise ValueError(f"means must have shape {expected} = (n_layers, n_heads, d_head), got {tuple(means.shape)}")
    handles = []
    try:
        for i, layer in enumerate(layers):
            layer_heads = [head for where, head in pairs if where == i]
            if not layer_heads:
                continue
            d = layer.d_value
            # The columns of W_o's input that hold each head, at the head's position in a possibly smaller layer.
            positions = [remaining_head_ids(layer).index(head) for head in layer_heads]
            columns = torch.cat([torch.arange(p * d, (p + 1) * d) for p in positions])
            handles.append(
                layer.W_o.register_forward_pre_hook(_replace_columns(columns, means[i, layer_heads].reshape(-1)))
            )
        yield model
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def ablated_each(model: nn.Module, layer: int, heads, mode: str = "zero", means: Tensor | None = None):
    """Every single-head ablation of one layer in ONE forward pass (chapter 5's ablation maps). Yields the model.

    The batch must be ``len(heads)`` copies of the same inputs stacked along dim 0 (chunk ``j`` = rows
    ``j·B … (j+1)·B − 1``); in chunk ``j`` head ``heads[j]`` of ``layer`` is ablated (mode ``"zero"``: its output
    is 0; ``"mean"``: it is ``means[layer, heads[j]]``, ``means`` as :func:`head_output_means` returns them), all
    other heads run as they are (including any gates set around this block). One wide forward instead of
    ``len(heads)`` narrow ones: the same numbers, far less per-call overhead on small inputs.
    """
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}, got {mode!r}")
    layers = attention_layers(model)
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer must be in 0..{len(layers) - 1}, got {layer}")
    target = layers[layer]
    heads = [int(h) for h in heads]
    if not heads or any(h not in remaining_head_ids(target) for h in heads):
        raise ValueError(
            f"heads must be a non-empty list of heads of layer {layer}: {remaining_head_ids(target)}, got {heads}"
        )
    d, k = target.d_value, len(heads)
    positions = torch.tensor([remaining_head_ids(target).index(h) for h in heads])
    if mode == "zero":
        if means is not None:
            raise ValueError("zero ablation takes no means")
        values = torch.zeros(k, d)
    else:
        if means is None:
            raise ValueError("mean ablation needs means= (n_layers, n_heads, d_head), from head_output_means")
        values = means[layer, heads]

    def hook(_module, inputs):
        (x,) = inputs
        if x.shape[0] % k:
            raise ValueError(f"ablated_each: the batch ({x.shape[0]} rows) is not {k} equal chunks, one per head")
        x = x.clone(memory_format=torch.contiguous_format)  # the caller's tensor must not change
        chunks = x.view(k, x.shape[0] // k, *x.shape[1:-1], len(remaining_head_ids(target)), d)
        chunks[torch.arange(k), ..., positions.to(x.device), :] = values.to(x.device, x.dtype).reshape(
            k, *[1] * (chunks.dim() - 3), d
        )
        return (x,)

    hook.is_intervention = True
    handle = target.W_o.register_forward_pre_hook(hook)
    try:
        yield model
    finally:
        handle.remove()


def remove_heads(model: nn.Module, heads) -> nn.Module:
    """A deep copy of the model with the selected heads physically removed (chapter 5); the model is untouched.

    In each layer that loses heads, W_q, W_k (rows: n_heads·d_head → kept·d_head), W_v (rows) and W_o (columns)
    shrink, biases with them, and the kept heads' gates come along. The copy computes what the model computes with
    those heads' gates at 0, with fewer weights and less work. Every layer must keep at least one head. A layer's
    ``head_ids`` records the original indices of its kept heads, so the copy still takes gates (n_layers, n_heads)
    and head selections in the original numbering; its attention weights have only the kept heads, in order.
    """
    layers = attention_layers(model)
    # A copy would inherit the block's hooks, which index the uncut layer and are never removed from the copy.
    if any(has_intervention(layer) for layer in layers):
        raise RuntimeError("remove_heads cannot copy a model inside a gated() or ablated() block; call it outside")
    pairs = _pairs(heads, layers)
    for i, layer in enumerate(layers):
        if layer.n_kv_heads != layer.n_heads and any(where == i for where, _ in pairs):
            raise NotImplementedError(
                f"layer {i} shares each key/value head among {layer.n_heads // layer.n_kv_heads} query heads "
                f"(n_kv_heads={layer.n_kv_heads} < n_heads={layer.n_heads}); remove_heads cannot cut its K/V weights "
                f"per query head. Use ablated(model, heads) or gated() instead: same outputs, no smaller weights"
            )
        if len(remaining_head_ids(layer)) == len([p for p in pairs if p[0] == i]):
            raise ValueError(
                f"removing {len(remaining_head_ids(layer))} heads would leave layer {i} with none; "
                f"keep at least one head per layer"
            )
    model = copy.deepcopy(model)
    for i, layer in enumerate(attention_layers(model)):
        removed = {head for where, head in pairs if where == i}
        if removed:
            _shrink(layer, [p for p, head in enumerate(remaining_head_ids(layer)) if head not in removed])
    return model


def _shrink(layer: MultiHeadAttention, positions: list[int]) -> None:
    """Keep only the heads at ``positions`` (indices into the layer's current heads), in place."""
    original_n_heads, ids = _original_n_heads(layer), remaining_head_ids(layer)

    def rows(width: int) -> Tensor:
        return torch.cat([torch.arange(p * width, (p + 1) * width) for p in positions])

    def linear(weight: Tensor, bias: Tensor | None) -> nn.Linear:
        new = nn.Linear(
            weight.shape[1], weight.shape[0], bias=bias is not None, device=weight.device, dtype=weight.dtype
        )
        with torch.no_grad():
            new.weight.copy_(weight)
            if bias is not None:
                new.bias.copy_(bias)
        return new

    q_rows, v_rows = rows(layer.d_head), rows(layer.d_value)
    for name, kept in (("W_q", q_rows), ("W_k", q_rows), ("W_v", v_rows)):
        old = getattr(layer, name)
        setattr(layer, name, linear(old.weight[kept], None if old.bias is None else old.bias[kept]))
    layer.W_o = linear(layer.W_o.weight[:, v_rows], layer.W_o.bias)
    layer.head_gates = layer.head_gates[positions]
    layer.n_heads = layer.n_kv_heads = len(positions)  # remove_heads refuses layers with shared K/V heads
    layer.head_ids = tuple(ids[p] for p in positions)
    layer.original_n_heads = original_n_heads


# --- path removal (chapter 6) ---------------------------------------------------------------------------------------

#: The inputs of an attention layer a head's output can be removed from: queries, keys, values.
COMPOSITION_PATHS = ("q", "k", "v")


class HeadPath(NamedTuple):
    """Head ``head`` of layer ``layer``, removed from the ``path`` input ("q", "k" or "v") of every later layer."""

    layer: int
    head: int
    path: str


def _head_paths(layers: list[MultiHeadAttention], remove: Iterable) -> list[HeadPath]:
    checked = []
    for entry in remove:
        try:
            layer, head, path = entry
        except (TypeError, ValueError):
            raise ValueError(f"each entry of remove must be a (layer, head, path) triple, got {entry!r}") from None
        if path not in COMPOSITION_PATHS:
            raise ValueError(f"path must be one of {COMPOSITION_PATHS} (queries, keys, values), got {path!r}")
        if not 0 <= layer < len(layers) - 1:
            raise ValueError(
                f"layer {layer} has no later layer to remove it from: a {len(layers)}-layer model takes "
                f"layers 0 … {len(layers) - 2}"
            )
        if not 0 <= head < layers[layer].n_heads:
            raise ValueError(f"head {head} is out of range: layer {layer} has {layers[layer].n_heads} heads")
        checked.append(HeadPath(int(layer), int(head), path))
    return checked


@contextlib.contextmanager
def paths_removed(model: nn.Module, remove: Iterable) -> Iterator[nn.Module]:
    """Run the model with each :class:`HeadPath` in ``remove`` applied, restoring it on exit (chapter 6).

    ``HeadPath(layer, head, "k")`` subtracts what head (layer, head) wrote into the residual stream from the input
    that every *later* layer computes its keys from, while their queries and values (and the logits) still see it;
    likewise "q" and "v". Entries may be plain (layer, head, path) triples. A head's write is what the layer's output
    loses when that head alone is zeroed (``W_o`` is linear), recomputed on each forward pass. The model's
    attention layers must be called as ``layer(q, k, v, ...)`` (the course's attention-only transformer is).
    """
    layers = attention_layers(model)
    paths = _head_paths(layers, remove)
    writes: dict[tuple[int, int], Tensor] = {}
    measuring: set[int] = set()  # layers being run again inside their own hook, to measure a head's write
    handles = []

    def before(i: int):
        def hook(module, args, kwargs):
            if i in measuring or len(args) < 3:
                return None
            inputs = {"q": args[0], "k": args[1], "v": args[2]}
            for source, head, path in paths:
                if source < i:
                    inputs[path] = inputs[path] - writes[source, head]
            return (inputs["q"], inputs["k"], inputs["v"], *args[3:]), kwargs

        return hook

    def after(i: int, heads: set[int]):
        def hook(module, args, kwargs, output):
            if i in measuring:
                return None
            out = output[0] if isinstance(output, tuple) else output
            measuring.add(i)
            try:
                for head in heads:
                    with ablated(module, (0, head)):
                        without = module(*args, **kwargs)
                    writes[i, head] = out - (without[0] if isinstance(without, tuple) else without)
            finally:
                measuring.discard(i)
            return None

        return hook

    try:
        for i, layer in enumerate(layers):
            if any(source < i for source, _, _ in paths):
                handles.append(layer.register_forward_pre_hook(before(i), with_kwargs=True))
            heads = {head for source, head, _ in paths if source == i}
            if heads:
                handles.append(layer.register_forward_hook(after(i, heads), with_kwargs=True))
        yield model
    finally:
        for handle in handles:
            handle.remove()
