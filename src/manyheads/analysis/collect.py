"""Collecting attention weights from the course's models (chapters 1, 2, 4; chapters 5-6 reuse it).

* :func:`offset_mass`: how much attention each head of a toy model puts on each fixed offset (chapters 1, 2, 4).
* :func:`token_attentions`: every head's attention between word pieces, per input, from the encoder.
* :func:`word_attention`, :func:`word_attentions`: attention between word pieces turned into attention between
  words the way Clark et al. did: the attention *to* a word is the **sum** over its pieces, the attention *from* a
  word is the **mean** over its pieces, so every row still sums to the mass it gives to words.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["offset_mass", "token_attentions", "word_attention", "word_attentions"]


@torch.no_grad()
def offset_mass(model, tokens: Tensor, offsets: Sequence[int]) -> Tensor:
    """Mean attention weight each head puts on the key ``offset`` places back, for each offset (chapters 1, 2, 4).

    ``model(tokens)`` must return ``(logits, weights)`` with weights (batch, n_heads, seq, seq), like
    :class:`~manyheads.models.tiny.TinyAttentionModel`. tokens: (batch, seq). Averaged over the batch and over the
    query positions where every offset exists (i ≥ max(offsets)). Returns (n_heads, len(offsets)) on the CPU.
    """
    offsets = [int(o) for o in offsets]
    if not offsets or min(offsets) < 1 or max(offsets) >= tokens.shape[-1]:
        raise ValueError(f"offsets must lie in [1, seq) for sequences of length {tokens.shape[-1]}, got {offsets}")
    _, weights = model(tokens)
    queries = torch.arange(max(offsets), tokens.shape[1], device=weights.device)
    return torch.stack([weights[:, :, queries, queries - o].mean(dim=(0, 2)) for o in offsets], dim=-1).cpu()


def token_attentions(
    encoder, tokenizer, texts: Sequence[str], pairs: Sequence[str] | None = None, batch_size: int = 32
) -> tuple[list[Tensor], list[list[str]]]:
    """Run ``encoder`` on texts (optionally as ``[CLS] text [SEP] pair [SEP]``); per input, its unpadded attention
    (n_layers, n_heads, n, n) as a float32 CPU tensor, and its tokens."""
    attns, tokens = [], []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start : start + batch_size])
            batch = tokenizer(chunk, pairs=None if pairs is None else list(pairs[start : start + batch_size]))
            stacked = encoder(batch).stacked_attentions().float().cpu()
            for row, n in enumerate(batch.lengths):
                attns.append(stacked[:, row, :, :n, :n])
                tokens.append(batch.tokens[row])
    return attns, tokens


def word_attention(weights: Tensor, word_ids: Sequence[int | None], n_words: int | None = None) -> Tensor:
    """Attention between word pieces → attention between words (Clark et al. 2019, §2).

    weights: (..., seq, seq) over the word pieces of one sentence (padding may follow: only the first
    ``len(word_ids)`` positions are used). word_ids[i]: the word of piece i, or None for [CLS], [SEP] (dropped).
    Returns (..., n_words, n_words): ``out[..., a, b]`` = mean over the pieces i of word a of the sum over the
    pieces j of word b of ``weights[..., i, j]``. Rows sum to the share of attention that goes to words (not to
    [CLS] or [SEP]).
    """
    known = [w for w in word_ids if w is not None]
    if n_words is None:
        n_words = max(known) + 1
    if sorted(set(known)) != list(range(n_words)):
        raise ValueError(f"word_ids must cover words 0..{n_words - 1}: {list(word_ids)}")
    seq = len(word_ids)
    # membership (n_words, seq): 1 where piece j belongs to word a
    member = torch.zeros(n_words, seq, dtype=weights.dtype, device=weights.device)
    for j, w in enumerate(word_ids):
        if w is not None:
            member[w, j] = 1.0
    w = weights[..., :seq, :seq]
    summed_keys = w @ member.T  # (..., seq, n_words): sum over the key's pieces
    mean_rows = member / member.sum(dim=1, keepdim=True)  # (n_words, seq): average over the query's pieces
    return mean_rows @ summed_keys


def word_attentions(encoder, tokenizer, sentences: Sequence, batch_size: int = 64) -> list[Tensor]:
    """Run ``encoder`` on pre-split sentences (objects with ``.words``, or word lists) and return, per sentence,
    its attention between words: a (n_layers, n_heads, n_words, n_words) CPU tensor (float32)."""
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            chunk = [list(getattr(s, "words", s)) for s in sentences[start : start + batch_size]]
            batch = tokenizer(chunk)
            attentions = encoder(batch).stacked_attentions().float().cpu()  # (n_layers, batch, n_heads, seq, seq)
            for row, words in enumerate(chunk):
                out.append(word_attention(attentions[:, row], batch.word_ids[row], len(words)))
    return out
