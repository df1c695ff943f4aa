"""Changing how many key/value heads a trained model has: grouping them (MHA → GQA → MQA) or repeating them (chapter 7).

Every function takes a whole model (MiniLM's :class:`~manyheads.models.bert.BertEncoder`, the SmolLM2
:class:`~manyheads.models.llama.LlamaDecoder`, a toy model: anything holding
:class:`~manyheads.attention.MultiHeadAttention` layers) and returns a converted deep copy; the model is untouched.

* :func:`group_kv_heads` turns each layer's K/V heads into ``n_kv_heads`` groups. The query heads stay: query heads
  that read K/V heads of one group now all read the group's single K/V head. How the group's head is made is the
  ``method``: ``"mean"`` averages the group's W_k and W_v blocks (and biases), as Ainslie et al. convert checkpoints
  before uptraining; ``"first"`` keeps the first head of each group; ``"random"`` averages like ``"mean"`` but over
  a seeded random grouping of the heads instead of consecutive ones.
* :func:`repeat_kv_heads` goes the other way without changing anything the model computes: each K/V head is copied
  to serve fewer query heads (SmolLM2's 3 K/V heads as 9, one per query head). Outputs stay the same; the KV cache
  grows with the number of K/V heads.

A K/V head serves a consecutive block of query heads (head h reads K/V head h // (n_heads / n_kv_heads)), so
``"random"`` reorders the query heads together with their K/V heads (rows of W_q, columns of W_o, gates) before
grouping: the copy still computes the same function up to the K/V averaging. The layer's ``head_ids`` records the
new order, so gates and head selections of :mod:`manyheads.interventions` keep the original head numbering.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention
from manyheads.interventions import attention_layers, has_intervention, remaining_head_ids

__all__ = ["KV_GROUPING_METHODS", "group_kv_heads", "repeat_kv_heads"]

KV_GROUPING_METHODS = ("mean", "first", "random")


def _check_count(n_kv_heads) -> int:
    if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, numbers.Integral) or n_kv_heads <= 0:
        raise ValueError(f"n_kv_heads must be a positive int, got {n_kv_heads!r}")
    return int(n_kv_heads)


def _copy(model: nn.Module) -> tuple[nn.Module, list[MultiHeadAttention]]:
    layers = attention_layers(model)
    # A copy would inherit the hooks of an open gated()/ablated() block, which index the original layers.
    if any(has_intervention(layer) for layer in layers):
        raise RuntimeError("cannot convert a model inside a gated() or ablated() block; call it outside the block")
    model = copy.deepcopy(model)
    return model, attention_layers(model)


def _blocks(linear: nn.Linear, n: int) -> tuple[Tensor, Tensor | None]:
    """A projection's output rows as n head blocks: weight (n, width, d_in), bias (n, width) or None."""
    weight = linear.weight.detach().reshape(n, -1, linear.weight.shape[1])
    bias = None if linear.bias is None else linear.bias.detach().reshape(n, -1)
    return weight, bias


def _linear(weight: Tensor, bias: Tensor | None) -> nn.Linear:
    """A new nn.Linear holding head blocks weight (n, width, d_in) and bias (n, width)."""
    new = nn.Linear(weight.shape[2], weight.shape[0] * weight.shape[1], bias=bias is not None)
    new = new.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight.reshape(-1, weight.shape[2]))
        if bias is not None:
            new.bias.copy_(bias.reshape(-1))
    return new


def _set_config(model: nn.Module, n_kv_heads: int) -> None:
    """Keep a model config that records n_kv_heads (the decoder's LlamaConfig) true to the converted copy."""
    config = getattr(model, "config", None)
    if dataclasses.is_dataclass(config) and "n_kv_heads" in {f.name for f in dataclasses.fields(config)}:
        model.config = dataclasses.replace(config, n_kv_heads=n_kv_heads)


def _reorder_query_heads(layer: MultiHeadAttention, kv_order: Tensor) -> None:
    """Put each K/V head's block of query heads in ``kv_order`` (W_q rows, W_o columns, gates, head_ids), in place.

    The layer computes the same function afterwards, once its K/V heads are put in the same order.
    """
    per_kv = layer.n_heads // layer.n_kv_heads
    order = (kv_order[:, None] * per_kv + torch.arange(per_kv)).flatten()  # new position → old query head
    w_q, b_q = _blocks(layer.W_q, layer.n_heads)
    layer.W_q = _linear(w_q[order], None if b_q is None else b_q[order])
    w_o = layer.W_o.weight.detach().reshape(layer.d_model, layer.n_heads, layer.d_value)[:, order]
    with torch.no_grad():
        layer.W_o.weight.copy_(w_o.reshape(layer.d_model, -1))
    layer.head_gates = layer.head_gates[order.to(layer.head_gates.device)]
    layer.head_ids = tuple(remaining_head_ids(layer)[i] for i in order.tolist())


def group_kv_heads(model: nn.Module, n_kv_heads: int, method: str = "mean", seed: int = 0) -> nn.Module:
    """A deep copy of ``model`` whose every attention layer has ``n_kv_heads`` key/value heads (chapter 7).

    Each layer's current K/V heads (n_heads of them in ordinary multi-head attention) are split into
    ``n_kv_heads`` groups of consecutive heads; ``n_kv_heads`` must divide that number. ``method``: ``"mean"``
    (the group's W_k and W_v blocks and biases averaged: Ainslie et al.'s mean-pooling), ``"first"`` (the group's
    first head kept) or ``"random"`` (mean-pooled over a random grouping, drawn per layer from ``seed``; the query
    heads are reordered with their K/V heads, see the module docstring). ``n_kv_heads = 1`` is multi-query
    attention. A decoder's ``config.n_kv_heads`` is updated too.
    """
    n_kv_heads = _check_count(n_kv_heads)
    if method not in KV_GROUPING_METHODS:
        raise ValueError(f"method must be one of {KV_GROUPING_METHODS}, got {method!r}")
    for i, layer in enumerate(attention_layers(model)):
        if layer.n_kv_heads % n_kv_heads:
            raise ValueError(
                f"layer {i} has {layer.n_kv_heads} key/value heads, which cannot be split into {n_kv_heads} equal "
                f"groups; n_kv_heads must divide {layer.n_kv_heads} (to add K/V heads use repeat_kv_heads)"
            )
    model, layers = _copy(model)
    generator = torch.Generator().manual_seed(seed)
    for layer in layers:
        size = layer.n_kv_heads // n_kv_heads  # K/V heads per group
        kv_order = torch.arange(layer.n_kv_heads)
        if method == "random":
            kv_order = torch.randperm(layer.n_kv_heads, generator=generator)
            _reorder_query_heads(layer, kv_order)
        for name in ("W_k", "W_v"):
            weight, bias = _blocks(getattr(layer, name), layer.n_kv_heads)
            weight = weight[kv_order].reshape(n_kv_heads, size, *weight.shape[1:])
            bias = None if bias is None else bias[kv_order].reshape(n_kv_heads, size, -1)
            if method == "first":
                weight, bias = weight[:, 0], None if bias is None else bias[:, 0]
            else:
                weight, bias = weight.mean(1), None if bias is None else bias.mean(1)
            setattr(layer, name, _linear(weight, bias))
        layer.n_kv_heads = n_kv_heads
    _set_config(model, n_kv_heads)
    return model


def repeat_kv_heads(model: nn.Module, n_kv_heads: int) -> nn.Module:
    """A deep copy of ``model`` with each layer's K/V heads copied so that it has ``n_kv_heads`` of them (chapter 7).

    Each K/V head is repeated n_kv_heads / (current K/V heads) times in a row (the order Hugging Face's
    ``repeat_kv`` uses), so every query head reads exactly the keys and values it read before: the copy computes the
    same outputs, with a KV cache that many times larger. ``n_kv_heads`` must be a multiple of each layer's current
    number of K/V heads and divide its number of query heads.
    """
    n_kv_heads = _check_count(n_kv_heads)
    for i, layer in enumerate(attention_layers(model)):
        if n_kv_heads % layer.n_kv_heads or layer.n_heads % n_kv_heads:
            raise ValueError(
                f"layer {i} has {layer.n_heads} query heads and {layer.n_kv_heads} key/value heads; n_kv_heads must "
                f"be a multiple of {layer.n_kv_heads} that divides {layer.n_heads}, got {n_kv_heads} "
                "(to remove K/V heads use group_kv_heads)"
            )
    model, layers = _copy(model)
    for layer in layers:
        copies = n_kv_heads // layer.n_kv_heads
        for name in ("W_k", "W_v"):
            weight, bias = _blocks(getattr(layer, name), layer.n_kv_heads)
            repeat = None if bias is None else bias.repeat_interleave(copies, 0)
            setattr(layer, name, _linear(weight.repeat_interleave(copies, 0), repeat))
        layer.n_kv_heads = n_kv_heads
    _set_config(model, n_kv_heads)
    return model
