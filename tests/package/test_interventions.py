"""manyheads.interventions on every kind of course model: the toy TinyAttentionModel (one layer) and the MiniLM
encoder (6 layers × 12 heads). Zero ablation is a gate at 0, removing heads equals masking them, mean ablation,
gate gradients equal finite differences, and every context manager leaves the model exactly as it found it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from helpers.tolerances import float32_tolerance

from manyheads import interventions as iv
from manyheads.attention import MultiHeadAttention
from manyheads.models import TinyAttentionModel, count_parameters, load_encoder

SENTENCES = [  # the encoder's reference batch for mean ablation
    "The cat sat on the mat.",
    "When Mary met John, she gave him her book because he had asked for it.",
    "Hello, world!",
    "Time flies like an arrow; fruit flies like a banana.",
]


@dataclass
class Case:
    """One model with what the tests need to run it: inputs, the output to compare and heads to intervene on."""

    model: torch.nn.Module
    batch: object  # what model(batch) takes
    reference: object  # a larger batch to average head outputs over
    output: Callable  # model output → the tensor to compare
    heads: list  # (layer, head) pairs, at least one layer losing two heads
    n_layers: int
    n_heads: int
    width: int  # the longest sum in a layer (tests/helpers/tolerances.py)

    def tolerance(self, reference) -> float:
        """How far a float32 output computed another way may be from ``reference``."""
        return float32_tolerance(reference, depth=self.n_layers, width=self.width)

    def run(self, model=None):
        with torch.no_grad():
            return self.output((model or self.model)(self.batch))

    def loss(self, output):
        """A scalar depending on every position: a fixed projection of the output's last axis."""
        out = self.output(output)
        return (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).sum()

    def gates_without(self, heads, dtype=torch.float32):
        gates = torch.ones(self.n_layers, self.n_heads, dtype=dtype)
        for layer, head in heads:
            gates[layer, head] = 0
        return gates


@pytest.fixture(scope="module")
def encoder_and_tokenizer():
    return load_encoder()


def _tiny_case():
    torch.manual_seed(0)
    model = TinyAttentionModel(vocab_size=8, seq_len=6, d_model=16, n_heads=4).eval()
    generator = torch.Generator().manual_seed(1)
    return Case(
        model,
        torch.randint(0, 8, (3, 6), generator=generator),
        torch.randint(0, 8, (16, 6), generator=generator),
        lambda out: out[0],
        [(0, 1), (0, 3)],
        1,
        4,
        16,
    )


def _encoder_case(encoder_and_tokenizer):
    model, tokenizer = encoder_and_tokenizer
    batch = tokenizer(["Heads can be removed.", "A longer second sentence, so that the first one is padded."])
    assert len(set(batch.lengths)) > 1
    return Case(
        model,
        batch,
        tokenizer(SENTENCES),
        lambda out: out.last_hidden_state,
        [(0, 1), (0, 11), (3, 0), (3, 1), (3, 2), (5, 6)],
        6,
        12,
        model.config.d_ff,
    )


@pytest.fixture(params=["tiny", "encoder"])
def case(request):
    if request.param == "tiny":
        return _tiny_case()
    return _encoder_case(request.getfixturevalue("encoder_and_tokenizer"))


def _untouched(model, gates_before):
    """The model carries no intervention: gates as before, no hooks, no autograd graph in a buffer."""
    layers = iv.attention_layers(model)
    for layer, gates in zip(layers, gates_before):
        assert layer.head_gates is gates
        assert layer.head_gates.grad_fn is None and not layer.head_gates.requires_grad
        assert not layer._forward_pre_hooks and not layer.W_o._forward_pre_hooks
    assert iv.current_gates(model).eq(1).all()


# --------------------------------------------------------------------------------------------- both models
def test_attention_layers_and_head_selections(case):
    layers = iv.attention_layers(case.model)
    if isinstance(case.model, TinyAttentionModel):
        assert layers == [case.model.attention]
    else:
        assert layers == [layer.attention for layer in case.model.layers]
    assert iv.kept_heads(case.model) == [tuple(range(case.n_heads))] * case.n_layers
    mask = iv.head_mask(case.model, case.heads)
    assert mask.shape == (case.n_layers, case.n_heads) and mask.sum() == len(case.heads)
    assert torch.equal(iv.head_mask(case.model, mask), mask)  # a mask is a selection too
    assert torch.equal(iv.head_mask(case.model, iter(case.heads[::-1] * 2)), mask)  # order and repeats do not matter
    assert iv.head_mask(case.model, case.heads[0]).sum() == 1  # one pair
    assert iv.head_mask(case.model, []).sum() == 0


def test_zero_ablation_equals_gates_at_zero(case):
    original = case.run()
    with iv.gated(case.model, case.gates_without(case.heads)):
        gated = case.run()
    with iv.ablated(case.model, case.heads, mode="zero"):
        assert torch.equal(iv.current_gates(case.model), case.gates_without(case.heads))
        ablated = case.run()
    torch.testing.assert_close(ablated, gated, rtol=0, atol=case.tolerance(gated))
    assert (ablated - original).abs().max() > 1e-3
    # Gate 0 is the same as zeroing the head's columns of W_o: the head still attends, but adds nothing.
    edited = copy.deepcopy(case.model)
    for layer, head in case.heads:
        attention = iv.attention_layers(edited)[layer]
        with torch.no_grad():
            attention.W_o.weight[:, head * attention.d_head : (head + 1) * attention.d_head] = 0
    torch.testing.assert_close(case.run(edited), ablated, rtol=0, atol=case.tolerance(ablated))


def test_removing_heads_equals_masking_them(case):
    small = iv.remove_heads(case.model, case.heads)
    layers, small_layers = iv.attention_layers(case.model), iv.attention_layers(small)
    assert all(layer.n_heads == case.n_heads for layer in layers)  # the original is untouched
    removed_from = {layer for layer, _ in case.heads}
    d_model, d_head = layers[0].d_model, layers[0].d_head
    for i, layer in enumerate(small_layers):
        n = case.n_heads - sum(1 for where, _ in case.heads if where == i)
        assert layer.n_heads == n
        assert layer.W_q.weight.shape == layer.W_k.weight.shape == layer.W_v.weight.shape == (n * d_head, d_model)
        assert layer.W_q.bias.shape == (n * d_head,) and layer.W_o.weight.shape == (d_model, n * d_head)
        assert layer.head_gates.shape == (n,)
        assert iv.kept_heads(small)[i] == tuple(h for h in range(case.n_heads) if (i, h) not in case.heads)
    per_head = 3 * (d_model * d_head + d_head) + d_model * d_head  # W_q, W_k, W_v rows with biases, W_o columns
    assert count_parameters(case.model) - count_parameters(small) == len(case.heads) * per_head
    with iv.gated(case.model, case.gates_without(case.heads)), torch.no_grad():
        expected = case.model(case.batch)
    with torch.no_grad():
        got = small(case.batch)
    expected_output = case.output(expected)
    torch.testing.assert_close(case.output(got), expected_output, rtol=0, atol=case.tolerance(expected_output))
    # The removed copy keeps the original numbering: head (layer, h) is the same head in both models.
    layer = max(removed_from)
    kept = iv.kept_heads(small)[layer]
    weights_small = got[1] if isinstance(got, tuple) else got.attentions[layer]
    weights_full = expected[1] if isinstance(expected, tuple) else expected.attentions[layer]
    tolerance = case.tolerance(weights_full)
    torch.testing.assert_close(weights_small, weights_full[:, list(kept)], rtol=0, atol=tolerance)
    other = (layer, kept[-1])
    with iv.ablated(small, other), iv.gated(case.model, case.gates_without([*case.heads, other])):
        expected_output = case.run()
        torch.testing.assert_close(case.run(small), expected_output, rtol=0, atol=case.tolerance(expected_output))
    assert iv.current_gates(small)[layer, case.heads[-1][1]] == 0  # a removed head reads as gate 0
    assert iv.gate_gradients(small, case.loss, case.batch)[case.heads[0]] == 0  # ... and has no effect
    twice = iv.remove_heads(small, [other])
    assert iv.kept_heads(twice)[layer] == kept[:-1]
    with pytest.raises(ValueError, match=r"already removed"):
        iv.remove_heads(small, case.heads[0])


def test_mean_ablation(case):
    means = iv.head_output_means(case.model, case.reference)
    d_head = iv.attention_layers(case.model)[0].d_head
    assert means.shape == (case.n_layers, case.n_heads, d_head)
    original = case.run()
    with iv.ablated(case.model, case.heads, mode="mean", reference=case.reference):
        from_batch = case.run()
    with iv.ablated(case.model, case.heads, mode="mean", means=means):
        from_means = case.run()
    with iv.ablated(case.model, case.heads, mode="zero"):
        zeroed = case.run()
    with iv.ablated(case.model, case.heads, mode="mean", means=torch.zeros_like(means)):
        mean_zero = case.run()
    assert torch.equal(from_batch, from_means)
    assert (from_batch - original).abs().max() > 1e-3
    assert (from_batch - zeroed).abs().max() > 1e-3  # mean and zero ablation differ...
    torch.testing.assert_close(mean_zero, zeroed, rtol=0, atol=case.tolerance(zeroed))  # ...unless the means are 0
    assert torch.equal(case.run(), original)
    _untouched(case.model, [layer.head_gates for layer in iv.attention_layers(case.model)])


def test_mean_ablation_writes_the_means_into_W_o_input(case):
    layer, head = case.heads[-1]
    attention = iv.attention_layers(case.model)[layer]
    means = torch.randn(case.n_layers, case.n_heads, attention.d_head)
    seen = {}
    with iv.ablated(case.model, (layer, head), mode="mean", means=means):
        # Registered after the ablation's own hook, so it sees what W_o receives.
        hook = attention.W_o.register_forward_pre_hook(lambda _, inputs: seen.setdefault("x", inputs[0]))
        try:
            case.run()
        finally:
            hook.remove()
    features = seen["x"].reshape(-1, case.n_heads, attention.d_head)  # (batch·seq, n_heads, d_head)
    assert torch.equal(features[:, head], means[layer, head].expand_as(features[:, head]))


def test_gate_gradients_equal_finite_differences_and_a_manual_gated_call(case):
    grad = iv.gate_gradients(case.model, case.loss, case.batch)
    assert grad.shape == (case.n_layers, case.n_heads) and grad.abs().gt(0).all()
    assert all(p.grad is None for p in case.model.parameters())
    _untouched(case.model, [layer.head_gates for layer in iv.attention_layers(case.model)])
    # The do-it-yourself way gives the same numbers, through one forward inside gated().
    gates = torch.ones(case.n_layers, case.n_heads, requires_grad=True)
    with iv.gated(case.model, gates):
        (manual,) = torch.autograd.grad(case.loss(case.model(case.batch)), gates)
    torch.testing.assert_close(manual, grad, rtol=0, atol=0)
    # Central differences in float64, for two heads.
    double = copy.deepcopy(case.model).double()
    exact = iv.gate_gradients(double, case.loss, case.batch)
    assert exact.dtype == torch.float64
    torch.testing.assert_close(exact.float(), grad, rtol=1e-3, atol=1e-3)
    step = 1e-5
    for layer, head in [(0, 0), (case.n_layers - 1, case.n_heads - 1)]:
        nudge = torch.zeros(case.n_layers, case.n_heads, dtype=torch.float64)
        nudge[layer, head] = step
        with torch.no_grad():
            with iv.gated(double, 1 + nudge):
                up = case.loss(double(case.batch))
            with iv.gated(double, 1 - nudge):
                down = case.loss(double(case.batch))
        estimate = ((up - down) / (2 * step)).item()
        assert exact[layer, head].item() == pytest.approx(estimate, rel=1e-6, abs=1e-6)


def test_gradients_flow_through_every_forward_of_a_gated_block(case):
    """Each forward builds its own graph from the gates, also in a copy with removed heads."""
    small = iv.remove_heads(case.model, case.heads)
    gates = torch.ones(case.n_layers, case.n_heads, requires_grad=True)
    with iv.gated(small, gates):
        first = torch.autograd.grad(case.loss(small(case.batch)), gates)[0]
        second = torch.autograd.grad(case.loss(small(case.batch)), gates)[0]
    assert torch.equal(first, second) and first.abs().sum() > 0
    torch.testing.assert_close(first, iv.gate_gradients(small, case.loss, case.batch), rtol=0, atol=0)


def _interventions(case):
    means = iv.head_output_means(case.model, case.reference)
    return {
        "gated": lambda: iv.gated(case.model, case.gates_without(case.heads)),
        "gated, requiring grad": lambda: iv.gated(
            case.model, torch.rand(case.n_layers, case.n_heads, requires_grad=True)
        ),
        "zero ablation": lambda: iv.ablated(case.model, case.heads),
        "mean ablation": lambda: iv.ablated(case.model, case.heads, mode="mean", means=means),
        "mean ablation from a batch": lambda: iv.ablated(case.model, case.heads, "mean", reference=case.reference),
    }


def test_context_managers_restore_the_model_exactly(case):
    original = case.run()
    gates_before = [layer.head_gates for layer in iv.attention_layers(case.model)]
    for name, intervention in _interventions(case).items():
        with intervention() as model, torch.set_grad_enabled("grad" in name):
            assert model is case.model
            changed = case.output(model(case.batch))
        assert not torch.equal(changed, original), name
        assert torch.equal(case.run(), original), name
        _untouched(case.model, gates_before)
        with pytest.raises(RuntimeError, match="boom"), intervention():
            raise RuntimeError("boom")
        assert torch.equal(case.run(), original), name
        _untouched(case.model, gates_before)


# ------------------------------------------------------------------------------------------- the encoder
@pytest.fixture
def encoder_case(encoder_and_tokenizer):
    return _encoder_case(encoder_and_tokenizer)


def test_gates_are_per_layer(encoder_case):
    case = encoder_case
    gates = torch.ones(6, 12)
    gates[5] = 0  # the last layer only: earlier layers' outputs must not change
    with torch.no_grad():
        full = case.model(case.batch, output_hidden_states=True)
        with iv.gated(case.model, gates):
            out = case.model(case.batch, output_hidden_states=True)
    for i in range(1, 6):
        assert torch.equal(out.hidden_states[i], full.hidden_states[i])
    assert not torch.equal(out.hidden_states[6], full.hidden_states[6])


def test_head_output_means_ignore_padding(encoder_and_tokenizer):
    model, tokenizer = encoder_and_tokenizer
    sentences = ["A short one.", "A much longer sentence with many more tokens in it.", "Mid length here."]
    batch = tokenizer(sentences)
    together = iv.head_output_means(model, batch)
    weighted = sum(n * iv.head_output_means(model, tokenizer(s)) for s, n in zip(sentences, batch.lengths))
    tolerance = float32_tolerance(together, depth=model.config.n_layers, width=model.config.d_ff)
    torch.testing.assert_close(together, weighted / sum(batch.lengths), rtol=0, atol=tolerance)
    # The mask is found however it is passed: inside the batch, by keyword, or in its position.
    inputs = batch.inputs()
    torch.testing.assert_close(iv.head_output_means(model, **inputs), together, rtol=0, atol=0)
    positional = iv.head_output_means(model, inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"])
    torch.testing.assert_close(positional, together, rtol=0, atol=0)
    assert not torch.allclose(iv.head_output_means(model, inputs["input_ids"]), together, atol=1e-3)


def test_mean_ablation_of_a_removed_copy_matches_the_full_model(encoder_case):
    case = encoder_case
    small = iv.remove_heads(case.model, [(2, 0), (2, 7)])
    means = iv.head_output_means(case.model, case.reference)
    assert iv.head_output_means(small, case.reference)[2, 0].eq(0).all()  # a removed head's row
    gates = case.gates_without([(2, 0), (2, 7)])
    with iv.ablated(small, (2, 4), "mean", means=means), iv.ablated(case.model, (2, 4), "mean", means=means):
        with iv.gated(case.model, gates):
            expected = case.run()
        torch.testing.assert_close(case.run(small), expected, rtol=0, atol=case.tolerance(expected))


# ----------------------------------------------------------------------------------- any attention layer
@pytest.mark.parametrize("bias", [True, False])
def test_a_bare_layer_without_biases_and_with_a_wider_value(bias):
    """Removal also works on a layer used as a model, without biases, and with d_value ≠ d_head."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model=12, n_heads=3, d_head=5, d_value=7, bias=bias)
    x = torch.randn(2, 4, 12)
    small = iv.remove_heads(layer, (0, 1))
    assert iv.attention_layers(layer) == [layer] and iv.kept_heads(small) == [(0, 2)]
    assert small.W_q.weight.shape == (10, 12) and small.W_v.weight.shape == (14, 12)
    assert small.W_o.weight.shape == (12, 14) and (small.W_o.bias is None) == (not bias)
    with torch.no_grad(), iv.ablated(layer, (0, 1)):
        expected = layer(x)[0]
    torch.testing.assert_close(small(x)[0], expected, rtol=0, atol=float32_tolerance(expected, depth=1, width=12))
    means = iv.head_output_means(layer, x)
    assert means.shape == (1, 3, 7)
    with torch.no_grad():
        with iv.ablated(layer, (0, 2), "mean", means=means), iv.ablated(layer, (0, 1)):
            expected = layer(x)[0]
        with iv.ablated(small, (0, 2), "mean", means=means):
            tolerance = float32_tolerance(expected, depth=1, width=12)
            torch.testing.assert_close(small(x)[0], expected, rtol=0, atol=tolerance)


def test_removal_keeps_the_other_gates():
    torch.manual_seed(0)
    layer = MultiHeadAttention(d_model=8, n_heads=4)
    layer.head_gates = torch.tensor([0.5, 1.0, 2.0, 0.0])
    x = torch.randn(1, 3, 8)
    small = iv.remove_heads(layer, (0, 3))
    assert torch.equal(iv.current_gates(small), layer.head_gates[None])
    with torch.no_grad():
        expected = layer(x)[0]
        torch.testing.assert_close(small(x)[0], expected, rtol=0, atol=float32_tolerance(expected, depth=1, width=8))
    with iv.gated(layer, torch.ones(1, 4)), pytest.raises(RuntimeError, match="outside"):
        iv.remove_heads(layer, (0, 3))


# ------------------------------------------------------------------------------------------- bad input
def test_bad_gates_and_heads_say_what_is_wrong(case):
    n_layers, n_heads = case.n_layers, case.n_heads
    with pytest.raises(ValueError, match=rf"gates must have shape \({n_layers}, {n_heads}\).*got \({n_heads}, "):
        with iv.gated(case.model, torch.ones(n_heads, n_layers + 1)):
            pass
    with pytest.raises(IndexError, match=rf"head \({n_layers}, 0\) is out of range.*{n_layers} layers × {n_heads}"):
        iv.head_mask(case.model, (n_layers, 0))
    with pytest.raises(IndexError, match=rf"head \(0, {n_heads}\) is out of range"):
        with iv.ablated(case.model, [(0, 0), (0, n_heads)]):
            pass
    with pytest.raises(IndexError, match="out of range"):
        iv.remove_heads(case.model, (-1, 0))
    with pytest.raises(ValueError, match=r"head mask must have shape"):
        iv.head_mask(case.model, torch.zeros(n_layers + 1, n_heads, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool tensor"):
        iv.head_mask(case.model, torch.zeros(n_layers, n_heads))
    with pytest.raises(ValueError, match=r"\(layer, head\) pairs.*got 'a'"):
        iv.head_mask(case.model, ["a"])
    with pytest.raises(ValueError, match=r"would leave layer 0 with none; keep at least one head"):
        iv.remove_heads(case.model, [(0, h) for h in range(n_heads)])
    with pytest.raises(ValueError, match=r"mode must be one of \('zero', 'mean'\), got 'random'"):
        with iv.ablated(case.model, (0, 0), mode="random"):
            pass
    with pytest.raises(ValueError, match="exactly one of reference= .* and means="):
        with iv.ablated(case.model, (0, 0), mode="mean"):
            pass
    with pytest.raises(ValueError, match=r"means must have shape"):
        with iv.ablated(case.model, (0, 0), mode="mean", means=torch.zeros(n_layers, n_heads)):
            pass
    with pytest.raises(ValueError, match="zero ablation takes neither"):
        with iv.ablated(case.model, (0, 0), means=torch.zeros(n_layers, n_heads, 4)):
            pass
    small = iv.remove_heads(case.model, case.heads)
    with pytest.raises(ValueError, match=rf"head \({case.heads[0][0]}, {case.heads[0][1]}\) was already removed"):
        with iv.ablated(small, case.heads[0]):
            pass
    _untouched(case.model, [layer.head_gates for layer in iv.attention_layers(case.model)])


def test_a_model_without_attention_layers_is_refused():
    with pytest.raises(ValueError, match="Linear contains no manyheads.attention.MultiHeadAttention"):
        iv.attention_layers(torch.nn.Linear(2, 2))


def test_remove_heads_refuses_layers_with_shared_key_value_heads():
    model = torch.nn.ModuleList([MultiHeadAttention(24, 6, n_kv_heads=6), MultiHeadAttention(24, 6, n_kv_heads=2)])
    assert iv.kept_heads(iv.remove_heads(model, [(0, 1)]))[0] == (0, 2, 3, 4, 5)  # one K/V head per head: fine
    with pytest.raises(NotImplementedError, match=r"layer 1 shares each key/value head among 3 query heads"):
        iv.remove_heads(model, [(1, 0)])


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablated_each_equals_one_ablation_per_chunk(mode):
    case = _tiny_case()
    means = iv.head_output_means(case.model, case.reference) if mode == "mean" else None
    heads = [3, 0, 2]  # out of order, not all heads
    stacked = case.batch.repeat(len(heads), 1)
    gates = case.gates_without([(0, 1)])  # a head masked around the block stays masked in every chunk
    with torch.no_grad(), iv.gated(case.model, gates), iv.ablated_each(case.model, 0, heads, mode=mode, means=means):
        chunks = case.model(stacked)[0].chunk(len(heads))
    for head, got in zip(heads, chunks):
        with iv.gated(case.model, gates), iv.ablated(case.model, (0, head), mode=mode, means=means):
            expected = case.run()
        torch.testing.assert_close(got, expected, rtol=0, atol=case.tolerance(expected))
        assert (got - case.run()).abs().max() > 1e-3, "the ablation must change something"
    _untouched(case.model, [layer.head_gates for layer in iv.attention_layers(case.model)])


def test_ablated_each_says_what_is_wrong():
    case = _tiny_case()
    with pytest.raises(ValueError, match="equal chunks"), iv.ablated_each(case.model, 0, [0, 1]):
        case.model(case.batch)  # 3 rows are not 2 chunks
    for kwargs, message in [
        (dict(layer=1, heads=[0]), "layer must be"),
        (dict(layer=0, heads=[]), "non-empty"),
        (dict(layer=0, heads=[4]), "heads of layer 0"),
        (dict(layer=0, heads=[0], mode="half"), "mode must be"),
        (dict(layer=0, heads=[0], mode="mean"), "needs means"),
    ]:
        with pytest.raises(ValueError, match=message), iv.ablated_each(case.model, **kwargs):
            pass
    assert not iv.attention_layers(case.model)[0].W_o._forward_pre_hooks
