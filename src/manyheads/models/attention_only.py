"""An attention-only transformer: the smallest model in which induction heads form (chapter 6).

Token and learned absolute position embeddings, ``n_layers`` causal :class:`~manyheads.attention.MultiHeadAttention`
layers, each adding its output to the residual stream, and a linear unembedding. No MLP and no normalisation, as
in Elhage et al.'s attention-only models: everything a position learns about the others comes through attention,
and the only way a later layer can build on an earlier one is by reading what the earlier heads wrote into the
residual stream. Layers are numbered from 0 in code; the papers' "layer 1" and "layer 2" are layers 0 and 1 here.

Because the layers are the course's ``MultiHeadAttention``, :func:`manyheads.ablated` and :func:`manyheads.gated`
work on the model unchanged. One intervention needs the model's help and lives here: removing a head's output from
only one *input* of the later layers (their queries, keys or values), which separates Q-, K- and V-composition
(Elhage et al. 2021). ``forward(tokens, remove=[HeadPath(0, h, "k")])`` runs every later layer with head (0, h)'s
write subtracted from the input its keys are computed from, while its queries and values still see it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention, causal_mask
from manyheads.interventions import ablated

__all__ = ["AttentionOnlyTransformer", "AttentionOnlyOutput", "HeadPath", "COMPOSITION_PATHS"]

#: The inputs of an attention layer a head's output can be removed from: queries, keys, values.
COMPOSITION_PATHS = ("q", "k", "v")


class HeadPath(NamedTuple):
    """Head ``head`` of layer ``layer``, removed from the ``path`` input ("q", "k" or "v") of every later layer."""

    layer: int
    head: int
    path: str


class AttentionOnlyOutput(NamedTuple):
    """logits (batch, seq, n_tokens); weights (n_layers, batch, n_heads, seq, seq), layers in order."""

    logits: Tensor
    weights: Tensor


class AttentionOnlyTransformer(nn.Module):
    """Embeddings → n_layers × (causal multi-head attention + residual) → unembedding (chapter 6).

    Args:
        n_tokens: vocabulary size, special tokens included (for the repeat task: ``task.n_tokens``).
        max_seq: the longest sequence the position embedding covers.
        d_model: width of the residual stream.
        n_heads: heads per layer.
        n_layers: number of attention layers (2 for induction heads; 1 for the control that cannot form them).
    """

    def __init__(self, n_tokens: int, max_seq: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        self.n_tokens, self.max_seq = n_tokens, max_seq
        self.token_embedding = nn.Embedding(n_tokens, d_model)
        self.position_embedding = nn.Embedding(max_seq, d_model)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, n_heads) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, n_tokens)

    @classmethod
    def for_task(cls, task, d_model: int = 64, n_heads: int = 4, n_layers: int = 2) -> AttentionOnlyTransformer:
        """A model sized for a :class:`~manyheads.data.repeats.RepeatedHalvesTask`: its vocabulary (BOS included)
        and longest sequence."""
        return cls(task.n_tokens, task.max_seq, d_model, n_heads, n_layers)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        return self.layers[0].n_heads

    def forward(self, tokens: Tensor, remove: Iterable[HeadPath] = ()) -> AttentionOnlyOutput:
        """tokens: (batch, seq) ids → logits (batch, seq, n_tokens), weights (n_layers, batch, n_heads, seq, seq),
        on the model's device (tokens are moved there).

        ``remove``: :class:`HeadPath` entries (or (layer, head, path) triples); each subtracts that head's output
        from the ``path`` input of every later layer (see the module docstring). Its direct path to the logits and
        the other inputs keep it.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (batch, seq) ids, got shape {tuple(tokens.shape)}")
        seq = tokens.shape[1]
        if seq > self.max_seq:
            raise ValueError(f"sequence length {seq} exceeds the model's max_seq={self.max_seq}")
        remove = self._check_paths(remove)
        tokens = tokens.to(self.token_embedding.weight.device)  # CPU batches run where the model is
        mask = causal_mask(seq, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(seq, device=tokens.device))
        writes: dict[tuple[int, int], Tensor] = {}  # (layer, head) → what that head added to the residual stream
        all_weights = []
        for i, layer in enumerate(self.layers):
            inputs = {"q": x, "k": x, "v": x}
            for source, head, path in remove:
                if source < i:
                    inputs[path] = inputs[path] - writes[source, head]
            out, weights = layer(inputs["q"], inputs["k"], inputs["v"], mask=mask)
            for source, head in {(s, h) for s, h, _ in remove if s == i}:
                # W_o is linear, so a head's write is what the layer's output loses when that head is zeroed.
                with ablated(layer, (0, head)):
                    without, _ = layer(inputs["q"], inputs["k"], inputs["v"], mask=mask)
                writes[source, head] = out - without
            x = x + out
            all_weights.append(weights)
        return AttentionOnlyOutput(self.unembed(x), torch.stack(all_weights))

    def _check_paths(self, remove: Iterable) -> list[HeadPath]:
        checked = []
        for entry in remove:
            try:
                layer, head, path = entry
            except (TypeError, ValueError):
                raise ValueError(f"each entry of remove must be a (layer, head, path) triple, got {entry!r}") from None
            if path not in COMPOSITION_PATHS:
                raise ValueError(f"path must be one of {COMPOSITION_PATHS} (queries, keys, values), got {path!r}")
            if not 0 <= layer < self.n_layers - 1:
                raise ValueError(
                    f"layer {layer} has no later layer to remove it from: a {self.n_layers}-layer model takes "
                    f"layers 0 … {self.n_layers - 2}"
                )
            if not 0 <= head < self.layers[layer].n_heads:
                raise ValueError(f"head {head} is out of range: layer {layer} has {self.layers[layer].n_heads} heads")
            checked.append(HeadPath(int(layer), int(head), path))
        return checked
