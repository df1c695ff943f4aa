"""manyheads.models.bert: equal to transformers' BertModel on the offline model, with padding, segments and other
BERT checkpoints. Gates, ablation and head removal on this encoder are tested in test_interventions.py."""

import copy
import json

import pytest
import torch
from helpers.tolerances import float32_tolerance

from manyheads.models.bert import BertEncoder
from manyheads.models.bert import load_encoder as load
from manyheads.models.checkpoints import read_state_dict

SENTENCES = [
    "The cat sat on the mat.",
    "Hello, world!",
    "a",
    "The keys to the cabinet are on the table.",
    "She said: \"I'll be there at 7:30 p.m., won't I?\"",
    "In 1969, 3 astronauts flew 384,400 km to the Moon.",
    "Pi is approximately 3.14159; e is about 2.71828.",
    "Colorless green ideas sleep furiously.",
    "The zxqvbn flibbertigibbet glorped the snorkmaiden.",
    "Ünïcödé àccents, naïve café, and 中文 characters 🙂.",
    "Time flies like an arrow; fruit flies like a banana.",
    "The old man the boats.",
    "When Mary met John, she gave him her book because he had asked for it.",
    "Wait... what?!",
    "e-mail me at someone@example.com or visit https://example.org/page?id=42",
    "The quick brown fox jumps over the lazy dog " * 6 + "and then the story ends after a long, long walk.",
    "Despite the rain, which had been falling since the early hours of Tuesday morning, the marathon went ahead.",
    "$100 + 20% = $120",
    "Tokenization splits unbelievably uncommon words into pieces.",
    "He didn't know whether she'd already left.",
    "(parentheses) [brackets] {braces} <angles>",
    "I",
]
PAIRS = [
    ("How old are you?", "I am six years old."),
    ("The trophy doesn't fit in the suitcase.", "It is too big."),
    ("Short.", "A considerably longer second segment, with commas, numbers like 12 and 13, and more words."),
]


@pytest.fixture(scope="module")
def loaded():
    return load()


@pytest.fixture(scope="module")
def model(loaded):
    return loaded[0]


@pytest.fixture(scope="module")
def tokenizer(loaded):
    return loaded[1]


@pytest.fixture(scope="module")
def reference():
    from transformers import BertModel

    from manyheads.models.checkpoints import model_dir

    return BertModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def batches(tokenizer):
    return {"single": tokenizer(SENTENCES), "pairs": tokenizer([a for a, _ in PAIRS], pairs=[b for _, b in PAIRS])}


def _max_errors(ours, theirs, attention_mask, config):
    """Max |difference| of last hidden states, all hidden states and all attention weights, at real tokens only
    (padded query rows are meaningless in both models), each in float32 tolerances (tests/helpers/tolerances.py: the
    model's depth and d_ff, the reference's magnitude; MiniLM: ~5e-4 for hidden states, ~5e-5 for weights): below 1
    is equal."""
    real = attention_mask.bool()
    depth, width = config.n_layers, config.d_ff
    hidden = max((a - b)[real].abs().max().item() for a, b in zip(ours.hidden_states, theirs.hidden_states))
    last = (ours.last_hidden_state - theirs.last_hidden_state)[real].abs().max().item()
    attention = max(
        (a - b).transpose(1, 2)[real].abs().max().item() for a, b in zip(ours.attentions, theirs.attentions)
    )
    tolerances = [
        float32_tolerance(theirs.last_hidden_state[real], depth=depth, width=width),
        float32_tolerance([h[real] for h in theirs.hidden_states], depth=depth, width=width),
        float32_tolerance(theirs.attentions, depth=depth, width=width),
    ]
    return tuple(error / tolerance for error, tolerance in zip((last, hidden, attention), tolerances))


def _run_both(model, reference, batch, **ours_kwargs):
    with torch.no_grad():
        ours = model(**{**batch.inputs(), **ours_kwargs}, output_hidden_states=True)
        theirs = reference(**batch.inputs(), output_attentions=True, output_hidden_states=True)
    return ours, theirs


@pytest.mark.parametrize("kind", ["single", "pairs"])
def test_matches_transformers_bert(model, reference, batches, kind):
    batch = batches[kind]
    assert len(set(batch.lengths)) > 1, "the batch must contain padding"
    ours, theirs = _run_both(model, reference, batch)
    assert len(ours.attentions) == 6 and ours.attentions[0].shape == (len(batch), 12, *batch.input_ids.shape[1:] * 2)
    assert len(ours.hidden_states) == 7
    last, hidden, attention = _max_errors(ours, theirs, batch.attention_mask, model.config)
    assert last < 1 and hidden < 1 and attention < 1, (last, hidden, attention)


def test_padding_does_not_change_real_tokens(model, tokenizer):
    batch = tokenizer(SENTENCES[:4])
    with torch.no_grad():
        together = model(batch)
        for row, sentence in enumerate(SENTENCES[:4]):
            alone = model(tokenizer(sentence))
            n = batch.lengths[row]
            expected, weights = alone.last_hidden_state[0], alone.attentions[3][0]  # weights after layer 4 of 6
            tolerance = float32_tolerance(expected, depth=6, width=model.config.d_ff)
            torch.testing.assert_close(together.last_hidden_state[row, :n], expected, rtol=0, atol=tolerance)
            tolerance = float32_tolerance(weights, depth=4, width=model.config.d_ff)
            torch.testing.assert_close(together.attentions[3][row, :, :n, :n], weights, rtol=0, atol=tolerance)
            assert together.attentions[3][row, :, :n, n:].eq(0).all()  # no attention to padding


def _tanh_gelu(model):
    for layer in model.layers:
        layer.approximate = "tanh"


def _layer_norm_eps(model):
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = 1e-5


# Known bugs, each introduced on purpose: the equivalence check above must notice every one of them.
MUTATIONS = {"tanh GELU instead of erf": (_tanh_gelu, {}), "LayerNorm eps 1e-5 instead of 1e-12": (_layer_norm_eps, {})}


@pytest.mark.parametrize("bug", list(MUTATIONS))
def test_equivalence_check_catches_model_bugs(model, reference, batches, bug):
    mutate, _ = MUTATIONS[bug]
    broken = copy.deepcopy(model)
    mutate(broken)
    batch = batches["pairs"]
    last, hidden, attention = _max_errors(*_run_both(broken, reference, batch), batch.attention_mask, model.config)
    assert max(last, hidden, attention) > 10, bug  # both ~60 tolerances in the attention weights (~3e-3)


@pytest.mark.parametrize("bug", ["token types ignored", "padding mask inverted", "padding ignored"])
def test_equivalence_check_catches_input_bugs(model, reference, batches, bug):
    batch = batches["pairs"]
    mask = batch.attention_mask
    wrong = {
        "token types ignored": {"token_type_ids": torch.zeros_like(batch.token_type_ids)},
        "padding mask inverted": {"attention_mask": 1 - mask},
        "padding ignored": {"attention_mask": torch.ones_like(mask)},
    }[bug]
    last, hidden, attention = _max_errors(*_run_both(model, reference, batch, **wrong), mask, model.config)
    assert max(last, hidden, attention) > 100, bug  # 7,000 tolerances and more


def test_bool_mask_and_defaults(model, tokenizer):
    batch = tokenizer(["One sentence here", "Two"])
    with torch.no_grad():
        as_ints = model(**batch.inputs()).last_hidden_state
        as_bool = model(batch.input_ids, batch.attention_mask.bool(), batch.token_type_ids).last_hidden_state
        assert torch.equal(as_ints, as_bool)
        one = tokenizer("Nothing padded")
        assert torch.equal(model(one.input_ids).last_hidden_state, model(one).last_hidden_state)
    assert model(one).hidden_states is None
    assert model(one).stacked_attentions().shape == (6, 1, 12, len(one.tokens[0]), len(one.tokens[0]))


# ------------------------------------------------------------------------------- other checkpoints
def _tiny_checkpoint(directory, bundled, hidden_act):
    """A random 2-layer BERT saved as BertForMaskedLM does: 'bert.' prefix, cls.* head, pytorch_model.bin."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=30522,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=80,
        hidden_act=hidden_act,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    full = BertForMaskedLM(config).eval()
    with torch.no_grad():
        for p in full.parameters():  # bigger than the default init, so that every component matters
            p.add_(torch.randn_like(p) * 0.1)
    torch.save(full.state_dict(), directory / "pytorch_model.bin")
    (directory / "config.json").write_text(json.dumps(config.to_dict()))
    (directory / "vocab.txt").symlink_to(bundled / "vocab.txt")
    return full.bert


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_local_bert_checkpoint_with_prefix_and_bin(tmp_path, hidden_act):
    from manyheads.models.checkpoints import model_dir

    reference = _tiny_checkpoint(tmp_path, model_dir(), hidden_act)
    assert any(k.startswith("bert.") for k in read_state_dict(tmp_path))
    encoder, tokenizer = load(tmp_path)
    assert encoder.config.n_heads == 3 and encoder.config.d_head == 16
    batch = tokenizer(["A tiny random model.", "Two"], pairs=["Segment B", "and more text here"])
    last, hidden, attention = _max_errors(*_run_both(encoder, reference, batch), batch.attention_mask, encoder.config)
    assert max(last, hidden, attention) < 1


def test_loading_rejects_wrong_checkpoints(model):
    state = {"bert." + k: v for k, v in _hf_names_of(model).items()}
    fresh = BertEncoder(model.config)
    fresh.load_hf_state_dict(state)  # the prefixed form loads
    del state["bert.encoder.layer.2.output.LayerNorm.weight"]
    with pytest.raises(KeyError, match="lacks 1 weights"):
        fresh.load_hf_state_dict(state)
    with pytest.raises(ValueError, match="shape"):
        fresh.load_hf_state_dict({**_hf_names_of(model), "embeddings.word_embeddings.weight": torch.zeros(3, 384)})
    from manyheads.models.bert import BertConfig

    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig.from_hf(
            {
                "hidden_act": "relu",
                "vocab_size": 1,
                "hidden_size": 1,
                "num_hidden_layers": 1,
                "num_attention_heads": 1,
                "intermediate_size": 1,
            }
        )


def _hf_names_of(model):
    from manyheads.models.checkpoints import model_dir

    return read_state_dict(model_dir())
