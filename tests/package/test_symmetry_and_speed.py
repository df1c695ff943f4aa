"""Chapter 5's identical-heads experiment (manyheads.analysis.symmetry), the removed-vs-masked speed measurement
(manyheads.analysis.speed) and the pruning explorer widget (manyheads.viz.widgets.pruning_explorer)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from helpers.tolerances import float32_tolerance  # noqa: E402
from torch import nn  # noqa: E402

from manyheads import interventions as iv  # noqa: E402
from manyheads.analysis import speed, symmetry  # noqa: E402
from manyheads.attention import MultiHeadAttention  # noqa: E402
from manyheads.data.tasks import TwoRelationTask  # noqa: E402
from manyheads.models import TinyAttentionModel, load_encoder  # noqa: E402
from manyheads.training import TrainConfig  # noqa: E402
from manyheads.viz import widgets as course_widgets  # noqa: E402

TASK = TwoRelationTask()


class TwoLayers(nn.Module):
    """Two attention layers, with and without biases, one with d_value ≠ d_head: every block layout at once."""

    def __init__(self) -> None:
        super().__init__()
        self.a = MultiHeadAttention(12, 3)
        self.b = MultiHeadAttention(12, 4, d_head=2, d_value=5, bias=False)

    def forward(self, x):
        y, _ = self.a(x)
        return self.b(y)


# ------------------------------------------------------------------------------------------------ symmetry


def test_make_heads_identical_copies_every_head_block_and_nothing_else():
    torch.manual_seed(0)
    model = TwoLayers()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    assert symmetry.head_spread(model) > 0.01
    assert symmetry.make_heads_identical(model, source=1) is model
    assert symmetry.head_spread(model) == 0.0
    # Head 1's weights are now everywhere (checked through the raw matrices, not through the helper's own views).
    a = model.a
    assert torch.equal(a.W_q.weight[0:4], before["a.W_q.weight"][4:8])
    assert torch.equal(a.W_k.bias[8:12], before["a.W_k.bias"][4:8])
    assert torch.equal(a.W_v.weight[0:4], before["a.W_v.weight"][4:8])
    assert torch.equal(a.W_o.weight[:, 8:12], before["a.W_o.weight"][:, 4:8])
    assert torch.equal(model.b.W_v.weight[15:20], before["b.W_v.weight"][5:10])
    assert torch.equal(model.b.W_o.weight[:, 0:5], before["b.W_o.weight"][:, 5:10])
    assert torch.equal(a.W_o.bias, before["a.W_o.bias"])  # W_o's bias belongs to no head
    # Identical heads compute identical outputs and attention weights.
    x = torch.randn(2, 5, 12)
    _, weights = model(x)
    assert torch.equal(weights[:, 0], weights[:, 3])
    with pytest.raises(IndexError, match="source head 3 is out of range"):
        symmetry.make_heads_identical(TwoLayers(), source=3)


@pytest.mark.parametrize(
    "where", ["W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight", "W_q.bias", "W_k.bias", "W_v.bias"]
)
def test_head_spread_sees_a_change_in_any_head_block(where):
    layer = symmetry.make_heads_identical(MultiHeadAttention(8, 4))
    with torch.no_grad():
        layer.W_o.bias += 1.0  # W_o's bias is not a head's weight: no spread
    assert symmetry.head_spread(layer) == 0.0
    with torch.no_grad():
        if where == "W_o.weight":
            layer.W_o.weight[3, 5] += 0.25  # column 5 is read by head 2
        else:
            layer.get_parameter(where)[5] += 0.25  # row 5 belongs to head 2
    assert symmetry.head_spread(layer) == pytest.approx(0.25)


def test_attention_spread_is_zero_only_for_identical_heads():
    torch.manual_seed(0)
    model = TinyAttentionModel.for_task(TASK, d_model=16, n_heads=4)
    tokens, _ = TASK.sample(8, torch.Generator().manual_seed(0))
    assert symmetry.attention_spread(model, tokens) > 1e-3
    symmetry.make_heads_identical(model)
    model.train()
    assert symmetry.attention_spread(model, tokens) == 0.0
    assert model.training  # restored


def test_rounding_tolerance_is_steps_times_epsilon_times_the_largest_weight():
    layer = MultiHeadAttention(8, 2)
    with torch.no_grad():
        layer.W_v.weight[0, 0] = -3.0
        for p in layer.parameters():
            p.clamp_(-3.0, 3.0)
    assert symmetry.rounding_tolerance(layer, 100) == pytest.approx(100 * 2.0**-23 * 3.0)
    assert symmetry.rounding_tolerance(layer, 100, torch.float64) == pytest.approx(100 * 2.0**-52 * 3.0)
    with pytest.raises(ValueError, match="steps must be non-negative"):
        symmetry.rounding_tolerance(layer, -1)


@pytest.fixture(scope="module")
def symmetry_runs():
    config = TrainConfig(steps=80, batch_size=16, eval_every=40, eval_size=128)
    return symmetry.symmetry_experiment(TASK, 16, (1, 2, 4), config, seeds=(0,), progress=False)


def test_identical_heads_stay_identical_under_adam_and_normal_heads_stay_apart(symmetry_runs):
    runs = {(r.n_heads, r.init): r for r in symmetry_runs}
    # A one-head model has no other head: only its normal run is made.
    assert sorted(runs) == [(1, "normal"), (2, "identical"), (2, "normal"), (2, "perturbed")] + [
        (4, "identical"),
        (4, "normal"),
        (4, "perturbed"),
    ]
    for n_heads in (2, 4):
        same, normal, perturbed = runs[n_heads, "identical"], runs[n_heads, "normal"], runs[n_heads, "perturbed"]
        assert len(same.spread) == 81 and len(normal.spread) == 81  # before each of the 80 steps, and after
        # The course's loop (Adam, no dropout) on a CPU: bit-for-bit identical heads at every step.
        assert same.max_spread == 0.0 and same.attention_spread == 0.0 and same.within_tolerance
        assert 0 < same.tolerance < 1e-3
        # The normal model's heads differ by far more than rounding could explain, and attend differently.
        assert normal.spread[0] > 1e3 * normal.tolerance and normal.spread[-1] > 1e3 * normal.tolerance
        assert normal.attention_spread > 0.05 and not normal.within_tolerance
        # A difference of about one rounding error grows: identical heads are an unstable fixed point.
        assert 0 < perturbed.spread[0] < 3e-7  # noise in [-1e-7, 1e-7] on each head, plus float32 rounding
        assert perturbed.spread[-1] > 1e3 * perturbed.spread[0]
        assert all(0.0 <= a <= 1.0 for a in same.accuracy + normal.accuracy)
    assert runs[1, "normal"].max_spread == 0.0  # nothing to differ from


def test_symmetry_experiment_is_seeded_and_checks_its_arguments(symmetry_runs):
    config = TrainConfig(steps=80, batch_size=16, eval_every=40, eval_size=128)
    again = symmetry.symmetry_experiment(TASK, 16, (2,), config, seeds=(0,), inits=("identical",), progress=False)
    first = next(r for r in symmetry_runs if (r.n_heads, r.init) == (2, "identical"))
    assert again[0].accuracy == first.accuracy and again[0].spread == first.spread
    with pytest.raises(ValueError, match="inits must be a non-empty selection"):
        symmetry.symmetry_experiment(TASK, 16, (2,), config, inits=("same",), progress=False)
    with pytest.raises(ValueError, match="perturbation must be non-negative"):
        symmetry.symmetry_experiment(TASK, 16, (2,), config, perturbation=-1.0, progress=False)
    with pytest.raises(ValueError, match="at least one seed"):
        symmetry.symmetry_experiment(TASK, 16, (2,), config, seeds=(), progress=False)


def test_symmetry_table_has_one_row_per_head_count_and_initialisation(symmetry_runs):
    headers, rows = symmetry.symmetry_table(symmetry_runs + symmetry_runs)  # each run twice: two "seeds"
    assert len(rows) == 7 and all(len(row) == len(headers) for row in rows)
    row = rows[[r[:3] for r in rows].index(["2", "8", "identical"])]
    run = next(r for r in symmetry_runs if (r.n_heads, r.init) == (2, "identical"))
    assert row[3] == "2" and row[4] == f"{run.mean_accuracy:.3f} ± 0.000" and row[5] == "0"
    assert row[headers.index("rounding tolerance")] == f"{run.tolerance:.2g}"
    _, single = symmetry.symmetry_table(symmetry_runs)  # one seed: no spread to show, so no "± 0.000"
    assert single[[r[:3] for r in single].index(["2", "8", "identical"])][4] == f"{run.mean_accuracy:.3f}"


def test_symmetry_refuses_shared_key_value_heads():
    with pytest.raises(ValueError, match="shares key/value heads"):
        symmetry.head_spread(MultiHeadAttention(8, 4, n_kv_heads=2))
    with pytest.raises(ValueError, match="contains no manyheads.attention.MultiHeadAttention"):
        symmetry.head_spread(nn.Linear(2, 2))


# ------------------------------------------------------------------------------------------------ speed


@pytest.mark.parametrize("fraction, n_layers, n_heads", [(0.5, 6, 12), (0.3, 6, 12), (0.75, 1, 4), (0.9, 6, 12)])
def test_even_keep_mask_removes_floor_fraction_spread_over_the_layers(fraction, n_layers, n_heads):
    model = nn.ModuleList(MultiHeadAttention(8, n_heads, d_head=2) for _ in range(n_layers))
    keep = speed.even_keep_mask(model, fraction)
    assert keep.dtype == torch.bool and keep.shape == (n_layers, n_heads)
    assert int((~keep).sum()) == math.floor(fraction * n_layers * n_heads)
    per_layer = (~keep).sum(1)
    assert int(per_layer.max() - per_layer.min()) <= 1 and bool((keep.sum(1) >= 1).all())


def test_even_keep_mask_refuses_to_empty_a_layer():
    two_layers = nn.ModuleList([MultiHeadAttention(8, 2), MultiHeadAttention(8, 2)])
    assert int((~speed.even_keep_mask(two_layers, 0.5)).sum()) == 2
    with pytest.raises(ValueError, match=r"removing 3 of 4 heads would empty a layer: at most 2"):
        speed.even_keep_mask(two_layers, 0.75)
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\)"):
        speed.even_keep_mask(MultiHeadAttention(8, 2), 1.0)


def _check_rows(records, batch_sizes, heads_kept, heads_total, threads, tolerance):
    assert [r.batch for r in records] == list(batch_sizes)
    for r in records:
        assert r.device == "cpu" and r.threads == threads and r.repeats == 2
        assert (r.heads_kept, r.heads_total) == (heads_kept, heads_total)
        assert r.masked_tokens_per_s > 0 and r.removed_tokens_per_s > 0
        assert r.speedup == pytest.approx(r.removed_tokens_per_s / r.masked_tokens_per_s - 1)
        assert r.max_abs_diff < tolerance  # the two timed models compute the same function, up to rounding
        assert r.speedup_low <= r.speedup <= r.speedup_high  # the interval over paired rounds holds the estimate
    headers, rows = speed.speed_table(records)
    assert len(rows) == len(records) and all(len(row) == len(headers) for row in rows)
    assert all(isinstance(cell, str) for row in rows for cell in row)
    assert rows[0][headers.index("heads removed")].startswith(f"{heads_total - heads_kept} of {heads_total}")


def test_pruning_speed_on_the_toy_model_times_equal_computations_and_leaves_the_model_alone():
    torch.manual_seed(0)
    model = TinyAttentionModel.for_task(TASK, d_model=16, n_heads=4)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    data = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    records = speed.pruning_speed(
        model, lambda b: TASK.sample(b, data)[0], fraction=0.5, batch_sizes=(1, 3), repeats=2, warmup=1, threads=1
    )
    assert torch.get_num_threads() == threads  # restored
    with torch.no_grad():
        reference, _ = model(TASK.sample(3, torch.Generator().manual_seed(0))[0])
    tolerance = float32_tolerance(reference, depth=1, width=16)
    _check_rows(records, (1, 3), heads_kept=2, heads_total=4, threads=1, tolerance=tolerance)
    assert [r.tokens for r in records] == [TASK.seq_len, 3 * TASK.seq_len]
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert torch.equal(iv.current_gates(model), torch.ones(1, 4)) and iv.kept_heads(model) == [(0, 1, 2, 3)]


def test_the_masked_copy_is_the_interventions_mask_and_equals_the_removed_model():
    torch.manual_seed(1)
    model = TinyAttentionModel.for_task(TASK, d_model=16, n_heads=4)
    keep = torch.tensor([[True, False, True, False]])
    tokens, _ = TASK.sample(5, torch.Generator().manual_seed(3))
    masked = speed._masked_copy(model, keep, torch.device("cpu"))
    with torch.no_grad(), iv.gated(model, keep.float()):
        expected, _ = model(tokens)
    with torch.no_grad():
        got, _ = masked(tokens)
        removed, _ = iv.remove_heads(model, ~keep)(tokens)
    assert torch.equal(got, expected)
    torch.testing.assert_close(removed, expected, rtol=0, atol=float32_tolerance(expected, depth=1, width=16))


def test_pruning_speed_on_minilm_with_a_pruning_mask():
    encoder, tokenizer = load_encoder()
    texts = ["The cat sat on the mat.", "When Mary met John, she gave him her book because he had asked for it."]
    # Heads 11, 10, 9, ... of every layer are the least important: pruning 25 % takes heads 9-11 of each layer.
    importance = (11 - torch.arange(12.0))[None, :] * 6 + torch.arange(6.0)[:, None]
    keep = iv.prune_mask(importance, 0.25)
    records = speed.pruning_speed(
        encoder, lambda b: tokenizer(texts[:b]), keep=keep, batch_sizes=(1, 2), repeats=2, warmup=0, name="MiniLM"
    )
    batch = tokenizer(texts)
    # Removing heads changes the matrices' shapes, so the kernels add in another order: on an AMD EPYC the padded
    # positions of this batch of two differ by 4.4e-5 (the outputs reach 6), more than a fixed 1e-5.
    with torch.no_grad():
        reference = encoder(**batch.inputs()).last_hidden_state
    tolerance = float32_tolerance(reference, depth=encoder.config.n_layers, width=encoder.config.d_ff)
    _check_rows(records, (1, 2), heads_kept=54, heads_total=72, threads=torch.get_num_threads(), tolerance=tolerance)
    assert records[1].tokens == int(batch.attention_mask.sum()) < batch.input_ids.numel()  # padding not counted
    assert records[0].model == "MiniLM"


def test_pruning_speed_rejects_bad_arguments():
    model = MultiHeadAttention(8, 2)
    inputs = lambda b: torch.randn(b, 3, 8)  # noqa: E731
    with pytest.raises(TypeError, match="keep must be a bool keep-mask"):
        speed.pruning_speed(model, inputs, keep=torch.ones(1, 2))
    with pytest.raises(ValueError, match="would leave layer 0 with none"):
        speed.pruning_speed(model, inputs, keep=torch.zeros(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        speed.pruning_speed(model, inputs, repeats=0)
    with pytest.raises(ValueError, match="batch_sizes must be positive"):
        speed.pruning_speed(model, inputs, batch_sizes=(0,))
    with pytest.raises(ValueError, match="threads must be at least 1"):
        speed.pruning_speed(model, inputs, threads=0)


# ------------------------------------------------------------------------------------------------ widget


def _fake_importances():
    g = torch.Generator().manual_seed(0)
    return {"gradient": torch.rand(3, 4, generator=g), "leave-one-out": torch.rand(3, 4, generator=g)}


def test_pruning_explorer_precomputes_each_mask_once_and_redraws_on_a_slider_change():
    importances = _fake_importances()
    seen = []

    def evaluate(keep):
        seen.append(keep.clone())
        return float(keep[0].sum() + 0.1 * keep.sum())  # cheap, and different for different masks

    fractions = (0.0, 0.25, 0.5)
    view = course_widgets.pruning_explorer(importances, evaluate, fractions=fractions, metric="ρ", progress=False)
    method, fraction, _states, image, _words, message = view.children
    assert isinstance(method, widgets.Dropdown) and isinstance(fraction, widgets.SelectionSlider)
    assert isinstance(image, widgets.Image) and message.value == ""
    assert list(method.options) == ["gradient", "leave-one-out"] and fraction.value == 0.0
    # Every mask is prune_mask's; the all-kept mask (0 %) is shared by both methods and evaluated once.
    expected = {(name, f): iv.prune_mask(scores, f) for name, scores in importances.items() for f in fractions}
    distinct = {m.numpy().tobytes() for m in expected.values()}
    assert len(seen) == len(distinct) == 5
    assert all(any(torch.equal(m, s) for s in seen) for m in expected.values())
    first = bytes(image.value)
    assert first.startswith(b"\x89PNG")

    fraction.value = 0.5
    assert message.value == "" and bytes(image.value) != first
    at_half = bytes(image.value)
    method.value = "leave-one-out"
    assert bytes(image.value) not in (first, at_half)
    assert len(seen) == 5  # moving the controls only redraws
    method.value, fraction.value = "gradient", 0.0
    assert bytes(image.value) == first  # the picture follows the state


def test_pruning_explorer_starts_where_asked_and_holds_no_output_widget():
    view = course_widgets.pruning_explorer(
        _fake_importances(), lambda keep: 1.0, fractions=(0.5, 0.0), method="leave-one-out", fraction=0.5
    )
    method, fraction, _states, image, _, _ = view.children
    assert (method.value, fraction.value) == ("leave-one-out", 0.5)
    assert [value for _, value in fraction.options] == [0.0, 0.5]  # sorted
    assert all(not isinstance(w, widgets.Output) for w in view.children)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"importances": {}}, ValueError, "importances is empty"),
        ({"importances": {"a": torch.rand(4)}}, ValueError, r"must be \(n_layers, n_heads\)"),
        ({"importances": {"a": torch.rand(2, 3), "b": torch.rand(3, 2)}}, ValueError, "must score the same heads"),
        ({"fractions": (0.5, 1.5)}, ValueError, r"numbers in \[0, 1\]"),
        ({"method": "taylor"}, ValueError, "method 'taylor' is not one of"),
        ({"fraction": 0.3}, ValueError, "fraction 0.3 is not one of the fractions"),
        ({"evaluate": lambda keep: "good"}, TypeError, "evaluate must return a number, got str"),
    ],
)
def test_pruning_explorer_says_what_is_wrong(kwargs, error, message):
    arguments = {"importances": _fake_importances(), "evaluate": lambda keep: 0.5, "fractions": (0.0, 0.5)}
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        course_widgets.pruning_explorer(**arguments, progress=False)


def test_the_speed_up_interval_resamples_paired_rounds():
    """Review finding B-9: a speed-up is quoted with an interval over interleaved rounds. Rounds where the removed
    model is always 20 % faster give a tight interval at +20 %; noisy rounds give a wide one; one round gives none."""
    steady = speed._paired_interval([1.2] * 8, [1.0] * 8)
    assert steady == pytest.approx((0.2, 0.2))
    noisy = speed._paired_interval([1.2, 2.0, 1.1, 1.3, 3.0, 1.2], [1.0, 1.0, 1.4, 1.0, 1.0, 1.1])
    assert noisy[0] < 0.1 < 0.3 < noisy[1]
    assert all(math.isnan(v) for v in speed._paired_interval([1.0], [1.0]))


def test_symmetry_runs_can_hold_the_head_width_fixed():
    """Review finding B-13: four identical heads of width 8 are compared with one head of width 8, not of width 32."""
    runs = symmetry.symmetry_experiment(
        TASK,
        d_model=16,
        d_head=4,
        head_counts=(1, 2),
        config=TrainConfig(steps=3, seed=0),
        inits=("normal",),
        progress=False,
    )
    assert [(r.n_heads, r.d_head) for r in runs] == [(1, 4), (2, 4)]
    headers, _ = symmetry.symmetry_table(runs)
    assert "accuracy (one seed)" in headers, "one seed has no spread: the header must not promise mean ± sd"
    with pytest.raises(ValueError, match="d_head"):
        symmetry.symmetry_experiment(TASK, 16, (2,), TrainConfig(steps=1), d_head=0, progress=False)


def test_the_pruning_explorer_draws_and_quotes_the_floor():
    """Review finding B-6 / issue item 2: the explorer's curve carries the score with every head removed."""
    from manyheads.viz.widgets import pruning_state

    importances = {name: scores.tolist() for name, scores in _fake_importances().items()}
    scores = {name: [0.5, 0.4] for name in importances}
    state = pruning_state(importances, scores, [0.0, 0.5], "ρ", "gradient", 0.5, floor=0.355)
    curve = state["panels"][1]
    floors = [s for s in curve["series"] if "floor" in s["label"]]
    assert len(floors) == 1 and floors[0]["y"] == [0.355, 0.355]
    assert "no heads: 0.355" in curve["title"]
    without = pruning_state(importances, scores, [0.0, 0.5], "ρ", "gradient", 0.5)
    assert not any("floor" in s["label"] for s in without["panels"][1]["series"])
    view = course_widgets.pruning_explorer(
        _fake_importances(), lambda keep: 0.5, fractions=(0.0, 0.5), floor=0.3, progress=False
    )
    assert view.children[3].value  # drawn
