"""transformers' reading of SmolLM2's GGUF file, the reference the decoder's tests compare with, read once per run.

transformers dequantises the GGUF in Python (15-30 s on 2 cores with its tokenizer, more beside the other pytest
worker), and tests/package/test_llama.py and test_smollm2_weights.py each need it. The first caller of the run reads
the file and pickles the model and tokenizer into the run's temporary folder under a file lock (transformers refuses
``save_pretrained`` for a model read from a GGUF); every caller then loads that copy: the same objects with the same
float32 tensors, in under a second.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from manyheads.models.gguf_file import smollm2_gguf_path


def _shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Under xdist, getbasetemp() is per worker and its parent is the run's (as tests/book/conftest.py's build).
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "smollm2-transformers"
    folder.mkdir(exist_ok=True)
    return folder


def transformers_smollm2(tmp_path_factory: pytest.TempPathFactory, attn_implementation: str | None = None):
    """(LlamaForCausalLM in eval mode, its tokenizer), read offline from the same GGUF as the course's decoder."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    folder = _shared_folder(tmp_path_factory)
    saved = folder / "model-and-tokenizer.pt"
    with FileLock(str(folder / "read.lock")):
        if not saved.is_file():
            path = smollm2_gguf_path()
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("HF_HUB_OFFLINE", "1")
                model = transformers.LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
                tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            torch.save({"model": model, "tokenizer": tokenizer}, folder / "partial.pt")
            (folder / "partial.pt").rename(saved)  # whole or absent, should a run stop while writing it
    read = torch.load(saved, weights_only=False)  # written by this run, just above: not an untrusted file
    model = read["model"]
    if attn_implementation:
        model.set_attn_implementation(attn_implementation)
    return model.eval(), read["tokenizer"]
