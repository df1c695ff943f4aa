"""Chapter 6's induction heads: the repeat task, the attention-only model and its path removal, the induction score,
the probes and the training recipe's plumbing.

The circuit tests use a 2-layer model whose weights are set by hand to an exact induction circuit (a previous-token
head in layer 0, an induction head in layer 1 that reads it through its keys), so every expected number is known
without training; that the recipe trains such a circuit is measured in benchmarks/induction.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

import manyheads as mh
from manyheads.analysis.induction import induction_score, probe_batches, repeat_metrics, train_induction_model
from manyheads.data.repeats import RepeatedHalvesTask
from manyheads.data.tasks import IGNORE_INDEX
from manyheads.interventions import HeadPath
from manyheads.models.attention_only import AttentionOnlyTransformer
from manyheads.training import TrainConfig

VOCAB, HALF = 8, 5  # ordinary tokens and the half-length of the hand-built circuit's inputs


# -- the task ------------------------------------------------------------------------------------------------------


def test_repeat_task_rows_are_bos_then_r_twice_with_next_token_targets():
    task = RepeatedHalvesTask(vocab_size=10, min_half=3, max_half=6)
    seen = set()
    generator = torch.Generator().manual_seed(0)
    for _ in range(30):
        tokens, targets = task.sample(4, generator)
        half = (tokens.shape[1] - 1) // 2
        seen.add(half)
        assert tokens.shape == (4, 2 * half + 1) and 3 <= half <= 6
        assert (tokens[:, 0] == task.bos_id).all() and (tokens[:, 1:] < 10).all()
        assert torch.equal(tokens[:, 1 : half + 1], tokens[:, half + 1 :])
        assert torch.equal(targets[:, :-1], tokens[:, 1:]) and (targets[:, -1] == IGNORE_INDEX).all()
    assert seen == {3, 4, 5, 6}
    assert task.n_tokens == 11 and task.max_seq == 13


def test_repeat_task_is_reproducible_from_the_seed():
    task = RepeatedHalvesTask()
    a = task.sample(8, torch.Generator().manual_seed(3))
    b = task.sample(8, torch.Generator().manual_seed(3))
    c = task.sample(8, torch.Generator().manual_seed(4))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert a[0].shape != c[0].shape or not torch.equal(a[0], c[0])


@pytest.mark.parametrize("kwargs", [{"vocab_size": 1}, {"min_half": 0}, {"min_half": 5, "max_half": 4}])
def test_repeat_task_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError, match="vocab_size|half"):
        RepeatedHalvesTask(**kwargs)


# -- the hand-built circuit ----------------------------------------------------------------------------------------


def _circuit() -> AttentionOnlyTransformer:
    """Residual stream: [token one-hot | position one-hot | previous token (layer 0's write) | output (layer 1's)].

    Layer 0 head 0 attends from i to i − 1 and writes that token into the "previous token" block; layer 1 head 0
    matches its own token (query) against that block (key) and copies the key's token into the output block, which
    alone the unembedding reads. Heads 1 of both layers are all zeros: uniform attention, no output.
    """
    n_tokens, seq = VOCAB + 1, 2 * HALF + 1
    tok, pos, prev, out = 0, n_tokens, n_tokens + seq, 2 * n_tokens + seq
    d_model = 40
    model = AttentionOnlyTransformer(n_tokens, seq, d_model=d_model, n_heads=2, n_layers=2)
    sharp = 100.0  # large scores: softmax is then (almost) a hard choice
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.token_embedding.weight[:, tok : tok + n_tokens] = torch.eye(n_tokens)
        model.position_embedding.weight[:, pos : pos + seq] = torch.eye(seq)
        first, second = model.layers
        for p in range(seq):
            first.W_q.weight[p, pos + p] = sharp  # query i: coordinate i
        for p in range(seq - 1):
            first.W_k.weight[p + 1, pos + p] = 1.0  # key j: coordinate j + 1, so q_i · k_j > 0 iff j = i − 1
        for t in range(n_tokens):
            first.W_v.weight[t, tok + t] = 1.0
            first.W_o.weight[prev + t, t] = 1.0
            second.W_q.weight[t, tok + t] = sharp
            second.W_k.weight[t, prev + t] = 1.0
            second.W_v.weight[t, tok + t] = 1.0
            second.W_o.weight[out + t, t] = 1.0
            model.unembed.weight[t, out + t] = 10.0
    return model


def _distinct_repeats(n: int, seed: int = 0) -> torch.Tensor:
    """(n, 2·HALF + 1): [BOS] + r + r with r's tokens all different, so each token of r has one earlier match."""
    generator = torch.Generator().manual_seed(seed)
    rows = [torch.randperm(VOCAB, generator=generator)[:HALF] for _ in range(n)]
    r = torch.stack(rows)
    return torch.cat([torch.full((n, 1), VOCAB), r, r], dim=1)


@pytest.fixture(scope="module")
def circuit():
    return _circuit().eval()


def test_the_hand_built_circuit_has_a_previous_token_head_and_an_induction_head(circuit):
    tokens = _distinct_repeats(16)
    with torch.no_grad():
        logits, weights = circuit(tokens)
    assert logits.shape == (16, 2 * HALF + 1, VOCAB + 1) and weights.shape == (2, 16, 2, 2 * HALF + 1, 2 * HALF + 1)
    previous = mh.previous_token_score(weights[0])
    induction = induction_score(weights[1], HALF)
    assert previous[0] > 0.99 and previous[1] < 0.5
    assert induction[0] > 0.99 and induction[1] < 0.3
    # ... and the induction head predicts the second copy: the announced tokens cost almost nothing.
    metrics = repeat_metrics(circuit, {HALF: tokens})
    assert metrics.second < 0.01 and metrics.first > 1.0
    assert metrics.log_half == pytest.approx(math.log(HALF))


def test_removing_the_previous_token_head_from_the_keys_only_breaks_induction(circuit):
    probes = {HALF: _distinct_repeats(16)}
    results = mh.composition_test(circuit, probes, source=(0, 0))
    target = (1, 0)
    assert results["none"].induction[target] > 0.99
    assert results["k"].induction[target] < 0.3  # keys no longer say which token came before
    assert results["k"].second > 1.0
    for path in ("q", "v"):  # this circuit's queries and values never read the previous-token block
        assert results[path].induction[target] == pytest.approx(results["none"].induction[target].item(), abs=1e-6)
        assert results[path].second == pytest.approx(results["none"].second, abs=1e-6)


def test_composition_test_takes_several_source_heads_and_rejects_bad_ones(circuit):
    probes = {HALF: _distinct_repeats(8)}
    results = mh.composition_test(circuit, probes, source=[(0, 0), (0, 1)])
    assert results["k"].induction[1, 0] < 0.3 and results["q"].induction[1, 0] > 0.99
    for bad in ([], (0,), [(0, 0, "k")], "k"):
        with pytest.raises(ValueError, match="source"):
            mh.composition_test(circuit, probes, source=bad)


def test_ablating_layer_0s_previous_token_head_breaks_induction_and_other_heads_do_not(circuit):
    probes = {HALF: _distinct_repeats(16)}
    intact = repeat_metrics(circuit, probes).induction[1, 0].item()
    with mh.ablated(circuit, (0, 0)):
        assert repeat_metrics(circuit, probes).induction[1, 0] < 0.3
    with mh.ablated(circuit, [(0, 1), (1, 1)]):
        assert repeat_metrics(circuit, probes).induction[1, 0].item() == pytest.approx(intact, abs=1e-6)


def test_key_path_removal_equals_ablation_for_the_later_layers_keys(circuit):
    # In this circuit only layer 1's keys read head (0, 0), so the two interventions give layer 1 the same weights.
    tokens = _distinct_repeats(4, seed=1)
    with torch.no_grad():
        with mh.paths_removed(circuit, [HeadPath(0, 0, "k")]):
            _, removed = circuit(tokens)
        with mh.ablated(circuit, (0, 0)):
            _, ablated = circuit(tokens)
    torch.testing.assert_close(removed[1], ablated[1])


def test_removing_a_head_from_all_three_paths_equals_ablating_it_for_the_next_layer():
    # A random model: every path reads everything, so only the exact subtraction makes these equal.
    torch.manual_seed(0)
    model = AttentionOnlyTransformer(12, 9, d_model=16, n_heads=4, n_layers=2).eval()
    tokens = torch.randint(12, (3, 9))
    with torch.no_grad():
        intact = model(tokens)
        with mh.paths_removed(model, [(0, 2, path) for path in ("q", "k", "v")]):
            removed = model(tokens)
        with mh.ablated(model, (0, 2)):
            ablated = model(tokens)
        with mh.paths_removed(model, [(0, 2, "k")]):
            only_k = model(tokens)
        with mh.paths_removed(model, [(0, 2, "v")]):
            only_v = model(tokens)
        after = model(tokens)
    torch.testing.assert_close(removed.weights, ablated.weights)
    torch.testing.assert_close(removed.weights[0], intact.weights[0])  # layer 0 itself is untouched
    assert not torch.allclose(only_k.weights[1], intact.weights[1], atol=1e-4)
    assert not torch.allclose(only_k.weights[1], removed.weights[1], atol=1e-4)  # the queries still see the head
    torch.testing.assert_close(only_v.weights, intact.weights)  # values move no attention pattern...
    assert not torch.allclose(only_v.logits, intact.logits, atol=1e-4)  # ...but change what is copied
    # The head's direct path to the logits stays, so removing it from every input of layer 1 is not ablating it.
    assert not torch.allclose(removed.logits, ablated.logits, atol=1e-4)
    torch.testing.assert_close(after.logits, intact.logits)  # the hooks are gone on exit: the model is as before


@pytest.mark.parametrize(
    ("remove", "message"),
    [
        ([(0, 0, "x")], "path must be one of"),
        ([(1, 0, "k")], "no later layer"),
        ([(0, 7, "k")], "out of range"),
        ([(0, 0)], "triple"),
    ],
)
def test_bad_path_removals_are_rejected(circuit, remove, message):
    with pytest.raises(ValueError, match=message):
        with mh.paths_removed(circuit, remove):
            circuit(_distinct_repeats(1))


def test_the_model_rejects_inputs_longer_than_its_positions(circuit):
    with pytest.raises(ValueError, match="max_seq"):
        circuit(torch.zeros(1, 2 * HALF + 2, dtype=torch.long))


# -- the induction score -------------------------------------------------------------------------------------------


def test_induction_score_matches_its_definition_on_random_weights():
    torch.manual_seed(1)
    half = 4
    weights = torch.softmax(torch.randn(3, 2, 2 * half + 1, 2 * half + 1), dim=-1)
    expected = torch.zeros(2)
    for b in range(3):
        for i in range(half + 1, 2 * half + 1):
            expected += weights[b, :, i, i - half + 1]
    torch.testing.assert_close(induction_score(weights, half), expected / (3 * half))


@pytest.mark.parametrize("half", [3, 5, 0, True, 4.0])
def test_induction_score_rejects_a_half_that_does_not_fit(half):
    weights = torch.full((1, 1, 9, 9), 1 / 9)  # half = 4 fits
    with pytest.raises(ValueError, match="half"):
        induction_score(weights, half)


def test_induction_score_rejects_weights_of_the_wrong_rank():
    with pytest.raises(ValueError, match="batch, n_heads, seq, seq"):
        induction_score(torch.full((2, 9, 9), 1 / 9), 4)


# -- the recipe's plumbing -----------------------------------------------------------------------------------------


def test_training_records_the_curves_and_snapshots_that_reproduce_them():
    task = RepeatedHalvesTask(vocab_size=16, min_half=3, max_half=5)
    probes = probe_batches(task, per_half=4)
    config = replace(mh.INDUCTION_RECIPE, steps=20, eval_every=10, eval_size=16, batch_size=8)
    run = train_induction_model(
        seed=0, task=task, config=config, d_model=16, n_heads=2, probes=probes, snapshot_every=10, progress=False
    )
    assert run.steps == [0, 10, 20] and sorted(run.snapshots) == [0, 10, 20]
    assert len(run.train_loss) == 20 and run.induction.shape == (3, 2, 2) and run.previous.shape == (3, 2, 2)
    assert run.first_loss[0] == pytest.approx(run.history[0].first)
    # A snapshot is the model as it was when that step's metrics were measured.
    model = AttentionOnlyTransformer.for_task(task, d_model=16, n_heads=2)
    model.load_state_dict(run.snapshots[10])
    again = repeat_metrics(model.eval(), probes)
    assert again.second == pytest.approx(run.history[1].second, abs=1e-5)
    torch.testing.assert_close(again.induction, run.history[1].induction)
    assert not torch.equal(run.snapshots[0]["unembed.weight"], run.snapshots[20]["unembed.weight"])
    # The same seed trains the same model.
    rerun = train_induction_model(
        seed=0, task=task, config=config, d_model=16, n_heads=2, probes=probes, progress=False
    )
    assert rerun.train_loss == run.train_loss
    with pytest.raises(ValueError, match="2 layers"):
        replace(run, n_layers=1).best_heads()


def test_the_recipe_uses_adamw_and_bad_optimizers_are_rejected():
    assert mh.INDUCTION_RECIPE.optimizer == "adamw" and mh.INDUCTION_RECIPE.lr == 3e-3
    task = RepeatedHalvesTask(vocab_size=8, min_half=2, max_half=3)
    with pytest.raises(ValueError, match="optimizer"):
        train_induction_model(
            task=task,
            config=TrainConfig(steps=1, eval_every=1, eval_size=4, optimizer="sgd"),
            d_model=8,
            progress=False,
        )
    with pytest.raises(ValueError, match="snapshot_every"):
        train_induction_model(task=task, config=TrainConfig(steps=2, eval_every=2), snapshot_every=3, progress=False)


def test_path_removal_matches_subtracting_the_heads_write_by_hand():
    """The hooks (manyheads.paths_removed) against the computation written out: layer 1 run on x minus head (0, 1)'s
    write in its keys only, the write being layer 0's output minus its output with that head zeroed."""
    torch.manual_seed(1)
    model = AttentionOnlyTransformer(10, 8, d_model=16, n_heads=4, n_layers=2).eval()
    tokens = torch.randint(10, (2, 8))
    with torch.no_grad():
        mask = mh.causal_mask(8)
        x = model.token_embedding(tokens) + model.position_embedding(torch.arange(8))
        out0, _ = model.layers[0](x, x, x, mask=mask)
        with mh.ablated(model.layers[0], (0, 1)):
            without, _ = model.layers[0](x, x, x, mask=mask)
        x1 = x + out0
        _, expected = model.layers[1](x1, x1 - (out0 - without), x1, mask=mask)
        with mh.paths_removed(model, [(0, 1, "k")]):
            _, weights = model(tokens)
    torch.testing.assert_close(weights[1], expected)


def test_path_removal_is_undone_after_an_error():
    model = AttentionOnlyTransformer(10, 8, d_model=16, n_heads=4, n_layers=2).eval()
    tokens = torch.randint(10, (1, 8))
    intact = model(tokens).logits
    with pytest.raises(RuntimeError, match="boom"), mh.paths_removed(model, [(0, 0, "q")]):
        raise RuntimeError("boom")
    torch.testing.assert_close(model(tokens).logits, intact)
