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
"""

from __future__ import annotations

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
        past_key_values: from a previous call's output with ``use_cache=True``.
        """
        batch, seq = input_ids.shape
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        device = input_ids.device
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


@torch.no_grad()
def generate_greedy(model: LlamaDecoder, input_ids: Tensor, max_new_tokens: int, use_cache: bool = True) -> Tensor:
    """Append ``max_new_tokens`` tokens, each the most likely next one: (batch, seq) → (batch, seq + max_new_tokens).

    With ``use_cache`` each step feeds only the newest token and reuses the keys and values of the earlier ones
    (chapter 6's KV cache); without it, each step runs the whole sequence again. Both give the same tokens.
    The prompts of a batch must have the same length (no padding).
    """
    ids, past = input_ids, None
    for _ in range(max_new_tokens):
        if use_cache:
            out = model(ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True)
            past = out.past_key_values
        else:
            out = model(ids)
        ids = torch.cat([ids, out.logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids
