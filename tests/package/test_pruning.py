"""Chapter 5's pruning tools: prune_mask and gate_importance (interventions), and manyheads.analysis's pruning
tasks, ablation maps, importance and pruning curves (pruning_tasks, ablation, importance, pruning), on a toy model
and on a small random BERT encoder (fast) with the real MiniLM tokenizer. Each test compares with a direct
computation that would catch the bug it names."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers.tolerances import float32_tolerance

from manyheads import analysis as P
from manyheads import interventions as iv
from manyheads.analysis.pruning_tasks import without_head
from manyheads.data import TwoRelationTask
from manyheads.models import TinyAttentionModel
from manyheads.models.attention_only import AttentionOnlyTransformer
from manyheads.models.bert import BertConfig, BertEncoder
from manyheads.models.checkpoints import model_dir
from manyheads.models.tokenizer import Tokenizer
from manyheads.training import readout_accuracy

TEXTS = [
    "A gripping, beautifully acted film.",
    "Dull and far too long.",
    "The plot makes no sense at all, but the music is lovely and the cast seem to enjoy themselves.",
    "An instant classic.",
    "I wanted to like it.",
    "Neither funny nor moving, and the ending drags on for what feels like hours.",
    "Smart, warm and honest.",
    "A mess.",
]


# --------------------------------------------------------------------------------------------- prune_mask
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 2)])
@pytest.mark.parametrize("fraction", [0.0, 0.26, 0.5, 0.74, 1.0])
def test_prune_mask_drops_exactly_the_k_least_important(shape, fraction):
    importance = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    before = importance.clone()
    keep = iv.prune_mask(importance, fraction)
    k = math.floor(fraction * importance.numel())
    assert keep.dtype == torch.bool and keep.shape == importance.shape
    assert int((~keep).sum()) == k
    assert torch.equal(importance, before), "the input must not change"
    if 0 < k < importance.numel():  # every pruned score is below every kept one: ranked over the whole model
        assert importance[~keep].max() < importance[keep].min()


def test_prune_mask_ranks_over_the_whole_model_not_per_layer():
    importance = torch.tensor([[0.1, 0.2, 0.3], [5.0, 6.0, 7.0]])
    keep = iv.prune_mask(importance, 0.5)
    assert keep.tolist() == [[False, False, False], [True, True, True]]


@pytest.mark.parametrize("fraction", [-0.1, 1.01, float("nan")])
def test_prune_mask_refuses_fractions_outside_0_1(fraction):
    with pytest.raises(ValueError, match="fraction"):
        iv.prune_mask(torch.zeros(4), fraction)


# --------------------------------------------------------------------------------------------- gate_importance
def _toy():
    torch.manual_seed(0)
    task = TwoRelationTask(vocab_size=8, seq_len=6, offsets=(1, 2))
    model = TinyAttentionModel.for_task(task, d_model=16, n_heads=4).eval()
    tokens, targets = task.sample(64, torch.Generator().manual_seed(1))
    return task, model, tokens, targets


def _toy_loss(output, targets):
    logits = output[0]
    return F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=-100)


def test_gate_importance_is_the_mean_of_absolute_gradients_per_batch():
    _, model, tokens, targets = _toy()
    batches = [(tokens[:16], targets[:16]), (tokens[16:40], targets[16:40]), (tokens[40:], targets[40:])]
    grads = [iv.gate_gradients(model, lambda out, t=t: _toy_loss(out, t), x) for x, t in batches]
    expected = torch.stack(grads).abs().mean(0)
    got = iv.gate_importance(model, _toy_loss, iter(batches))  # a generator is fine
    assert torch.allclose(got, expected, atol=1e-7)
    assert not got.requires_grad
    # The absolute value comes before the mean: the mean of signed gradients is another (smaller) thing.
    signed = torch.stack(grads).mean(0).abs()
    assert not torch.allclose(got, signed)


def test_gate_importance_can_normalise_each_layer():
    _, model, tokens, targets = _toy()
    raw = iv.gate_importance(model, _toy_loss, [(tokens, targets)])
    normalised = iv.gate_importance(model, _toy_loss, [(tokens, targets)], normalize_layers=True)
    assert torch.allclose(normalised.norm(dim=1), torch.ones(1))
    assert torch.allclose(normalised, raw / raw.norm(dim=1, keepdim=True))


def test_gate_importance_says_what_is_wrong():
    _, model, tokens, _ = _toy()
    with pytest.raises(ValueError, match="empty"):
        iv.gate_importance(model, _toy_loss, [])
    with pytest.raises(ValueError, match=r"\(inputs, targets\) pair"):
        iv.gate_importance(model, _toy_loss, [tokens])


# --------------------------------------------------------------------------------------------- statistics
def test_spearman_and_ridge_match_references():
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 5, (40,), generator=g).float()  # many ties
    y = x + torch.randn(40, generator=g)
    assert P.spearman(x, y) == pytest.approx(stats.spearmanr(x.numpy(), y.numpy()).statistic, abs=1e-12)
    features, targets = torch.randn(30, 4, generator=g), torch.randn(30, generator=g)
    weight, bias = P.fit_ridge(features, targets, alpha=0.0)
    design = torch.cat([features, torch.ones(30, 1)], 1).double()
    solution = torch.linalg.lstsq(design, targets.double()[:, None]).solution[:, 0]
    assert torch.allclose(weight.double(), solution[:4], atol=1e-5) and float(bias) == pytest.approx(float(solution[4]))
    shrunk, _ = P.fit_ridge(features, targets, alpha=100.0)
    assert shrunk.norm() < weight.norm()
    with pytest.raises(ValueError, match="alpha"):
        P.fit_ridge(features, targets, alpha=-1.0)


# --------------------------------------------------------------------------------------------- encoder tasks
@pytest.fixture(scope="module")
def small_encoder():
    """A randomly initialised 3-layer, 4-head BERT with MiniLM's tokenizer: the same code path, fast."""
    directory = model_dir(None)
    tokenizer = Tokenizer.from_dir(directory)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layers=3, n_heads=4, d_ff=64)
    return BertEncoder(config).eval(), tokenizer


@pytest.fixture(scope="module")
def lee(small_encoder):
    model, tokenizer = small_encoder
    g = torch.Generator().manual_seed(2)
    sims = torch.rand(len(TEXTS), len(TEXTS), generator=g)
    sims = (sims + sims.T) / 2
    return P.lee_similarity_task(model, tokenizer, TEXTS, sims, max_tokens=12, tokens_per_batch=40)


@pytest.fixture(scope="module")
def sentiment(small_encoder):
    model, tokenizer = small_encoder
    ratings = torch.linspace(-3, 3, len(TEXTS) * 3)
    texts = [f"{t} ({i})" for i in range(3) for t in TEXTS]
    return P.sentiment_probe_task(
        model, tokenizer, texts, ratings, n_fit=14, n_eval=9, seed=1, alpha=0.5, tokens_per_batch=60
    )


def _reference_embeddings(task, gates):
    """The plain way: the whole model on all texts at once, mean-pooled and normalised."""
    batch = task._tokenizer_batch
    with torch.no_grad(), iv.gated(task.model, gates):
        hidden = task.model(batch).last_hidden_state
    mask = batch.attention_mask[..., None].float()
    return F.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)


def _tolerance(task, reference) -> float:
    """How far the task's float32 outputs computed another way may be from ``reference`` (tests/helpers)."""
    config = task.model.config
    return float32_tolerance(reference, depth=config.n_layers, width=config.d_ff)


@pytest.fixture(scope="module", params=["lee", "sentiment"])
def encoder_task(request, small_encoder):
    task = request.getfixturevalue(request.param)
    task._tokenizer_batch = small_encoder[1](task.texts, max_length=12 if request.param == "lee" else 128)
    return task


def test_encoder_task_batches_keep_the_item_order(encoder_task):
    assert len(encoder_task.batches) > 1, "the test must cover several length-sorted batches"
    gates = encoder_task.ones()
    gates[1, 2] = 0.0
    expected = _reference_embeddings(encoder_task, gates)
    tolerance = _tolerance(encoder_task, expected)
    torch.testing.assert_close(encoder_task.embeddings(gates), expected, rtol=0, atol=tolerance)


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("max_tokens", [16384, 1])  # a layer's heads in one wide forward, or one per forward
def test_reusing_the_lower_layers_gives_the_full_runs_outputs(encoder_task, mode, max_tokens, monkeypatch):
    task = encoder_task
    monkeypatch.setattr(task, "MAX_TOKENS", max_tokens)
    gates = task.ones()
    gates[0, 1] = 0.0  # an already pruned head stays pruned in every run
    heads = [(0, 0), (1, 3), (2, 2), (1, 0), (2, 3), (2, 1)]  # several heads of a layer, out of order
    means = task.head_means() if mode == "mean" else None
    fast = task.outputs_each_removed(gates, heads, mode=mode, means=means)
    for head, got in zip(heads, fast):
        if mode == "zero":
            expected = task.outputs(without_head(gates, head))
        else:
            with iv.ablated(task.model, head, mode="mean", means=means):
                expected = task.outputs(gates)
        tolerance = _tolerance(task, expected)
        torch.testing.assert_close(got, expected, rtol=0, atol=tolerance, msg=lambda m, head=head: f"{head}: {m}")
        assert (got - task.outputs(gates)).abs().max() > 10 * tolerance, "the head must change something"


def test_the_vectorised_bootstrap_equals_the_plain_metric(encoder_task):
    task = encoder_task
    outputs = [task.outputs(task.ones()), task.outputs(without_head(task.ones(), (2, 1)))]
    resamples = [
        torch.randint(task.n_items, (task.n_items,), generator=torch.Generator().manual_seed(s)) for s in range(6)
    ]
    fast = task.bootstrap_metrics(outputs, resamples)
    plain = P.PruningTask.bootstrap_metrics(task, outputs, resamples)
    assert torch.allclose(fast.float(), plain.float(), atol=1e-5)


def test_lee_metric_and_loss(lee):
    out = lee.outputs(lee.ones())
    i, j = torch.triu_indices(len(TEXTS), len(TEXTS), offset=1)
    assert lee.metric(out) == pytest.approx(P.spearman(out[i, j], lee.similarities[i, j]))
    r = torch.corrcoef(torch.stack([out[i, j], lee.similarities[i, j]]))[0, 1]
    assert float(lee.loss_of(out)) == pytest.approx(1 - float(r), abs=1e-5), "1 - Pearson r, not an MSE"
    assert torch.allclose(out.diagonal(), torch.ones(len(TEXTS)), atol=1e-5), "unit-length embeddings"


def test_the_lee_loss_ignores_the_cosines_level_and_scale_as_rho_does(lee):
    """Review finding B-5: an MSE against the human scores mostly measured how high the cosines are. The loss used to
    rank heads must not change when every cosine moves up or is stretched, just as Spearman's rho does not."""
    out = lee.outputs(lee.ones())
    shifted = 0.3 + 2.0 * out
    assert float(lee.loss_of(shifted)) == pytest.approx(float(lee.loss_of(out)), abs=1e-5)
    assert lee.metric(shifted) == pytest.approx(lee.metric(out))
    x = torch.tensor([0.1, 0.5, 0.2, 0.9])
    assert float(P.correlation_loss(x, 3 * x + 1)) == pytest.approx(0.0, abs=1e-6)
    assert float(P.correlation_loss(x, -x)) == pytest.approx(2.0, abs=1e-6)
    with pytest.raises(ValueError, match="1-D"):
        P.correlation_loss(x[:1], x[:1])
    gates = lee.ones().requires_grad_(True)
    (loss,) = lee.loss_terms(gates)
    assert float(loss.detach()) == pytest.approx(float(lee.loss_of(lee.outputs(lee.ones()))), abs=1e-5)


def test_the_sentiment_probe_is_fitted_once_and_stays_fixed(sentiment):
    weight = sentiment.weight.clone()
    gates = sentiment.ones()
    gates[0] = 0.0
    sentiment.score(gates)
    assert torch.equal(sentiment.weight, weight)
    predictions = sentiment.outputs(sentiment.ones())
    y = sentiment.ratings
    assert sentiment.metric(predictions) == pytest.approx(
        float(1 - ((predictions - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    )
    assert len(sentiment.texts) == 9 and 0 < sentiment.probe_r2_fit <= 1


def test_ablation_map_deltas_intervals_and_loo(lee):
    zero = P.ablation_map(lee, "zero", n_boot=50, seed=0)
    assert zero.delta.shape == (3, 4) and zero.base == pytest.approx(lee.score(lee.ones()))
    assert zero.delta[1, 2] == pytest.approx(lee.score(without_head(lee.ones(), (1, 2))) - zero.base, abs=1e-6)
    assert bool((zero.low <= zero.high).all())
    loo = P.head_importance(lee, "loo")
    assert torch.allclose(loo, zero.loss_delta, atol=1e-6), "leave-one-out importance is the zero map's loss change"
    helpful = set(zero.helpful_removals)
    assert helpful == {tuple(p) for p in (zero.low > 0).nonzero().tolist()}
    mean = P.ablation_map(lee, "mean", n_boot=20)
    assert not torch.allclose(mean.delta, zero.delta)


def test_gradient_importance_is_the_absolute_gate_gradient(lee):
    gates = lee.ones().requires_grad_(True)
    (loss,) = lee.loss_terms(gates)
    (grad,) = torch.autograd.grad(loss, gates)
    assert torch.allclose(P.head_importance(lee, "gradient"), grad.abs(), atol=1e-8)
    normalised = P.head_importance(lee, "gradient", normalize_layers=True)
    assert torch.allclose(normalised.norm(dim=1), torch.ones(3), atol=1e-6)
    with pytest.raises(ValueError, match="method"):
        P.head_importance(lee, "magnitude")


def test_self_distillation_has_no_gradient_at_gates_one(lee):
    distilled, own = P.self_distillation_gradient(lee)
    assert distilled < 1e-6 < own


# --------------------------------------------------------------------------------------------- pruning curves
@pytest.fixture(scope="module")
def toy_task():
    _, model, tokens, targets = _toy()

    def accuracy(logits, targets):
        return float(readout_accuracy(logits, targets).mean())

    def loss(logits, targets):
        return F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=-100)

    return P.ModelTask(model, tokens, targets, accuracy, loss, batch_size=32)


@pytest.mark.parametrize("method", ["gradient", "loo", "random"])
def test_pruning_curve_removes_floor_of_each_step_and_never_revives(toy_task, method):
    curve = P.pruning_curve(toy_task, method, step=0.25, seed=3)
    n = 4
    assert curve.fractions == [math.floor(t * 0.25 * n) / n for t in range(5)]
    assert curve.scores[0] == pytest.approx(toy_task.score(toy_task.ones()))
    for t in range(1, 5):  # heads gone at point t stay gone later
        assert bool((~curve.mask_at(t - 1) <= ~curve.mask_at(t)).all())
    gates = curve.mask_at(2).float()
    assert curve.scores[2] == pytest.approx(toy_task.score(gates))


def test_pruning_follows_the_importance_and_random_order_follows_the_seed(toy_task):
    curve = P.pruning_curve(toy_task, "loo", step=0.25, max_fraction=0.25)
    first = P.head_importance(toy_task, "loo")
    assert (~curve.mask_at(1)).nonzero().tolist() == [[0, int(first.argmin())]]
    a, b = (P.pruning_curve(toy_task, "random", step=0.25, seed=s) for s in (5, 5))
    c = P.pruning_curve(toy_task, "random", step=0.25, seed=6)
    assert torch.equal(a.removed_at, b.removed_at) and not torch.equal(a.removed_at, c.removed_at)


def test_reestimating_every_other_step(toy_task):
    every = P.pruning_curve(toy_task, "gradient", step=0.25, reestimate_every=1)
    other = P.pruning_curve(toy_task, "gradient", step=0.25, reestimate_every=2)
    assert (every.estimates, other.estimates) == (4, 2)


def test_prunable_fraction_and_layers():
    curve = P.PruningCurve(
        "x", [0.0, 0.1, 0.2, 0.3, 0.4], [0.5, 0.49, 0.47, 0.44, 0.48], torch.tensor([[1, 2], [3, 5]])
    )
    assert P.prunable_fraction(curve, 0.05) == 0.1  # 0.47 < 0.5 - 5 % of 0.5
    assert P.prunable_fraction(curve, 0.10) == 0.2  # the first fall below 0.45 ends it; the later 0.48 does not count
    assert P.prunable_fraction(curve, 0.01) == 0.0
    assert P.pruned_per_layer(curve, 0.2).tolist() == [2, 0]


def test_prunable_fraction_with_an_absolute_tolerance():
    """Chapter 5 states SmolLM2's tolerance in nats per token (review finding B-7), not as a share of the gap to a
    floor that lies below uniform guessing: the threshold is the unpruned score minus the tolerance."""
    curve = P.PruningCurve("x", [0.0, 0.1, 0.2, 0.3, 1.0], [-5.0, -5.05, -5.2, -5.6, -12.0], torch.tensor([[1, 2]]))
    assert P.prunable_fraction(curve, tolerance=0.1) == 0.1
    assert P.prunable_fraction(curve, tolerance=0.25) == 0.2
    assert P.prunable_fraction(curve, tolerance=0.0) == 0.0
    assert P.prunable_fraction(curve, 0.05, floor=curve.floor) == 0.2  # a share of the 7-nat gap: 0.35 nats
    with pytest.raises(ValueError, match="either drop"):
        P.prunable_fraction(curve, 0.1, tolerance=0.1)
    with pytest.raises(ValueError, match="either drop"):
        P.prunable_fraction(curve)


def test_a_given_first_estimate_replaces_the_first_leave_one_out(lee):
    zero = P.ablation_map(lee, "zero", n_boot=10)
    given = P.pruning_curve(lee, "loo", step=0.25, max_fraction=0.5, reestimate_every=2, initial=zero.loss_delta)
    fresh = P.pruning_curve(lee, "loo", step=0.25, max_fraction=0.5, reestimate_every=2)
    assert torch.equal(given.removed_at, fresh.removed_at) and given.scores == pytest.approx(fresh.scores)
    with pytest.raises(ValueError, match="shape"):
        P.pruning_curve(lee, "loo", initial=torch.zeros(2, 2))


def test_importance_can_come_from_other_items_than_the_scored_ones(small_encoder):
    model, tokenizer = small_encoder
    texts = [f"{t} ({i})" for i in range(3) for t in TEXTS]
    ratings = torch.linspace(-3, 3, len(texts))
    task = P.sentiment_probe_task(model, tokenizer, texts, ratings, n_fit=14, n_eval=9, seed=1, n_importance=6)
    other = task.importance_task
    assert other.n_items == 6 and torch.equal(other.weight, task.weight) and not set(other.texts) & set(task.texts)
    curve = P.pruning_curve(task, "loo", step=0.25, max_fraction=0.25, importance_task=other)
    first = P.head_importance(other, "loo")
    assert (~curve.mask_at(1)).sum() == 3 and bool(first[~curve.mask_at(1)].max() <= first[curve.mask_at(1)].min())


def test_a_shared_score_cache_scores_identical_gates_once_and_changes_no_score(toy_task):
    calls = []
    score = toy_task.score

    def counted(gates):
        calls.append(gates.clone())
        return score(gates)

    plain = [P.pruning_curve(toy_task, "random", step=0.25, seed=s) for s in (0, 1)]
    toy_task.score = counted
    try:
        shared: dict = {}
        cached = [P.pruning_curve(toy_task, "random", step=0.25, seed=s, scored=shared) for s in (0, 1)]
    finally:
        del toy_task.score
    assert [c.scores for c in cached] == [c.scores for c in plain]
    distinct = {g.bool().numpy().tobytes() for g in calls}
    assert len(calls) == len(distinct), "identical gates were scored twice"
    assert len(calls) <= 2 * 5 - 2, "the first (all heads) and last (no heads) points are shared between the orders"


# --------------------------------------------------------------------------------------------- floors (issue 24)
def _curve(scores, fractions=None):
    fractions = fractions or [i / (len(scores) - 1) for i in range(len(scores))]
    return P.PruningCurve("x", fractions, scores, torch.zeros(1, 1, dtype=torch.long))


def test_a_curve_is_read_against_its_floor():
    curve = _curve([1.0, 0.98, 0.9, 0.5, 0.0])
    assert curve.floor == 0.0
    assert curve.relative_scores() == pytest.approx([1.0, 0.98, 0.9, 0.5, 0.0])
    assert P.prunable_fraction(curve, 0.05, floor=curve.floor) == 0.25
    assert P.prunable_fraction(curve, 0.10, floor=curve.floor) == 0.5
    # A task that keeps 89 % of its score with no heads: "within 10 %" of the score says every head can go, while
    # the same curve read against its floor says none can.
    weak = _curve([0.398, 0.37, 0.36, 0.36, 0.36])
    assert P.prunable_fraction(weak, 0.10) == 1.0
    assert P.prunable_fraction(weak, 0.10, floor=weak.floor) == 0.0
    # A floor above the unpruned score (sentiment R² 0.219 against 0.186): the task cannot say; NaN, never 0 %.
    above = _curve([0.186, 0.2, 0.21, 0.22, 0.219])
    assert math.isnan(P.prunable_fraction(above, 0.10, floor=above.floor))
    assert all(math.isnan(v) for v in above.relative_scores())
    assert math.isnan(_curve([1.0, 0.9], fractions=[0.0, 0.5]).floor)  # a curve that stops before 100 %


def test_next_token_task_scores_the_mean_log_likelihood_and_its_gradient(toy_task):
    torch.manual_seed(0)
    model = AttentionOnlyTransformer(n_tokens=11, max_seq=9, d_model=16, n_heads=4, n_layers=2)
    ids = torch.randint(11, (6, 9))
    task = P.next_token_task(model, ids, batch_size=4)
    gates = torch.ones(task.grid)
    gates[0, 1] = 0.0
    with iv.gated(model, gates), torch.no_grad():
        out = model(ids)
        logits = out[0] if isinstance(out, tuple) else getattr(out, "logits", out)
        want = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    outputs = task.outputs(gates)
    assert torch.allclose(outputs, want, atol=1e-5)
    assert task.score(gates) == pytest.approx(-float(want.mean()), abs=1e-5)
    assert task.metric(outputs, torch.tensor([0, 0, 5])) == pytest.approx(-float(want[[0, 0, 5]].mean()), abs=1e-5)
    importance = P.head_importance(task, "gradient")
    batches = []
    for rows in ids.split(4):
        g = torch.ones(task.grid, requires_grad=True)
        with iv.gated(model, g):
            out = model(rows)
            logits = getattr(out, "logits", out)
            loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), rows[:, 1:])
        batches.append(torch.autograd.grad(loss, g)[0].abs())
    assert torch.allclose(importance, torch.stack(batches).mean(0), atol=1e-6)
    with pytest.raises(ValueError, match="token ids"):
        P.next_token_task(model, ids.float())


def test_joint_ablation_compares_a_group_with_the_sum_of_its_heads(toy_task):
    groups = [((0, 0), (0, 1)), ((0, 2),)]
    result = P.joint_ablation(toy_task, groups, n_boot=20)
    base = toy_task.score(toy_task.ones())
    single = {}
    for head in [(0, 0), (0, 1), (0, 2)]:
        gates = toy_task.ones()
        gates[head] = 0.0
        single[head] = toy_task.score(gates) - base
    both = toy_task.ones()
    both[0, 0] = both[0, 1] = 0.0
    assert float(result.joint[0]) == pytest.approx(toy_task.score(both) - base, abs=1e-6)
    assert float(result.additive[0]) == pytest.approx(single[0, 0] + single[0, 1], abs=1e-6)
    assert float(result.interaction[1]) == pytest.approx(0.0, abs=1e-9)  # one head: the group is its own sum
    assert float(result.low[1]) == pytest.approx(0.0, abs=1e-9) and float(result.high[1]) == pytest.approx(
        0.0, abs=1e-9
    )
    with pytest.raises(ValueError, match="non-empty"):
        P.joint_ablation(toy_task, [()])


def test_ablation_maps_give_p_values_from_their_standard_errors(lee):
    result = P.ablation_map(lee, "zero", n_boot=30)
    assert result.se.shape == result.delta.shape and bool((result.se >= 0).all())
    p = result.p_values()
    z = result.delta.double().abs() / result.se.double()
    assert torch.allclose(p, torch.erfc(z / math.sqrt(2)), atol=1e-9)


def test_a_curve_that_keeps_its_outputs_gives_an_interval_for_its_prunable_share(toy_task):
    plain = P.pruning_curve(toy_task, "loo", step=0.25)
    kept = P.pruning_curve(toy_task, "loo", step=0.25, keep_outputs=True)
    assert kept.scores == pytest.approx(plain.scores) and len(kept.outputs) == len(kept.scores)
    point = P.prunable_fraction(kept, 0.10, floor=kept.floor)
    low, high = P.prunable_interval(toy_task, kept, 0.10, n_boot=50)
    assert low <= high and {low, high} <= set(kept.fractions)

    # Every item the same: resampling cannot move the curve, so the interval is the point. (An item the model gets
    # more right with its heads than without, so that the curve has a gap to read.)
    def one_item(i):
        return P.ModelTask(
            toy_task.model,
            toy_task.inputs[i : i + 1].repeat(8, *[1] * (toy_task.inputs.dim() - 1)),
            toy_task.targets[i : i + 1].repeat(8, *[1] * (toy_task.targets.dim() - 1)),
            toy_task._metric,
            toy_task._loss,
        )

    same = next(t for t in map(one_item, range(len(toy_task.inputs))) if t.score(t.ones()) > t.score(t.ones() * 0))
    curve = P.pruning_curve(same, "random", step=0.25, keep_outputs=True)
    p = P.prunable_fraction(curve, 0.10, floor=curve.floor)
    assert P.prunable_interval(same, curve, 0.10, n_boot=20) == (pytest.approx(p), pytest.approx(p))
    assert 0.0 <= point <= 1.0
    with pytest.raises(ValueError, match="keep_outputs"):
        P.prunable_interval(toy_task, plain, 0.10)
