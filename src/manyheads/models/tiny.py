"""Small models built on :class:`manyheads.attention.MultiHeadAttention`.

``TinyAttentionModel`` (chapter 1, reused in chapters 2 and 3) is deliberately minimal: token and position
embeddings, one causal multi-head attention layer with a residual connection, and one *linear* readout per
relation. There is no MLP, so everything a position learns about other positions has to come through the
attention layer, and the readout cannot undo a mixture that the attention has already made.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention, causal_mask

__all__ = ["TinyAttentionModel", "count_parameters"]


def count_parameters(module: nn.Module) -> int:
    """Number of trainable scalars in ``module`` (buffers such as ``head_gates`` are not parameters)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class TinyAttentionModel(nn.Module):
    """Embeddings → one causal multi-head attention layer (+ residual) → a linear readout per relation (chapter 1).

    Args:
        vocab_size: number of distinct tokens (also the number of classes of each readout).
        seq_len: the longest sequence the position embedding covers.
        d_model: width of the residual stream.
        n_heads: number of attention heads.
        n_relations: number of readouts (one per thing to predict at each position).
        d_head: per-head query/key/value width; defaults to d_model // n_heads.

    ``forward(tokens)`` takes (batch, seq) token ids and returns ``(logits, weights)``:
    logits (batch, seq, n_relations, vocab_size) and attention weights (batch, n_heads, seq, seq).
    """

    def __init__(
        self, vocab_size: int, seq_len: int, d_model: int, n_heads: int, n_relations: int = 2, d_head: int | None = None
    ) -> None:
        super().__init__()
        self.vocab_size, self.seq_len, self.n_relations = vocab_size, seq_len, n_relations
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.attention = MultiHeadAttention(d_model, n_heads, d_head=d_head)
        self.readout = nn.Linear(d_model, n_relations * vocab_size)

    @classmethod
    def for_task(cls, task, d_model: int, n_heads: int, d_head: int | None = None) -> TinyAttentionModel:
        """A model sized for ``task`` (a :class:`~manyheads.data.tasks.TwoRelationTask`): its vocabulary, sequence
        length and number of relations, with the given width and head count (chapters 1-4)."""
        return cls(task.vocab_size, task.seq_len, d_model, n_heads, n_relations=task.n_relations, d_head=d_head)

    @property
    def n_heads(self) -> int:
        return self.attention.n_heads

    @property
    def d_model(self) -> int:
        return self.attention.d_model

    @property
    def d_head(self) -> int:
        return self.attention.d_head

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """tokens: (batch, seq) → logits (batch, seq, n_relations, vocab_size), weights (batch, n_heads, seq, seq),
        on the model's device (tokens are moved there)."""
        batch, seq = tokens.shape
        if seq > self.seq_len:
            raise ValueError(f"sequence length {seq} exceeds the model's seq_len={self.seq_len}")
        tokens = tokens.to(self.token_embedding.weight.device)  # CPU batches run where the model is
        positions = torch.arange(seq, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (batch, seq, d_model)
        mixed, weights = self.attention(x, mask=causal_mask(seq, device=tokens.device))
        logits = self.readout(x + mixed)  # (batch, seq, n_relations·vocab_size)
        return logits.view(batch, seq, self.n_relations, self.vocab_size), weights
