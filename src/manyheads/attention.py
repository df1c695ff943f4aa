"""Scaled dot-product attention and multi-head attention, written to be read.

Taught in chapter 1 (scaled dot-product attention, one softmax per query) and chapter 3 (splitting and merging
heads, d_head = d_model / n_heads). Shape vocabulary: batch, seq_q, seq_k, d_model, n_heads, d_head (d_k in
formulas), d_v; ``weights`` are attention probabilities.

Masks are boolean and mean "may attend" where True, exactly as in
``torch.nn.functional.scaled_dot_product_attention``. A query row whose keys are all masked gets all-zero weights
and a zero output (again as torch does), rather than NaNs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = [
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "causal_mask",
    "padding_mask",
    "MultiHeadAttention",
]


def _check_mask(mask: Tensor) -> None:
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}. "
            "Convert an additive or 0/1 mask with `mask.bool()` or `mask == 0` as appropriate."
        )


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / √d_k) v, returning the attention weights too (chapter 1).

    q: (..., seq_q, d_k), k: (..., seq_k, d_k), v: (..., seq_k, d_v),
    mask: bool, broadcastable to (..., seq_q, seq_k), True = may attend.
    Returns ``(output, weights)``: output (..., seq_q, d_v), weights (..., seq_q, seq_k).
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same last dimension d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v need the same seq_k (second-to-last axis), got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., seq_q, seq_k)
    if mask is not None:
        _check_mask(mask)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A fully masked row is softmax over all -inf = NaN; define it as "attends to nothing".
        weights = weights.nan_to_num(0.0)
    return weights @ v, weights


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(batch, seq, n_heads·d_head) → (batch, n_heads, seq, d_head); head i takes features [i·d_head, (i+1)·d_head).

    The transpose matters: reshaping straight to (batch, n_heads, seq, d_head) would mix positions across heads
    (chapter 3).
    """
    batch, seq, width = x.shape
    if width % n_heads:
        raise ValueError(f"the last axis ({width}) must be divisible by n_heads ({n_heads})")
    return x.reshape(batch, seq, n_heads, width // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(batch, n_heads, seq, d_head) → (batch, seq, n_heads·d_head), the inverse of :func:`split_heads`."""
    batch, n_heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, n_heads * d_head)


def causal_mask(seq: int, device: torch.device | str | None = None) -> Tensor:
    """(seq, seq) boolean mask, True on and below the diagonal: position i may attend to positions ≤ i."""
    return torch.ones(seq, seq, dtype=torch.bool, device=device).tril()


def padding_mask(is_token: Tensor) -> Tensor:
    """From (batch, seq_k) "is a real token" flags (bool or 0/1) to a (batch, 1, 1, seq_k) attention mask.

    The result broadcasts over heads and queries in :class:`MultiHeadAttention`.
    """
    return is_token.bool()[:, None, None, :]


def _grouped_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, group: int) -> tuple[Tensor, Tensor]:
    """Attention of query head h against K/V head h // group, without copying each K/V head ``group`` times.

    q: (batch, n_heads, seq_q, d_k); k, v: (batch, n_heads // group, seq_k, d_k or d_v). The same numbers as
    repeating every K/V head ``group`` times in a row (Hugging Face's ``repeat_kv``) and attending, but each K/V head
    is read once for its whole group: the memory traffic that grouped-query attention saves (chapter 7) is saved.
    The group's query heads are folded into the query axis, (batch, n_kv_heads, group·seq_q, d_k).
    """
    batch, n_heads, seq_q, d_k = q.shape
    n_kv_heads, seq_k = k.shape[1], k.shape[2]
    folded_q = q.reshape(batch, n_kv_heads, group * seq_q, d_k)
    if mask is not None:
        _check_mask(mask)
        mask = mask.expand(batch, n_heads, seq_q, seq_k).reshape(batch, n_kv_heads, group * seq_q, seq_k)
    heads, weights = scaled_dot_product_attention(folded_q, k, v, mask)
    return heads.view(batch, n_heads, seq_q, v.shape[-1]), weights.view(batch, n_heads, seq_q, seq_k)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with per-head weights returned and per-head gates (chapters 1, 3 and 5).

    Args:
        d_model: width of the inputs and of the output.
        n_heads: number of heads.
        d_head: query/key width per head (d_k); defaults to d_model // n_heads, which must then divide exactly.
        d_value: value width per head (d_v); defaults to d_head.
        bias: whether the four projections have biases (torch's default is True).
        n_kv_heads: number of key/value heads (chapter 6's grouped-query attention); defaults to n_heads (plain
            multi-head attention) and must divide it. Each K/V head serves a consecutive group of
            n_heads // n_kv_heads query heads; n_kv_heads = 1 is multi-query attention.

    The projections are ``W_q, W_k`` (d_model → n_heads·d_head), ``W_v`` (d_model → n_heads·d_value) and
    ``W_o`` (n_heads·d_value → d_model). With the defaults that is 4·d_model² weights (+ 4·d_model biases)
    whatever n_heads is. With ``n_kv_heads`` < n_heads, W_k and W_v map to n_kv_heads·d_head (n_kv_heads·d_value)
    only: fewer weights, and a smaller KV cache.

    ``head_gates`` (shape (n_heads,), ones by default) multiplies each head's output before ``W_o``. Set a gate to
    0 to mask a head; call ``head_gates.requires_grad_(True)`` to get ∂loss/∂gate (Michel et al.'s importance).
    It is a non-persistent buffer: it is not a trainable parameter and not part of ``state_dict``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_head: int | None = None,
        d_value: int | None = None,
        bias: bool = True,
        n_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or n_heads <= 0:
            raise ValueError(f"d_model and n_heads must be positive, got {d_model} and {n_heads}")
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(
                    f"n_heads={n_heads} does not divide d_model={d_model}; pick n_heads among the divisors of "
                    f"d_model or pass d_head explicitly"
                )
            d_head = d_model // n_heads
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads <= 0 or n_heads % n_kv_heads:
            raise ValueError(
                f"n_kv_heads={n_kv_heads} must be positive and divide n_heads={n_heads}: each key/value head serves "
                f"a group of n_heads // n_kv_heads query heads"
            )
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_head
        self.d_value = d_head if d_value is None else d_value
        self.W_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d_value, bias=bias)
        self.W_o = nn.Linear(n_heads * self.d_value, d_model, bias=bias)
        self.register_buffer("head_gates", torch.ones(n_heads), persistent=False)

    def forward(
        self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """query: (batch, seq_q, d_model); key, value: (batch, seq_k, d_model), default to query (self-attention).

        mask: bool, True = may attend; (seq_q, seq_k), (batch, seq_q, seq_k), or 4-D broadcastable to
        (batch, n_heads, seq_q, seq_k) (e.g. from :func:`padding_mask`).
        Returns ``(output, weights)``: output (batch, seq_q, d_model), weights (batch, n_heads, seq_q, seq_k).
        """
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (batch, seq, d_model={self.d_model}), got {tuple(t.shape)}")
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # (batch, seq_q, seq_k) → (batch, 1, seq_q, seq_k): same mask for every head
        q = split_heads(self.W_q(query), self.n_heads)  # (batch, n_heads, seq_q, d_head)
        k = split_heads(self.W_k(key), self.n_kv_heads)  # (batch, n_kv_heads, seq_k, d_head)
        v = split_heads(self.W_v(value), self.n_kv_heads)  # (batch, n_kv_heads, seq_k, d_value)
        return self.attend(q, k, v, mask)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The part after the projections: share K/V heads, attend, gate each head, merge, W_o.

        q: (batch, n_heads, seq_q, d_head); k, v: (batch, n_kv_heads, seq_k, d_head or d_value), already split.
        A subclass that changes q and k first (the decoder's rotary embeddings, chapter 6) calls this.
        """
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # K/V head j serves query heads j·group ... (j+1)·group - 1, as Hugging Face's repeat_kv
            heads, weights = _grouped_attention(q, k, v, mask, group)
        else:
            heads, weights = scaled_dot_product_attention(q, k, v, mask)
        heads = heads * self.head_gates.to(heads.dtype)[None, :, None, None]
        return self.W_o(merge_heads(heads)), weights

    @classmethod
    def from_torch(cls, reference: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (batch_first or not, same kdim/vdim) into a new
        module."""
        if not reference._qkv_same_embed_dim:
            raise ValueError("only torch MultiheadAttention modules with kdim == vdim == embed_dim are supported")
        if reference.bias_k is not None or reference.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn have no counterpart here")
        d_model, n_heads = reference.embed_dim, reference.num_heads
        has_bias = reference.in_proj_bias is not None
        if has_bias != (reference.out_proj.bias is not None):
            raise ValueError("in_proj and out_proj must both have biases or both not")
        mha = cls(d_model, n_heads, bias=has_bias)
        w_q, w_k, w_v = reference.in_proj_weight.detach().chunk(3)
        with torch.no_grad():
            for mine, w in ((mha.W_q, w_q), (mha.W_k, w_k), (mha.W_v, w_v)):
                mine.weight.copy_(w)
            mha.W_o.weight.copy_(reference.out_proj.weight)
            if has_bias:
                b_q, b_k, b_v = reference.in_proj_bias.detach().chunk(3)
                for mine, b in ((mha.W_q, b_q), (mha.W_k, b_k), (mha.W_v, b_v)):
                    mine.bias.copy_(b)
                mha.W_o.bias.copy_(reference.out_proj.bias)
        return mha.to(reference.in_proj_weight.device, reference.in_proj_weight.dtype)
