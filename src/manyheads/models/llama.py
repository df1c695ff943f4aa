"""The course's own decoder: SmolLM2-135M-Instruct, a Llama-architecture model, written to be read (chapters 6-7).

Chapter 6 (decoders: causal masks, grouped-query attention, rotary position embeddings, the KV cache) and chapter 7
(the heads of a pretrained decoder) use it. Its weights come from the verified GGUF file through
:func:`manyheads.models.gguf_file.read_gguf`; its attention is the course's
:class:`~manyheads.attention.MultiHeadAttention` with ``n_kv_heads`` < ``n_heads``, so :mod:`manyheads.interventions`
(gates, ablation) works on it as on the encoder. It computes what transformers' ``LlamaForCausalLM`` computes.

One layer, for x of shape (batch, seq, d_model)::

    h   = x + Attention(RMSNorm(x))          # causal, rotary q and k, 9 query heads sharing 3 K/V heads
    out = h + SwiGLU(RMSNorm(h))             # down(silu(gate(h)) * up(h))

and logits = RMSNorm(out of the last layer) @ embeddingᵀ (the output head is the tied embedding matrix).

Rotary embeddings are applied by :class:`RotaryAttention`, a subclass that rotates the split q and k, keeps the
KV cache, and then hands over to ``MultiHeadAttention.attend`` (share K/V heads, softmax, gates, W_o). Keeping that
here rather than as options of ``MultiHeadAttention`` leaves the chapters 1-5 class as short as it was.
No dropout; float32 throughout.

:func:`generate_greedy` generates with or without the KV cache, for a left-padded batch (:func:`pad_left`) too,
stopping each row at the model's EOS (``<|im_end|>``); :func:`kv_cache_nbytes` measures the memory a cache holds,
to set beside :func:`manyheads.costs.kv_cache_bytes` (chapter 7; ``benchmarks/decoder.py`` times both paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention, split_heads

__all__ = [
    "LlamaConfig",
    "RMSNorm",
    "RotaryEmbedding",
    "RotaryAttention",
    "DecoderLayer",
    "LlamaDecoder",
    "DecoderOutput",
    "load_decoder",
    "generate_greedy",
    "pad_left",
    "kv_cache_nbytes",
]


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama-architecture decoder, in the course's names (Hugging Face's in comments)."""

    vocab_size: int
    d_model: int  # hidden_size
    d_ff: int  # intermediate_size
    n_layers: int  # num_hidden_layers
    n_heads: int  # num_attention_heads
    n_kv_heads: int  # num_key_value_heads
    d_head: int  # head_dim
    rms_norm_eps: float
    rope_theta: float
    eos_token_id: int | None = None  # where generate_greedy stops; None: it never stops early
    bos_token_id: int | None = None  # what starts a sequence (SmolLM2: 1, <|im_start|>), from the same metadata

    @classmethod
    def from_hf(cls, config: dict) -> LlamaConfig:
        """From a Hugging Face LlamaConfig dict, such as :func:`~manyheads.models.gguf_file.read_gguf` returns."""
        if not config.get("tie_word_embeddings", True):
            raise ValueError("LlamaDecoder ties its output head to the embeddings; this model has its own lm_head")
        return cls(
            vocab_size=config["vocab_size"],
            d_model=config["hidden_size"],
            d_ff=config["intermediate_size"],
            n_layers=config["num_hidden_layers"],
            n_heads=config["num_attention_heads"],
            n_kv_heads=config["num_key_value_heads"],
            d_head=config.get("head_dim", config["hidden_size"] // config["num_attention_heads"]),
            rms_norm_eps=config["rms_norm_eps"],
            rope_theta=config["rope_theta"],
            eos_token_id=config.get("eos_token_id"),
            bos_token_id=config.get("bos_token_id"),
        )


class RMSNorm(nn.Module):
    """x / √(mean(x²) + eps) · weight: LayerNorm without centring and without a bias."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class RotaryEmbedding(nn.Module):
    """Rotary position embeddings (RoPE), in Hugging Face's "rotate half" layout.

    Feature pairs (i, i + d_head/2) of each head's q and k are rotated by the angle position · θ^(-2i/d_head).
    A dot product of a rotated q and a rotated k then depends on the positions only through their difference.
    """

    def __init__(self, d_head: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_head/2,)

    def forward(self, position_ids: Tensor) -> tuple[Tensor, Tensor]:
        """position_ids (batch, seq) → (cos, sin), each (batch, seq, d_head)."""
        angles = position_ids[..., None].float() * self.inv_freq  # (batch, seq, d_head/2)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    @staticmethod
    def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """x (batch, heads, seq, d_head) rotated by (cos, sin) of shape (batch, seq, d_head)."""
        first, second = x.chunk(2, dim=-1)
        rotated_half = torch.cat([-second, first], dim=-1)
        return x * cos[:, None] + rotated_half * sin[:, None]


class RotaryAttention(MultiHeadAttention):
    """Causal self-attention with rotary q and k and a KV cache; the rest is :class:`MultiHeadAttention`."""

    def forward(
        self,
        x: Tensor,
        rotary: tuple[Tensor, Tensor],
        mask: Tensor | None = None,
        past: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
        """x (batch, seq, d_model); rotary: (cos, sin) for x's positions; mask: bool, (batch, 1, seq, past+seq);
        past: the cached (k, v), each (batch, n_kv_heads, past, d_head), already rotated.

        Returns (output, weights (batch, n_heads, seq, past+seq), (k, v) with x's positions appended).
        """
        q = split_heads(self.W_q(x), self.n_heads)  # (batch, n_heads, seq, d_head)
        k = split_heads(self.W_k(x), self.n_kv_heads)  # (batch, n_kv_heads, seq, d_head)
        v = split_heads(self.W_v(x), self.n_kv_heads)
        q, k = RotaryEmbedding.rotate(q, *rotary), RotaryEmbedding.rotate(k, *rotary)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        output, weights = self.attend(q, k, v, mask)
        return output, weights, (k, v)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) · up(x)): the decoder's MLP, d_model → d_ff → d_model, no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then + SwiGLU(norm(·))."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        c = config
        self.attention_norm = RMSNorm(c.d_model, c.rms_norm_eps)
        self.attention = RotaryAttention(c.d_model, c.n_heads, d_head=c.d_head, bias=False, n_kv_heads=c.n_kv_heads)
        self.mlp_norm = RMSNorm(c.d_model, c.rms_norm_eps)
        self.mlp = SwiGLU(c.d_model, c.d_ff)

    def forward(self, x, rotary, mask, past=None):
        attended, weights, cache = self.attention(self.attention_norm(x), rotary, mask, past)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x)), weights, cache


@dataclass
class DecoderOutput:
    """logits (batch, seq, vocab); attentions: one (batch, n_heads, seq, past+seq) tensor per layer when asked for;
    past_key_values: one rotated (k, v) pair per layer, each (batch, n_kv_heads, past+seq, d_head), when asked for."""

    logits: Tensor
    attentions: tuple[Tensor, ...] | None = None
    past_key_values: tuple[tuple[Tensor, Tensor], ...] | None = None


class LlamaDecoder(nn.Module):
    """A Llama-architecture decoder-only language model (SmolLM2): embeddings, n_layers blocks, final RMSNorm, tied
    output head. See the module docstring."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.rotary = RotaryEmbedding(config.d_head, config.rope_theta)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.rms_norm_eps)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        output_attentions: bool = False,
        past_key_values: tuple[tuple[Tensor, Tensor], ...] | None = None,
        use_cache: bool = False,
    ) -> DecoderOutput:
        """input_ids (batch, seq). attention_mask (batch, past+seq): 1 for real tokens, 0 for padding (keys that no
        query may attend to). position_ids (batch, seq): default past, past+1, ... (pass your own with left padding).
        past_key_values: from a previous call's output with ``use_cache=True``. Inputs are moved to the model's
        device; the outputs stay there.
        """
        # Tokenizers make CPU tensors; moving them here lets a notebook put only the model on the GPU.
        device = self.embed.weight.device
        input_ids = input_ids.to(device)
        attention_mask = None if attention_mask is None else attention_mask.to(device)
        position_ids = None if position_ids is None else position_ids.to(device)
        batch, seq = input_ids.shape
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        if position_ids is None:
            position_ids = torch.arange(past, past + seq, device=device).expand(batch, seq)
        # Query i (at absolute position past + i) may attend to keys 0 ... past + i.
        mask = torch.ones(seq, past + seq, dtype=torch.bool, device=device).tril(diagonal=past)[None, None]
        if attention_mask is not None:
            if attention_mask.shape != (batch, past + seq):
                raise ValueError(
                    f"attention_mask must be (batch, past + seq) = ({batch}, {past + seq}), "
                    f"got {tuple(attention_mask.shape)}"
                )
            mask = mask & attention_mask.bool()[:, None, None, :]
        rotary = self.rotary(position_ids)
        x = self.embed(input_ids)
        attentions, caches = [], []
        for i, layer in enumerate(self.layers):
            x, weights, cache = layer(x, rotary, mask, None if past_key_values is None else past_key_values[i])
            if output_attentions:
                attentions.append(weights)
            if use_cache:
                caches.append(cache)
        logits = self.norm(x) @ self.embed.weight.T  # tied output head
        return DecoderOutput(
            logits, tuple(attentions) if output_attentions else None, tuple(caches) if use_cache else None
        )


_HF_NAMES = {  # Hugging Face Llama name (after "model.layers.N.") → ours (after "layers.N.")
    "input_layernorm": "attention_norm",
    "self_attn.q_proj": "attention.W_q",
    "self_attn.k_proj": "attention.W_k",
    "self_attn.v_proj": "attention.W_v",
    "self_attn.o_proj": "attention.W_o",
    "post_attention_layernorm": "mlp_norm",
    "mlp.gate_proj": "mlp.gate",
    "mlp.up_proj": "mlp.up",
    "mlp.down_proj": "mlp.down",
}


def _course_name(name: str) -> str:
    name = name.removeprefix("model.")
    if name.startswith("embed_tokens."):
        return "embed." + name.removeprefix("embed_tokens.")
    for hf, ours in _HF_NAMES.items():
        name = name.replace(f".{hf}.", f".{ours}.")
    return name


def load_decoder(device: torch.device | str | None = None):
    """``(decoder, tokenizer)``: SmolLM2-135M-Instruct from its verified GGUF file, float32, in eval mode.

    ``tokenizer`` is a ``tokenizers.Tokenizer`` (``tokenizer.encode(text).ids``). ``device`` defaults to the CPU.
    """
    from manyheads.models.gguf_file import read_gguf

    config, state, tokenizer = read_gguf()
    decoder = LlamaDecoder(LlamaConfig.from_hf(config))
    decoder.load_state_dict({_course_name(name): tensor for name, tensor in state.items()})
    return decoder.eval().to(device or "cpu"), tokenizer


def pad_left(prompts: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """Prompts of different lengths (lists of token ids) as one batch: ``(input_ids, attention_mask)``, each
    (batch, longest prompt), torch.long.

    The padding goes on the left, so that every prompt's last token sits in the last column, where
    :func:`generate_greedy` appends the next one (chapter 6). ``attention_mask`` is 1 for real tokens and 0 for
    padding; ``pad_id`` is never attended to, so its value does not matter.
    """
    rows = [list(prompt) for prompt in prompts]
    empty = [i for i, row in enumerate(rows) if not row]
    if not rows or empty:
        raise ValueError(
            f"pad_left needs at least one prompt and at least one token in each; prompts {empty} are empty"
            if rows
            else "pad_left needs at least one prompt, got none"
        )
    width = max(map(len, rows))
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        attention_mask[i, width - len(row) :] = 1
    return input_ids, attention_mask


def kv_cache_nbytes(past_key_values: tuple[tuple[Tensor, Tensor], ...]) -> int:
    """The memory a KV cache (``DecoderOutput.past_key_values``) holds, measured: the bytes of the storages behind
    its key and value tensors, each storage counted once (chapter 7).

    Compare it with the formula 2 · layers · batch · seq · n_kv_heads · d_head · bytes per element,
    :func:`manyheads.costs.kv_cache_bytes` (float32: 4 bytes per element).
    """
    storages = {}
    for pair in past_key_values:
        for tensor in pair:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def _check_prompts(model: LlamaDecoder, input_ids, attention_mask, max_new_tokens) -> Tensor:
    """generate_greedy's arguments checked, with what to do instead; returns the (batch, seq) 0/1 mask."""
    if not isinstance(input_ids, Tensor):
        raise TypeError(
            f"input_ids must be a (batch, seq) tensor of token ids, got a {type(input_ids).__name__}; "
            f"use torch.tensor([tokenizer.encode(text).ids]), or pad_left(prompts) for prompts of different lengths"
        )
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise TypeError(
            f"input_ids must hold integer token ids (torch.long), got dtype {input_ids.dtype}; "
            f"build it with torch.tensor([tokenizer.encode(text).ids])"
        )
    if input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}; for one prompt pass input_ids[None]"
        )
    if input_ids.numel() == 0:
        raise ValueError(
            f"empty prompt: input_ids has shape {tuple(input_ids.shape)}; every prompt needs at least one token "
            f"(a chat prompt starts with <|im_start|>)"
        )
    vocab = model.config.vocab_size
    if input_ids.min() < 0 or input_ids.max() >= vocab:
        raise ValueError(f"token ids must lie in [0, {vocab}), got ids from {input_ids.min()} to {input_ids.max()}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if attention_mask is None:
        return torch.ones_like(input_ids, dtype=torch.long)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask must have input_ids' shape {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}"
        )
    mask = attention_mask.long()
    if not ((mask == 0) | (mask == 1)).all():
        raise ValueError("attention_mask must hold 1 for real tokens and 0 for padding, nothing else")
    empty = (mask.sum(1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"empty prompt: rows {empty} of attention_mask have no real token")
    if (mask[:, 1:] < mask[:, :-1]).any():
        raise ValueError(
            "attention_mask must pad on the left (0s, then 1s), so that each prompt ends in the last column where the "
            "next token goes; build the batch with pad_left(prompts)"
        )
    return mask


@torch.no_grad()
def generate_greedy(
    model: LlamaDecoder,
    input_ids: Tensor,
    max_new_tokens: int,
    use_cache: bool = True,
    attention_mask: Tensor | None = None,
    stop_at_eos: bool = True,
) -> Tensor:
    """Append up to ``max_new_tokens`` tokens to each prompt, each the most likely next one (chapter 6):
    (batch, seq) → (batch, seq + n), n ≤ max_new_tokens.

    With ``use_cache`` each step feeds only the newest token and reuses the keys and values of the earlier ones
    (the KV cache); without it, each step runs the whole sequence again. Both give the same tokens.

    The prompt may be on the CPU: it is moved to the model's device, where the result stays.

    Prompts of different lengths: pad them on the left and pass the mask, ``ids, mask = pad_left(prompts)`` then
    ``generate_greedy(model, ids, n, attention_mask=mask)``. Positions then count real tokens only
    (position_ids = cumsum(attention_mask) - 1, as transformers' ``generate`` does), so each row gets the tokens it
    would get alone. (Rotary scores depend only on position differences, so counting the pads too would shift every
    position of a row alike and change its logits by rounding only; counting real tokens makes them the same.)

    With ``stop_at_eos`` a row that produces ``model.config.eos_token_id`` (SmolLM2: 2, ``<|im_end|>``, the end of a
    chat turn) is finished: its later columns repeat that id, and generation stops early once every row is finished.
    """
    mask = _check_prompts(model, input_ids, attention_mask, max_new_tokens)
    device = model.embed.weight.device  # the prompt follows the model; the result stays on its device
    ids, mask = input_ids.long().to(device), mask.to(device)
    if max_new_tokens == 0:
        return ids
    eos = model.config.eos_token_id if stop_at_eos else None
    positions = (mask.cumsum(1) - 1).clamp(min=0)  # pads get position 0; nothing attends to them
    finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    out = model(ids, attention_mask=mask, position_ids=positions, use_cache=use_cache)
    for step in range(max_new_tokens):
        next_ids = out.logits[:, -1].argmax(-1)
        if eos is not None:
            next_ids = next_ids.masked_fill(finished, eos)  # a finished row only repeats its EOS
            finished |= next_ids == eos
        ids = torch.cat([ids, next_ids[:, None]], dim=1)
        mask = torch.cat([mask, torch.ones_like(mask[:, -1:])], dim=1)
        positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)
        if step == max_new_tokens - 1 or finished.all():
            break
        if use_cache:
            out = model(
                ids[:, -1:],
                attention_mask=mask,
                position_ids=positions[:, -1:],
                past_key_values=out.past_key_values,
                use_cache=True,
            )
        else:
            out = model(ids, attention_mask=mask, position_ids=positions)
    return ids
