"""manyheads.models.bert: equal to transformers' BertModel on the offline model, and per-head gates, gradients,
zero and mean ablation, and pruning behaving as chapters 4 and 5 need."""

import copy
import json

import pytest
import torch

from manyheads.models.bert import BertEncoder
from manyheads.models.bert import load_encoder as load
from manyheads.models.checkpoints import read_state_dict

TOLERANCE = 1e-4

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
    return {
        "single": tokenizer(SENTENCES),
        "pairs": tokenizer([a for a, _ in PAIRS], pairs=[b for _, b in PAIRS]),
    }


def _max_errors(ours, theirs, attention_mask):
    """Max |difference| of last hidden states, all hidden states and all attention weights, at real tokens only
    (padded query rows are meaningless in both models)."""
    real = attention_mask.bool()
    hidden = max((a - b)[real].abs().max().item() for a, b in zip(ours.hidden_states, theirs.hidden_states))
    last = (ours.last_hidden_state - theirs.last_hidden_state)[real].abs().max().item()
    attention = max(
        (a - b).transpose(1, 2)[real].abs().max().item() for a, b in zip(ours.attentions, theirs.attentions)
    )
    return last, hidden, attention


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
    last, hidden, attention = _max_errors(ours, theirs, batch.attention_mask)
    assert last < TOLERANCE and hidden < TOLERANCE and attention < TOLERANCE, (last, hidden, attention)


def test_padding_does_not_change_real_tokens(model, tokenizer):
    batch = tokenizer(SENTENCES[:4])
    with torch.no_grad():
        together = model(batch)
        for row, sentence in enumerate(SENTENCES[:4]):
            alone = model(tokenizer(sentence))
            n = batch.lengths[row]
            assert torch.allclose(together.last_hidden_state[row, :n], alone.last_hidden_state[0], atol=1e-5)
            assert torch.allclose(together.attentions[3][row, :, :n, :n], alone.attentions[3][0], atol=1e-6)
            assert together.attentions[3][row, :, :n, n:].eq(0).all()  # no attention to padding


def _tanh_gelu(model):
    for layer in model.layers:
        layer.approximate = "tanh"


def _layer_norm_eps(model):
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = 1e-5


# Known bugs, each introduced on purpose: the equivalence check above must notice every one of them.
MUTATIONS = {
    "tanh GELU instead of erf": (_tanh_gelu, {}),
    "LayerNorm eps 1e-5 instead of 1e-12": (_layer_norm_eps, {}),
}


@pytest.mark.parametrize("bug", list(MUTATIONS))
def test_equivalence_check_catches_model_bugs(model, reference, batches, bug):
    mutate, _ = MUTATIONS[bug]
    broken = copy.deepcopy(model)
    mutate(broken)
    last, hidden, attention = _max_errors(*_run_both(broken, reference, batches["pairs"]), batches["pairs"].attention_mask)
    assert max(last, hidden, attention) > TOLERANCE, bug


@pytest.mark.parametrize("bug", ["token types ignored", "padding mask inverted", "padding ignored"])
def test_equivalence_check_catches_input_bugs(model, reference, batches, bug):
    batch = batches["pairs"]
    mask = batch.attention_mask
    wrong = {
        "token types ignored": {"token_type_ids": torch.zeros_like(batch.token_type_ids)},
        "padding mask inverted": {"attention_mask": 1 - mask},
        "padding ignored": {"attention_mask": torch.ones_like(mask)},
    }[bug]
    last, hidden, attention = _max_errors(*_run_both(model, reference, batch, **wrong), mask)
    assert max(last, hidden, attention) > TOLERANCE, bug


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


# ------------------------------------------------------------------------------------------- gates
LOSS_DIRECTION = torch.Generator().manual_seed(0)


def _loss(output):
    """A scalar that depends on every position: a fixed random projection of the hidden states."""
    direction = torch.linspace(-1, 1, output.last_hidden_state.shape[-1], dtype=output.last_hidden_state.dtype)
    return (output.last_hidden_state * direction).sum()


def test_gate_zero_equals_zeroing_W_o_input_slice(model, batches):
    layer, head, d = 2, 5, model.config.d_head
    batch = batches["pairs"]
    edited = copy.deepcopy(model)
    with torch.no_grad():
        edited.layers[layer].attention.W_o.weight[:, head * d : (head + 1) * d] = 0
        expected = edited(batch)
        gates = torch.ones(6, 12)
        gates[layer, head] = 0
        with model.gated(gates):
            gated = model(batch)
        with model.ablated((layer, head), mode="zero"):
            ablated = model(batch)
        original = model(batch)
    torch.testing.assert_close(gated.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-6)
    torch.testing.assert_close(ablated.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-6)
    # The head still attends (its weights are unchanged); only its contribution is removed.
    torch.testing.assert_close(gated.attentions[layer], original.attentions[layer])
    assert (gated.last_hidden_state - original.last_hidden_state).abs().max() > 1e-3
    assert model.head_gates.eq(1).all()


def test_gates_are_per_layer_and_restored(model, tokenizer):
    batch = tokenizer("Gates belong to one layer each.")
    with torch.no_grad():
        original = model(batch)
        with pytest.raises(RuntimeError, match="boom"), model.gated(torch.zeros(6, 12)):
            raise RuntimeError("boom")
        assert model.head_gates.eq(1).all()
        gates = torch.ones(6, 12)
        gates[5] = 0  # the last layer only: earlier layers' outputs must not change
        with model.gated(gates):
            out = model(batch, output_hidden_states=True)
        assert torch.equal(model(batch).last_hidden_state, original.last_hidden_state)
    with pytest.raises(ValueError, match="shape"):
        with model.gated(torch.ones(12, 6)):
            pass
    full = model(batch, output_hidden_states=True)
    for i in range(5):
        assert torch.equal(out.hidden_states[i + 1], full.hidden_states[i + 1])
    assert not torch.equal(out.hidden_states[6], full.hidden_states[6])


def test_gate_gradients_match_finite_differences(model, tokenizer):
    batch = tokenizer(["Gradients of the gates.", "A second, shorter one"])
    grad = model.gate_gradients(_loss, batch)
    assert grad.shape == (6, 12) and grad.abs().gt(0).all()
    assert all(p.grad is None for p in model.parameters())
    # Central differences in float64, for two heads.
    double = copy.deepcopy(model).double()
    exact = double.gate_gradients(_loss, batch)
    torch.testing.assert_close(exact.float(), grad, rtol=1e-3, atol=1e-3)
    for layer, head in [(0, 0), (4, 7)]:
        step = torch.zeros(6, 12, dtype=torch.float64)
        step[layer, head] = 1e-5
        with torch.no_grad():
            with double.gated(1 + step):
                up = _loss(double(batch))
            with double.gated(1 - step):
                down = _loss(double(batch))
        estimate = ((up - down) / 2e-5).item()
        assert exact[layer, head].item() == pytest.approx(estimate, rel=1e-6, abs=1e-6)
    # The do-it-yourself way gives the same numbers.
    double.head_gates.requires_grad_(True)
    _loss(double(batch)).backward()
    torch.testing.assert_close(double.head_gates.grad, exact)


def test_mean_ablation(model, tokenizer, batches):
    reference = batches["single"]
    batch = tokenizer(["Mean ablation keeps the average.", "It removes what depends on the input."])
    heads = [(1, 3), (1, 4), (4, 0)]
    with torch.no_grad():
        means = model.head_output_means(reference)
        assert means.shape == (6, 12, 32)
        original = model(batch).last_hidden_state
        with model.ablated(heads, mode="mean", reference=reference):
            from_batch = model(batch).last_hidden_state
        with model.ablated(heads, mode="mean", reference=means):
            from_means = model(batch).last_hidden_state
        with model.ablated(heads, mode="mean", reference=reference.inputs()):
            from_dict = model(batch).last_hidden_state
        with model.ablated(heads, mode="zero"):
            zeroed = model(batch).last_hidden_state
        with model.ablated(heads, mode="mean", reference=torch.zeros_like(means)):
            mean_zero = model(batch).last_hidden_state
        restored = model(batch).last_hidden_state
    assert torch.equal(from_batch, from_means) and torch.equal(from_batch, from_dict)
    assert (from_batch - original).abs().max() > 1e-3
    assert (from_batch - zeroed).abs().max() > 1e-3  # mean and zero ablation differ...
    torch.testing.assert_close(mean_zero, zeroed, rtol=0, atol=1e-6)  # ...unless the means are 0
    assert torch.equal(restored, original)
    assert not model.layers[1].attention.W_o._forward_pre_hooks


def test_mean_ablation_writes_the_means_into_W_o_input(model, tokenizer):
    batch = tokenizer("Check the replaced features.")
    means = torch.randn(6, 12, 32)
    seen = {}
    with torch.no_grad(), model.ablated((3, 9), mode="mean", reference=means):
        # Registered after the ablation's own hook, so it sees what W_o receives.
        hook = model.layers[3].attention.W_o.register_forward_pre_hook(lambda _, inputs: seen.setdefault("x", inputs[0]))
        try:
            model(batch)
        finally:
            hook.remove()
    features = seen["x"][0].reshape(-1, 12, 32)  # (seq, n_heads, d_head)
    assert torch.equal(features[:, 9], means[3, 9].expand_as(features[:, 9]))


def test_head_output_means_ignore_padding(model, tokenizer):
    sentences = ["A short one.", "A much longer sentence with many more tokens in it.", "Mid length here."]
    batch = tokenizer(sentences)
    together = model.head_output_means(batch)
    weighted = sum(n * model.head_output_means(tokenizer(s)) for s, n in zip(sentences, batch.lengths))
    torch.testing.assert_close(together, weighted / sum(batch.lengths), rtol=0, atol=1e-5)


def test_ablation_arguments(model):
    with pytest.raises(ValueError, match="mode"):
        with model.ablated((0, 0), mode="random"):
            pass
    with pytest.raises(ValueError, match="reference"):
        with model.ablated((0, 0), mode="mean"):
            pass
    with pytest.raises(IndexError, match="out of range"):
        with model.ablated((6, 0)):
            pass
    mask = torch.zeros(6, 12, dtype=torch.bool)
    mask[2, 3] = True
    with model.ablated(mask):
        assert model.head_gates[2, 3] == 0 and model.head_gates.sum() == 71


# ------------------------------------------------------------------------------------------- pruning
def test_pruned_equals_gated_to_zero(model, batches):
    batch = batches["pairs"]
    remove = [(0, 1), (0, 11), (3, 0), (3, 1), (3, 2), (5, 6)]
    small = model.pruned(remove)
    assert small.layers[0].attention.n_heads == 10 and small.layers[3].attention.n_heads == 9
    assert small.layers[0].attention.W_q.weight.shape == (320, 384)
    assert small.layers[0].attention.W_o.weight.shape == (384, 320)
    assert model.layers[0].attention.n_heads == 12  # the original is untouched
    gates = torch.ones(6, 12)
    for layer, head in remove:
        gates[layer, head] = 0
    with torch.no_grad(), model.gated(gates):
        expected = model(batch)
    with torch.no_grad():
        got = small(batch)
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=0, atol=1e-5)
    kept = [h for h in range(12) if (3, h) not in remove]
    torch.testing.assert_close(got.attentions[3], expected.attentions[3][:, kept], rtol=0, atol=1e-6)
    # Original head numbering survives pruning: gating or ablating head 3.5 means the same head in both models.
    with torch.no_grad(), small.ablated((3, 5)), model.gated(gates.index_put((torch.tensor(3), torch.tensor(5)), torch.tensor(0.0))):
        torch.testing.assert_close(small(batch).last_hidden_state, model(batch).last_hidden_state, rtol=0, atol=1e-5)
    assert small.gate_gradients(_loss, batch)[3, 0] == 0  # a removed head has no effect
    twice = small.pruned([(3, 5)])
    assert twice.kept_heads[3] == [h for h in kept if h != 5]
    with pytest.raises(ValueError, match="every head"):
        model.pruned([(2, h) for h in range(12)])
    with pytest.raises(ValueError, match="pruned"):
        with small.ablated((0, 1)):
            pass


def test_pruned_mean_ablation_matches_unpruned(model, tokenizer, batches):
    batch = tokenizer("Mean ablation on a pruned model.")
    small = model.pruned([(2, 0), (2, 7)])
    means = model.head_output_means(batches["single"])
    small_means = small.head_output_means(batches["single"])
    assert small_means[2, 0].eq(0).all()
    with torch.no_grad(), small.ablated((2, 4), "mean", reference=means), model.ablated((2, 4), "mean", reference=means):
        gates = torch.ones(6, 12)
        gates[2, 0] = gates[2, 7] = 0
        with model.gated(gates):
            expected = model(batch).last_hidden_state
        torch.testing.assert_close(small(batch).last_hidden_state, expected, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------------- other checkpoints
def _tiny_checkpoint(directory, bundled, hidden_act):
    """A random 2-layer BERT saved as BertForMaskedLM does: 'bert.' prefix, cls.* head, pytorch_model.bin."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=30522, hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=80,
        hidden_act=hidden_act, max_position_embeddings=64, attn_implementation="eager",
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
    last, hidden, attention = _max_errors(*_run_both(encoder, reference, batch), batch.attention_mask)
    assert max(last, hidden, attention) < TOLERANCE


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
        BertConfig.from_hf({"hidden_act": "relu", "vocab_size": 1, "hidden_size": 1, "num_hidden_layers": 1,
                            "num_attention_heads": 1, "intermediate_size": 1})


def _hf_names_of(model):
    from manyheads.models.checkpoints import model_dir

    return read_state_dict(model_dir())
