"""An attention-only transformer: the smallest model in which induction heads form (chapter 6).

Token and learned absolute position embeddings, ``n_layers`` causal :class:`~manyheads.attention.MultiHeadAttention`
layers, each adding its output to the residual stream, and a linear unembedding. No MLP and no normalisation, as
in Elhage et al.'s attention-only models: everything a position learns about the others comes through attention,
and the only way a later layer can build on an earlier one is by reading what the earlier heads wrote into the
residual stream. Layers are numbered from 0 in code; the papers' "layer 1" and "layer 2" are layers 0 and 1 here.

Because the layers are the course's ``MultiHeadAttention``, every intervention of :mod:`manyheads.interventions`
works on the model unchanged, path removal included (:func:`manyheads.paths_removed`: a head's output removed from
only the queries, keys or values of the later layers); the model's forward knows nothing about them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention, causal_mask

__all__ = ["AttentionOnlyTransformer", "AttentionOnlyOutput"]


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

    def forward(self, tokens: Tensor) -> AttentionOnlyOutput:
        """tokens: (batch, seq) ids → logits (batch, seq, n_tokens), weights (n_layers, batch, n_heads, seq, seq),
        on the model's device (tokens are moved there). For path removal, run it inside
        :func:`manyheads.paths_removed`."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (batch, seq) ids, got shape {tuple(tokens.shape)}")
        seq = tokens.shape[1]
        if seq > self.max_seq:
            raise ValueError(f"sequence length {seq} exceeds the model's max_seq={self.max_seq}")
        tokens = tokens.to(self.token_embedding.weight.device)  # CPU batches run where the model is
        mask = causal_mask(seq, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(seq, device=tokens.device))
        all_weights = []
        for layer in self.layers:
            out, weights = layer(x, x, x, mask=mask)
            x = x + out
            all_weights.append(weights)
        return AttentionOnlyOutput(self.unembed(x), torch.stack(all_weights))
