"""Is the course's decoder a working language model? Next-token losses that a broken one could not produce
(chapters 6-7).

Two comparisons, each in nats per token (cross-entropy of the true next token; uniform guessing over SmolLM2's
49,152 tokens costs ln 49152 = 10.8):

1. **Real English against the same tokens shuffled** (:func:`real_vs_shuffled_loss`). Lee's background news text
   (:func:`~manyheads.data.corpora.lee_background_text`) is tokenized with the GGUF's tokenizer and cut into
   consecutive windows of ``window`` tokens, each with the BOS token (its id read from the GGUF metadata) in front;
   the shuffled windows hold the same tokens in a seeded random order, so only word order differs. A model that
   has learnt English predicts the real text far better.
2. **Random tokens, repeated** (:func:`repeated_tokens_loss`): ``[BOS] + r + r``, r drawn uniformly from the
   ordinary vocabulary (special tokens excluded). The first copy cannot be predicted (worse than uniform guessing,
   since the model expects text); the second can, by copying from the first -- the work of induction heads
   (chapter 6). The loss of the second copy against the first, seed by seed.

Measured with SmolLM2-135M-Instruct (its Q4_1 weights dequantised to float32) on the CPU, with the settings of
``tests/package/test_decoder_language_model.py``:

* real text, 4 windows of 64 tokens (the first 256 tokens of ``lee_background.cor``): 4.13 nats against 9.03
  shuffled, ratio 0.46 (8 windows of 128 tokens: 3.71 against 8.61, ratio 0.43);
* r of 100 tokens, seeds 0-7: first copy 13.6-14.1 nats, second copy 2.1-3.8, ratio 0.15-0.28 per seed. With r of
  64 tokens the worst seed's ratio is 0.30: the model needs a few tokens of the second copy before it copies well,
  so r is 100 tokens long.

:func:`next_token_losses` is the measurement underneath, for any course model whose output has ``.logits``.
:func:`layer_ablation_losses` asks what each layer's heads are worth: the loss with all of one layer's heads
removed, for every layer (chapter 6).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "next_token_losses",
    "gguf_bos_id",
    "ordinary_token_ids",
    "token_windows",
    "shuffled_windows",
    "repeated_random_tokens",
    "TextLoss",
    "real_vs_shuffled_loss",
    "RepeatLoss",
    "repeated_tokens_loss",
    "layer_ablation_losses",
]


@torch.no_grad()
def next_token_losses(model: nn.Module, ids: Tensor, *, batch_size: int = 8) -> Tensor:
    """Cross-entropy (nats) of each next token: ids (batch, seq) → losses (batch, seq - 1), on the CPU.

    ``losses[b, t]`` is -log p(ids[b, t + 1] | ids[b, : t + 1]). Rows go through ``model`` ``batch_size`` at a
    time, on the model's device, without gradients. ``model(ids)`` must return logits (batch, seq, vocab), or an
    object holding them as ``.logits`` (the course's decoder).
    """
    if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        raise ValueError(
            f"ids must be a (batch, seq) tensor of token ids (torch.long), got {_describe(ids)}; "
            "wrap a single sequence as torch.tensor([ids])."
        )
    if ids.shape[1] < 2:
        raise ValueError(f"ids must hold at least 2 tokens per row to predict a next token, got seq = {ids.shape[1]}.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    device = next(model.parameters()).device
    losses = []
    for rows in ids.split(batch_size):
        rows = rows.to(device)
        out = model(rows)
        logits = getattr(out, "logits", out)
        if logits.shape[:2] != rows.shape:
            raise ValueError(f"the model returned logits of shape {tuple(logits.shape)} for ids {tuple(rows.shape)}.")
        # cross_entropy wants the classes in dimension 1: (batch, vocab, seq - 1) against (batch, seq - 1).
        loss = F.cross_entropy(logits[:, :-1].float().transpose(1, 2), rows[:, 1:], reduction="none")
        losses.append(loss.cpu())
    return torch.cat(losses)


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dim()}-D {x.dtype} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


@functools.lru_cache(maxsize=4)
def gguf_bos_id(path: str | Path | None = None) -> int:
    """The BOS token id written in a GGUF file's metadata (``tokenizer.ggml.bos_token_id``; default: SmolLM2's).

    SmolLM2's file says 1 (``<|im_start|>``). The answer is kept for the process.
    """
    from manyheads.models.gguf_container import read_container
    from manyheads.models.gguf_file import smollm2_gguf_path

    metadata, _ = read_container(smollm2_gguf_path() if path is None else Path(path))
    if "tokenizer.ggml.bos_token_id" not in metadata:
        raise ValueError(f"{path or 'the SmolLM2 GGUF file'} names no BOS token (tokenizer.ggml.bos_token_id).")
    return int(metadata["tokenizer.ggml.bos_token_id"])


def _bos_id(model: nn.Module) -> int:
    """The model's own BOS id when its config carries one, else the one in SmolLM2's GGUF metadata."""
    bos = getattr(getattr(model, "config", None), "bos_token_id", None)
    return gguf_bos_id() if bos is None else int(bos)


def ordinary_token_ids(tokenizer) -> Tensor:
    """Ids of every token of ``tokenizer`` (a ``tokenizers.Tokenizer``) that is not a special token: (n,) long."""
    special = {i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special}
    return torch.tensor([i for i in range(tokenizer.get_vocab_size()) if i not in special], dtype=torch.long)


def token_windows(token_ids: Sequence[int], window: int, *, bos_id: int, n_windows: int | None = None) -> Tensor:
    """Consecutive, non-overlapping windows of ``window`` tokens, each with ``bos_id`` in front: (n, window + 1).

    All whole windows that fit, or the first ``n_windows`` of them; a shorter tail is left out.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1 token, got {window}.")
    available = len(token_ids) // window
    n = available if n_windows is None else n_windows
    if not 1 <= n <= available:
        raise ValueError(
            f"{len(token_ids)} tokens make {available} windows of {window}; asked for {n_windows}. "
            "Ask for fewer or shorter windows, or give more text."
        )
    body = torch.as_tensor(list(token_ids[: n * window]), dtype=torch.long).view(n, window)
    return torch.cat([torch.full((n, 1), bos_id, dtype=torch.long), body], dim=1)


def shuffled_windows(windows: Tensor, *, seed: int) -> Tensor:
    """The same windows with each one's tokens after the BOS in a seeded random order: (n, window + 1).

    Each window keeps exactly its own tokens (the same counts of each), so only their order changes.
    """
    generator = torch.Generator().manual_seed(seed)
    order = torch.stack([torch.randperm(windows.shape[1] - 1, generator=generator) for _ in range(len(windows))])
    return torch.cat([windows[:, :1], windows[:, 1:].gather(1, order)], dim=1)


def repeated_random_tokens(length: int, *, vocabulary: Tensor, bos_id: int, seeds: Iterable[int]) -> Tensor:
    """One row ``[BOS] + r + r`` per seed, r: ``length`` ids drawn uniformly from ``vocabulary``; (seeds, 1 + 2 length).

    ``vocabulary``: the ids to draw from (:func:`ordinary_token_ids`). Each row depends on its seed only.
    """
    if length < 1:
        raise ValueError(f"length must be at least 1, got {length}.")
    rows = []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        r = vocabulary[torch.randint(len(vocabulary), (length,), generator=generator)]
        rows.append(torch.cat([torch.tensor([bos_id]), r, r]))
    if not rows:
        raise ValueError("seeds is empty: give at least one seed.")
    return torch.stack(rows)


@dataclass(frozen=True)
class TextLoss:
    """Mean next-token loss (nats) on real text and on the same tokens shuffled; ``n_tokens`` predicted in each."""

    real: float
    shuffled: float
    n_tokens: int
    window: int

    @property
    def ratio(self) -> float:
        """real / shuffled: well below 1 for a model that has learnt the language."""
        return self.real / self.shuffled


def real_vs_shuffled_loss(
    model: nn.Module,
    tokenizer,
    text: str | None = None,
    *,
    window: int = 64,
    n_windows: int | None = 4,
    seed: int = 0,
    bos_id: int | None = None,
    batch_size: int = 8,
) -> TextLoss:
    """Mean next-token loss on ``text`` cut into windows (see :func:`token_windows`) and on the same windows
    shuffled (:func:`shuffled_windows`, ``seed``). ``text`` defaults to Lee's background news
    (:func:`~manyheads.data.corpora.lee_background_text`), ``bos_id`` to ``model.config.bos_token_id`` if the
    config has one, else to the GGUF's (:func:`gguf_bos_id`).
    ``n_windows=None`` uses the whole text.
    """
    if text is None:
        from manyheads.data.corpora import lee_background_text

        text = lee_background_text()
    bos_id = _bos_id(model) if bos_id is None else bos_id
    windows = token_windows(tokenizer.encode(text).ids, window, bos_id=bos_id, n_windows=n_windows)
    real = next_token_losses(model, windows, batch_size=batch_size)
    shuffled = next_token_losses(model, shuffled_windows(windows, seed=seed), batch_size=batch_size)
    return TextLoss(real.mean().item(), shuffled.mean().item(), real.numel(), window)


@dataclass(frozen=True)
class RepeatLoss:
    """Per seed, the mean loss (nats) of predicting the first copy of r and the second: each (n_seeds,)."""

    seeds: tuple[int, ...]
    length: int
    first: Tensor
    second: Tensor

    @property
    def ratio(self) -> Tensor:
        """second / first, per seed: small when the model copies from the first copy."""
        return self.second / self.first


def repeated_tokens_loss(
    model: nn.Module,
    tokenizer,
    *,
    length: int = 100,
    seeds: Iterable[int] = range(8),
    bos_id: int | None = None,
    batch_size: int = 8,
) -> RepeatLoss:
    """Next-token loss on ``[BOS] + r + r`` (:func:`repeated_random_tokens`), first copy against second, per seed.

    Losses at positions 0 ... length - 1 predict the first copy's tokens; length ... 2 length - 1 the second's,
    including its first token, which nothing before announces. ``bos_id``: as in :func:`real_vs_shuffled_loss`.
    """
    seeds = tuple(seeds)
    bos_id = _bos_id(model) if bos_id is None else bos_id
    ids = repeated_random_tokens(length, vocabulary=ordinary_token_ids(tokenizer), bos_id=bos_id, seeds=seeds)
    losses = next_token_losses(model, ids, batch_size=batch_size)
    return RepeatLoss(seeds, length, losses[:, :length].mean(1), losses[:, length:].mean(1))


@torch.no_grad()
def layer_ablation_losses(model: nn.Module, ids: Tensor) -> Tensor:
    """Mean next-token loss (nats) on ``ids`` with every head of one layer zero-ablated, for each layer in turn:
    (n_layers,) (chapter 6). ``model``: the course's decoder (:class:`~manyheads.models.llama.LlamaDecoder`); ids
    (batch, seq) as for :func:`next_token_losses`, one forward pass for all rows.

    The same numbers as ``with mh.ablated(model, layer's heads): next_token_losses(model, ids).mean()`` for each
    layer, at about 60 % of the cost: removing layer l changes nothing below it, so the inputs of every layer are
    computed once, intact, and each removal runs only layer l and the layers above it.
    """
    from manyheads.interventions import ablated

    if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype != torch.long or ids.shape[1] < 2:
        raise ValueError(f"ids must be a (batch, seq ≥ 2) tensor of token ids (torch.long), got {_describe(ids)}.")
    layers = getattr(model, "layers", None)
    if layers is None or not hasattr(model, "rotary") or not hasattr(model, "embed"):
        raise TypeError(f"layer_ablation_losses needs the course's LlamaDecoder, got {type(model).__name__}")
    device = next(model.parameters()).device
    ids = ids.to(device)
    batch, seq = ids.shape
    rotary = model.rotary(torch.arange(seq, device=device).expand(batch, seq))
    mask = torch.ones(seq, seq, dtype=torch.bool, device=device).tril()[None, None]  # causal, as in forward
    inputs, x = [], model.embed(ids)
    for layer in layers:
        inputs.append(x)
        x, _, _ = layer(x, rotary, mask)
    losses = []
    for index in range(len(layers)):
        with ablated(model, [(index, head) for head in range(model.config.n_heads)]):
            x = inputs[index]
            for layer in layers[index:]:
                x, _, _ = layer(x, rotary, mask)
        logits = model.norm(x) @ model.embed.weight.T  # the tied output head, as in forward
        losses.append(F.cross_entropy(logits[:, :-1].float().transpose(1, 2), ids[:, 1:]))
    return torch.stack(losses).cpu()
