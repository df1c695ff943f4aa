"""A BERT-style encoder built on :class:`manyheads.attention.MultiHeadAttention`, loading BERT checkpoints.

Used by chapter 4 (what heads learn: every layer's attention weights), chapter 5 (pruning: per-head gates,
zero and mean ablation, gradients with respect to the gates, physically removed heads) and chapter 6 (layer
hierarchy). Its outputs equal those of ``transformers.BertModel`` on the same checkpoint (a test checks it).

Shapes: batch, seq, d_model (BERT's hidden_size), n_layers, n_heads, d_head = d_model / n_heads, d_ff (BERT's
intermediate_size). One layer, post-LayerNorm as in BERT::

    h   = LayerNorm(x + MultiHeadAttention(x))
    out = LayerNorm(h + W_out GELU(W_in h))        # GELU is the exact, erf-based one

There is no dropout: the course runs the pretrained model to analyse it, not to pretrain it.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator, Mapping
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
    def from_hf(cls, config: Mapping) -> "BertConfig":
        """From a Hugging Face ``config.json`` dict; refuses settings this encoder does not implement."""
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"only absolute position embeddings are supported, got {config['position_embedding_type']!r}")
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
    """Word-piece + position + segment (token type) embeddings, then LayerNorm: (batch, seq) ids → (batch, seq, d_model)."""

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
    """One post-LayerNorm BERT layer: (batch, seq, d_model) → ((batch, seq, d_model), weights (batch, n_heads, seq, seq))."""

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
    """BERT's encoder stack with per-head gates (chapters 4-6). Load one with :meth:`from_pretrained` or :func:`load_encoder`.

    ``head_gates`` (n_layers, n_heads), ones by default, multiplies each head's output before that layer's W_o
    (it is handed to each layer's ``MultiHeadAttention.head_gates`` at every forward, so set gates here).
    A gate of 0 masks a head. For Michel et al.'s importance use :meth:`gate_gradients`, or call
    ``head_gates.requires_grad_(True)`` and read ``head_gates.grad`` after a backward pass. Temporary changes:
    :meth:`gated` and :meth:`ablated` (zero or mean ablation) are context managers that restore the model on exit.
    :meth:`pruned` returns a copy with heads physically removed; head indices keep their original numbering.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.register_buffer("head_gates", torch.ones(config.n_layers, config.n_heads), persistent=False)
        # kept_heads[i]: original indices of the heads layer i still has (all of them until pruned()).
        self.kept_heads: list[list[int]] = [list(range(config.n_heads)) for _ in range(config.n_layers)]

    # ----------------------------------------------------------------------------------------------- forward
    def forward(
        self,
        input_ids,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """input_ids: (batch, seq) word-piece ids, or a :class:`~manyheads.models.tokenizer.TokenBatch` (then the other
        two come from it); inputs are moved to the model's device. attention_mask: (batch, seq), 1/True = real token, 0/False = padding (default: all
        real). token_type_ids: (batch, seq) segment ids (default: all 0). Returns an :class:`EncoderOutput`.
        """
        if hasattr(input_ids, "inputs"):
            batch = input_ids.inputs()
            input_ids, attention_mask, token_type_ids = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.config.max_positions:
            raise ValueError(f"sequence of {input_ids.shape[1]} tokens is longer than {self.config.max_positions} positions")
        # Tokenizers make CPU tensors; moving them here lets a notebook put only the model on the GPU.
        device = self.head_gates.device
        input_ids = input_ids.to(device)
        token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids.to(device)
        attention_mask = None if attention_mask is None else attention_mask.to(device)
        # (batch, 1, 1, seq): padded keys get no attention; padded query rows are computed but meaningless.
        mask = None if attention_mask is None else padding_mask(attention_mask)
        x = self.embeddings(input_ids, token_type_ids)
        hidden, attentions = [x], []
        try:
            for i, layer in enumerate(self.layers):
                layer.attention.head_gates = self._layer_gates(i, self.head_gates)
                x, weights = layer(x, mask)
                hidden.append(x)
                attentions.append(weights)
        finally:
            # Do not leave autograd graph pieces in the layers' buffers (they would keep the graph alive).
            for i, layer in enumerate(self.layers):
                layer.attention.head_gates = self._layer_gates(i, self.head_gates.detach())
        return EncoderOutput(x, tuple(attentions), tuple(hidden) if output_hidden_states else None)

    def _layer_gates(self, i: int, gates: Tensor) -> Tensor:
        kept = self.kept_heads[i]
        if len(kept) == self.config.n_heads:
            return gates[i]
        return gates[i, torch.tensor(kept, device=gates.device)]

    # -------------------------------------------------------------------------------- gates and ablation
    @contextlib.contextmanager
    def gated(self, gates: Tensor) -> Iterator["BertEncoder"]:
        """Run with ``head_gates`` replaced by ``gates`` (n_layers, n_heads), restored on exit (chapter 5).

        ``gates`` may require grad; the model then computes d(output)/d(gates).
        """
        gates = gates.to(self.head_gates.device)
        if gates.shape != self.head_gates.shape:
            raise ValueError(f"gates must have shape {tuple(self.head_gates.shape)}, got {tuple(gates.shape)}")
        saved = self.head_gates
        self.head_gates = gates
        try:
            yield self
        finally:
            self.head_gates = saved

    def gate_gradients(self, loss_fn, *args, **kwargs) -> Tensor:
        """∂loss/∂gate for every head at gates = current gates: (n_layers, n_heads) (chapter 5, Michel et al.).

        ``loss_fn(output: EncoderOutput) -> scalar Tensor``; ``args, kwargs`` go to :meth:`forward`. Parameter
        gradients are neither computed nor touched. Michel et al.'s importance of a head is the absolute value
        of this, averaged over a dataset.
        """
        gates = self.head_gates.detach().clone().requires_grad_(True)
        with self.gated(gates), torch.enable_grad():
            loss = loss_fn(self(*args, **kwargs))
        (grad,) = torch.autograd.grad(loss, gates)
        return grad

    @torch.no_grad()
    def head_output_means(self, *args, **kwargs) -> Tensor:
        """Each head's output (its input to W_o) averaged over the real tokens of a reference batch (chapter 5).

        ``args, kwargs`` go to :meth:`forward`. Returns (n_layers, n_heads, d_head); rows of pruned heads are 0.
        Computed on the model as it is (current gates and ablations included).
        """
        n_layers, n_heads, d_head = self.config.n_layers, self.config.n_heads, self.config.d_head
        means = torch.zeros(n_layers, n_heads, d_head, device=self.head_gates.device)
        captured: dict[int, Tensor] = {}
        hooks = [
            layer.attention.W_o.register_forward_pre_hook(lambda _, inputs, i=i: captured.__setitem__(i, inputs[0]))
            for i, layer in enumerate(self.layers)
        ]
        try:
            self(*args, **kwargs)
        finally:
            for hook in hooks:
                hook.remove()
        is_token = _attention_mask_of(args, kwargs)
        for i, kept in enumerate(self.kept_heads):
            heads_in = captured[i]  # (batch, seq, len(kept)·d_head)
            real = heads_in.reshape(-1, heads_in.shape[-1]) if is_token is None else heads_in[is_token.bool()]
            means[i, kept] = real.mean(0).reshape(len(kept), d_head).to(means.dtype)
        return means

    @contextlib.contextmanager
    def ablated(self, heads, mode: str = "zero", reference=None) -> Iterator["BertEncoder"]:
        """Run with some heads ablated, restoring the model on exit (chapter 5).

        heads: one ``(layer, head)`` pair, an iterable of pairs, or a bool tensor (n_layers, n_heads), True = ablate.
        mode ``"zero"``: the head's output is 0 (its gate is set to 0).
        mode ``"mean"``: the head's output is replaced by its mean over the real tokens of ``reference`` -- a
        :class:`~manyheads.models.tokenizer.TokenBatch` (or a dict of forward's keyword arguments) or the
        (n_layers, n_heads, d_head) tensor :meth:`head_output_means` returns (to reuse it across many ablations).
        Mean ablation keeps the average information a head adds and removes only what depends on the input.
        """
        pairs = _head_pairs(heads, self.config.n_layers, self.config.n_heads)
        for layer, head in pairs:
            if head not in self.kept_heads[layer]:
                raise ValueError(f"head {layer}.{head} was pruned; it cannot be ablated")
        if mode == "zero":
            gates = self.head_gates.detach().clone()
            for layer, head in pairs:
                gates[layer, head] = 0.0
            with self.gated(gates):
                yield self
            return
        if mode != "mean":
            raise ValueError(f"mode must be 'zero' or 'mean', got {mode!r}")
        if reference is None:
            raise ValueError("mean ablation needs a reference batch (or the means from head_output_means)")
        if isinstance(reference, Tensor):
            means = reference
        elif isinstance(reference, Mapping):
            means = self.head_output_means(**reference)
        else:
            means = self.head_output_means(reference)
        by_layer: dict[int, list[int]] = {}
        for layer, head in pairs:
            by_layer.setdefault(layer, []).append(head)
        hooks = []
        for layer, layer_heads in by_layer.items():
            kept = self.kept_heads[layer]
            # Feature columns of W_o's input that belong to each ablated head, in the (possibly pruned) layer.
            d = self.config.d_head
            columns = torch.cat([torch.arange(kept.index(h) * d, (kept.index(h) + 1) * d) for h in layer_heads])
            values = means[layer, layer_heads].reshape(-1)
            hooks.append(self.layers[layer].attention.W_o.register_forward_pre_hook(_replace_columns(columns, values)))
        try:
            yield self
        finally:
            for hook in hooks:
                hook.remove()

    # -------------------------------------------------------------------------------------------- pruning
    def pruned(self, heads) -> "BertEncoder":
        """A copy with ``heads`` physically removed: smaller W_q, W_k, W_v (rows) and W_o (columns) (chapter 5).

        heads: as in :meth:`ablated`. Equal to gating those heads to 0, but cheaper to run. Every layer keeps at
        least one head. ``head_gates`` keeps its (n_layers, n_heads) shape and original numbering; the gates of
        removed heads have no effect. Attention weights of a pruned layer have only its remaining heads, in order.
        """
        pairs = _head_pairs(heads, self.config.n_layers, self.config.n_heads)
        model = copy.deepcopy(self)
        d = self.config.d_head
        for i, layer in enumerate(model.layers):
            remove = {h for l, h in pairs if l == i}
            if not remove:
                continue
            kept = [h for h in model.kept_heads[i] if h not in remove]
            if not kept:
                raise ValueError(f"pruning would remove every head of layer {i}; keep at least one")
            old = layer.attention
            positions = [model.kept_heads[i].index(h) for h in kept]
            rows = torch.cat([torch.arange(p * d, (p + 1) * d) for p in positions])
            new = MultiHeadAttention(self.config.d_model, len(kept), d_head=d)
            with torch.no_grad():
                for name in ("W_q", "W_k", "W_v"):
                    getattr(new, name).weight.copy_(getattr(old, name).weight[rows])
                    getattr(new, name).bias.copy_(getattr(old, name).bias[rows])
                new.W_o.weight.copy_(old.W_o.weight[:, rows])
                new.W_o.bias.copy_(old.W_o.bias)
            layer.attention = new.to(old.W_o.weight.device, old.W_o.weight.dtype)
            model.kept_heads[i] = kept
        return model

    # -------------------------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, name: str | os.PathLike | None = None) -> "BertEncoder":
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


def _head_pairs(heads, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """Normalize the ways of naming heads to a list of (layer, head) pairs, checking the ranges."""
    if isinstance(heads, Tensor):
        if heads.shape != (n_layers, n_heads):
            raise ValueError(f"a head mask must have shape ({n_layers}, {n_heads}), got {tuple(heads.shape)}")
        pairs = [tuple(p) for p in heads.bool().nonzero().tolist()]
    elif isinstance(heads, tuple) and len(heads) == 2 and all(isinstance(v, int) for v in heads):
        pairs = [heads]
    else:
        pairs = [tuple(p) for p in heads]
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise IndexError(f"head ({layer}, {head}) out of range: {n_layers} layers × {n_heads} heads")
    return [(int(l), int(h)) for l, h in pairs]


def _replace_columns(columns: Tensor, values: Tensor):
    """A forward pre-hook for W_o that overwrites the given input features with constant values."""

    def hook(_module, inputs):
        (x,) = inputs
        x = x.clone()
        x[..., columns.to(x.device)] = values.to(x.device, x.dtype)
        return (x,)

    return hook


def _attention_mask_of(args: tuple, kwargs: dict) -> Tensor | None:
    """The attention_mask among forward's arguments (positional, keyword, or inside a TokenBatch), if any."""
    if args and hasattr(args[0], "inputs"):
        return args[0].attention_mask
    if "attention_mask" in kwargs:
        return kwargs["attention_mask"]
    return args[1] if len(args) > 1 else None


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
