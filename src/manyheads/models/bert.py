"""A BERT-style encoder built on :class:`manyheads.attention.MultiHeadAttention`, loading BERT checkpoints.

Used by chapter 4 (what heads learn: every layer's attention weights), chapter 5 (pruning, through
:mod:`manyheads.interventions`, which gates, ablates and removes heads of this and every course model) and
chapter 6 (layer hierarchy). Its outputs equal those of ``transformers.BertModel`` on the same checkpoint (a test
checks it).

Shapes: batch, seq, d_model (BERT's hidden_size), n_layers, n_heads, d_head = d_model / n_heads, d_ff (BERT's
intermediate_size). One layer, post-LayerNorm as in BERT::

    h   = LayerNorm(x + MultiHeadAttention(x))
    out = LayerNorm(h + W_out GELU(W_in h))        # GELU is the exact, erf-based one

There is no dropout: the course runs the pretrained model to analyse it, not to pretrain it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads.attention import MultiHeadAttention, padding_mask

__all__ = ["BertConfig", "BertEncoder", "EncoderLayer", "EncoderOutput", "load_encoder"]

# Hugging Face's names for GELU: "gelu" is the exact erf form BERT was trained with; the others are the tanh fit.
_ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT-family encoder, in the course's vocabulary (Hugging Face's name in brackets)."""

    vocab_size: int
    d_model: int  # hidden_size
    n_layers: int  # num_hidden_layers
    n_heads: int  # num_attention_heads
    d_ff: int  # intermediate_size
    max_positions: int = 512  # max_position_embeddings
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    activation: str = "gelu"  # hidden_act

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_hf(cls, config: Mapping) -> BertConfig:
        """From a Hugging Face ``config.json`` dict; refuses settings this encoder does not implement."""
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"only absolute position embeddings are supported, got {config['position_embedding_type']!r}"
            )
        if config.get("hidden_act", "gelu") not in _ACTIVATIONS:
            raise ValueError(f"unsupported hidden_act {config['hidden_act']!r}; supported: {sorted(_ACTIVATIONS)}")
        if config.get("is_decoder") or config.get("add_cross_attention"):
            raise ValueError("only encoder (bidirectional) BERT checkpoints are supported")
        return cls(
            vocab_size=config["vocab_size"],
            d_model=config["hidden_size"],
            n_layers=config["num_hidden_layers"],
            n_heads=config["num_attention_heads"],
            d_ff=config["intermediate_size"],
            max_positions=config.get("max_position_embeddings", 512),
            type_vocab_size=config.get("type_vocab_size", 2),
            layer_norm_eps=config.get("layer_norm_eps", 1e-12),
            pad_token_id=config.get("pad_token_id", 0) or 0,
            activation=config.get("hidden_act", "gelu"),
        )


@dataclass
class EncoderOutput:
    """last_hidden_state: (batch, seq, d_model).
    attentions: one (batch, n_heads, seq, seq) tensor per layer (n_layers of them; the form bertviz takes).
    hidden_states: n_layers + 1 tensors (batch, seq, d_model) -- the embeddings, then each layer's output -- or
    None unless asked for.
    """

    last_hidden_state: Tensor
    attentions: tuple[Tensor, ...]
    hidden_states: tuple[Tensor, ...] | None = None

    def stacked_attentions(self) -> Tensor:
        """All layers' attention weights as one (n_layers, batch, n_heads, seq, seq) tensor.

        Only possible while every layer has the same number of heads (not after pruning different counts).
        """
        return torch.stack(self.attentions)


class Embeddings(nn.Module):
    """Word-piece + position + segment (token type) embeddings, then LayerNorm.

    (batch, seq) ids → (batch, seq, d_model).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.position = nn.Embedding(config.max_positions, config.d_model)
        self.token_type = nn.Embedding(config.type_vocab_size, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.norm(self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids))


class EncoderLayer(nn.Module):
    """One post-LayerNorm BERT layer.

    (batch, seq, d_model) → ((batch, seq, d_model), weights (batch, n_heads, seq, seq)).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.n_heads)
        self.attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.W_in = nn.Linear(config.d_model, config.d_ff)
        self.W_out = nn.Linear(config.d_ff, config.d_model)
        self.output_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.approximate = _ACTIVATIONS[config.activation]

    def forward(self, x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        attended, weights = self.attention(x, mask=mask)
        h = self.attention_norm(x + attended)
        return self.output_norm(h + self.W_out(F.gelu(self.W_in(h), approximate=self.approximate))), weights


class BertEncoder(nn.Module):
    """BERT's encoder stack (chapters 4-6). Load one with :meth:`from_pretrained` or :func:`load_encoder`.

    Each layer's attention is a :class:`~manyheads.attention.MultiHeadAttention` with its own per-head gates;
    gate, ablate or remove heads with :mod:`manyheads.interventions`.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))

    def forward(
        self,
        input_ids,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """input_ids: (batch, seq) word-piece ids, or a :class:`~manyheads.models.tokenizer.TokenBatch` (then the
        other two come from it); inputs are moved to the model's device. attention_mask: (batch, seq), 1/True = real
        token, 0/False = padding (default: all real). token_type_ids: (batch, seq) segment ids (default: all 0).
        Returns an :class:`EncoderOutput`.
        """
        if hasattr(input_ids, "inputs"):
            batch = input_ids.inputs()
            input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
            token_type_ids = batch["token_type_ids"]
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.config.max_positions:
            raise ValueError(
                f"sequence of {input_ids.shape[1]} tokens is longer than {self.config.max_positions} positions"
            )
        # Tokenizers make CPU tensors; moving them here lets a notebook put only the model on the GPU.
        device = self.embeddings.word.weight.device
        input_ids = input_ids.to(device)
        token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids.to(device)
        attention_mask = None if attention_mask is None else attention_mask.to(device)
        # (batch, 1, 1, seq): padded keys get no attention; padded query rows are computed but meaningless.
        mask = None if attention_mask is None else padding_mask(attention_mask)
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        for layer in self.layers:
            x, weights = layer(x, mask)
            hidden.append(x)
            attentions.append(weights)
        return EncoderOutput(x, tuple(attentions), tuple(hidden) if output_hidden_states else None)

    # -------------------------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, name: str | os.PathLike | None = None) -> BertEncoder:
        """Load a BERT-family checkpoint (see :func:`manyheads.models.checkpoints.model_dir` for what ``name`` may be).

        Returns the model in eval mode, on the CPU, in float32.
        """
        from manyheads.models import checkpoints

        directory = checkpoints.model_dir(name)
        model = cls(BertConfig.from_hf(checkpoints.read_config(directory)))
        model.load_hf_state_dict(checkpoints.read_state_dict(directory))
        return model.eval()

    def load_hf_state_dict(self, state: Mapping[str, Tensor]) -> None:
        """Copy weights named as in Hugging Face's BERT (with or without the ``bert.`` prefix) into this model.

        Pooler and pretraining heads (``pooler.*``, ``cls.*``) are ignored; a missing or misshapen weight raises.
        """
        mine = self.state_dict()
        loaded = {}
        for hf_name, tensor in state.items():
            name = _hf_to_mine(hf_name.removeprefix("bert."))
            if name is None:
                continue
            if name not in mine:
                raise KeyError(f"checkpoint weight {hf_name!r} has no place in this encoder")
            if mine[name].shape != tensor.shape:
                raise ValueError(f"{hf_name}: checkpoint shape {tuple(tensor.shape)}, model {tuple(mine[name].shape)}")
            loaded[name] = tensor
        missing = sorted(set(mine) - set(loaded))
        if missing:
            raise KeyError(f"the checkpoint lacks {len(missing)} weights of this encoder, e.g. {missing[:3]}")
        self.load_state_dict(loaded)


_HF_LAYER_NAMES = {
    "attention.self.query": "attention.W_q",
    "attention.self.key": "attention.W_k",
    "attention.self.value": "attention.W_v",
    "attention.output.dense": "attention.W_o",
    "attention.output.LayerNorm": "attention_norm",
    "intermediate.dense": "W_in",
    "output.dense": "W_out",
    "output.LayerNorm": "output_norm",
}
_HF_EMBEDDING_NAMES = {
    "word_embeddings": "word",
    "position_embeddings": "position",
    "token_type_embeddings": "token_type",
    "LayerNorm": "norm",
}


def _hf_to_mine(name: str) -> str | None:
    """Hugging Face BERT weight name (without ``bert.``) → this module's name; None for weights we do not use."""
    # Old TensorFlow-converted checkpoints call LayerNorm's weight/bias gamma/beta.
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    parts = name.split(".")
    if parts[0] == "embeddings":
        if parts[1] == "position_ids":  # a buffer some checkpoints carry: positions are recomputed here
            return None
        return f"embeddings.{_HF_EMBEDDING_NAMES.get(parts[1], parts[1])}.{parts[-1]}"
    if parts[:2] == ["encoder", "layer"]:
        inner = ".".join(parts[3:-1])
        return f"layers.{parts[2]}.{_HF_LAYER_NAMES.get(inner, inner)}.{parts[-1]}"
    if parts[0] in ("pooler", "cls"):
        return None
    return name


def load_encoder(name: str | os.PathLike | None = None, device: torch.device | str | None = None):
    """``(encoder, tokenizer)`` for a checkpoint (default: the bundled all-MiniLM-L6-v2), encoder in eval mode.

    ``name``: see :func:`manyheads.models.checkpoints.model_dir`. ``device`` defaults to the CPU.
    """
    from manyheads.models import checkpoints
    from manyheads.models.tokenizer import Tokenizer

    directory = checkpoints.model_dir(name)
    encoder = BertEncoder.from_pretrained(directory)
    tokenizer = Tokenizer.from_dir(directory, max_length=encoder.config.max_positions)
    return encoder.to(device or "cpu"), tokenizer
