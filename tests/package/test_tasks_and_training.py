"""Fast tests of the chapter-1 building blocks: the two-relation task, the tiny model, the training loop, the plots."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # tests only: no display here

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from manyheads import viz
from manyheads.data.tasks import IGNORE_INDEX, TwoRelationTask, offset_targets
from manyheads.models import TinyAttentionModel, count_parameters
from manyheads.training import TrainConfig, readout_accuracy, train


def test_targets_are_the_tokens_at_the_stated_offsets():
    task = TwoRelationTask(vocab_size=50, seq_len=10, offsets=(1, 3))
    tokens, targets = task.sample(7, torch.Generator().manual_seed(0))
    assert tokens.shape == (7, 10) and targets.shape == (7, 10, 2)
    assert tokens.dtype == torch.long and tokens.min() >= 0 and tokens.max() < 50
    for b in range(7):
        for i in range(10):
            for r, offset in enumerate((1, 3)):
                expected = tokens[b, i - offset].item() if i >= 3 else IGNORE_INDEX
                assert targets[b, i, r].item() == expected


def test_offset_targets_order_and_unequal_offsets():
    tokens = torch.arange(8)[None]  # token value = its position
    targets = offset_targets(tokens, (4, 1, 2))
    assert targets[0, 4:].tolist() == [[i - 4, i - 1, i - 2] for i in range(4, 8)]
    assert (targets[0, :4] == IGNORE_INDEX).all()


@pytest.mark.parametrize("offsets", [(), (0,), (1, 10)])
def test_bad_offsets_are_rejected(offsets):
    with pytest.raises(ValueError):
        TwoRelationTask(vocab_size=4, seq_len=10, offsets=offsets)


def test_sampling_is_reproducible_and_device_independent():
    task = TwoRelationTask()
    a = task.sample(16, torch.Generator().manual_seed(3))
    b = task.sample(16, torch.Generator().manual_seed(3), device="cpu")
    c = task.sample(16, torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_model_shapes():
    model = TinyAttentionModel(vocab_size=11, seq_len=9, d_model=16, n_heads=4, n_relations=3)
    logits, weights = model(torch.randint(11, (5, 9)))
    assert logits.shape == (5, 9, 3, 11)
    assert weights.shape == (5, 4, 9, 9)
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, 4, 9))
    assert torch.all(weights.triu(diagonal=1) == 0), "the attention must be causal"
    with pytest.raises(ValueError):
        model(torch.randint(11, (1, 10)))  # longer than the position embedding


def test_model_is_causal_end_to_end():
    model = TinyAttentionModel(vocab_size=7, seq_len=8, d_model=8, n_heads=2)
    tokens = torch.randint(7, (1, 8))
    changed = tokens.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % 7
    with torch.no_grad():
        a, _ = model(tokens)
        b, _ = model(changed)
    torch.testing.assert_close(a[0, :5], b[0, :5])


@pytest.mark.parametrize("d_model", [8, 24, 32])
def test_parameter_count_does_not_depend_on_the_number_of_heads(d_model):
    counts = {h: count_parameters(TinyAttentionModel(32, 12, d_model, h)) for h in (1, 2, 4, 8) if d_model % h == 0}
    assert len(set(counts.values())) == 1, counts
    attention = count_parameters(TinyAttentionModel(32, 12, d_model, 2).attention)
    assert attention == 4 * d_model**2 + 4 * d_model


def test_relation_accuracy_ignores_unscored_positions():
    targets = torch.tensor([[[IGNORE_INDEX, IGNORE_INDEX], [1, 0], [2, 2]]])  # (1, 3, 2)
    logits = torch.zeros(1, 3, 2, 3)
    logits[0, 0, :, 0] = 5  # unscored position: anything goes
    logits[0, 1, 0, 1] = logits[0, 1, 1, 2] = 5  # relation 0 right, relation 1 wrong
    logits[0, 2, :, 2] = 5  # both right
    assert readout_accuracy(logits, targets).tolist() == [1.0, 0.5]


def test_training_is_seeded_and_learns():
    task = TwoRelationTask(vocab_size=6, seq_len=8, offsets=(1, 3))
    config = TrainConfig(steps=60, batch_size=32, eval_every=20, eval_size=128, seed=5)

    def make():
        return TinyAttentionModel(6, 8, 16, 2)

    first = train(make, task, config, device="cpu", progress=False)
    second = train(make, task, config, device="cpu", progress=False)
    other = train(make, task, TrainConfig(**{**config.__dict__, "seed": 6}), device="cpu", progress=False)
    assert first.train_loss == second.train_loss
    assert first.eval_accuracy == second.eval_accuracy
    assert first.train_loss != other.train_loss
    assert len(first.train_loss) == 60
    assert first.eval_steps == [0, 20, 40, 60]
    assert len(first.final_accuracy) == 2
    assert first.train_loss[-1] < first.train_loss[0]
    assert torch.get_num_threads() >= 1


def test_training_restores_the_thread_count():
    before = torch.get_num_threads()
    train(
        lambda: TinyAttentionModel(4, 6, 8, 1),
        TwoRelationTask(4, 6, (1, 2)),
        TrainConfig(steps=2, eval_every=1, eval_size=8),
        device="cpu",
        progress=False,
    )
    assert torch.get_num_threads() == before


def test_plots_and_table():
    ax = viz.attention_heatmap(torch.rand(4, 6), annotate=True)
    assert ax.get_images()[0].get_array().shape == (4, 6)
    fig = viz.head_heatmaps(np.random.rand(3, 5, 5))
    assert len(fig.axes) == 6  # three heatmaps and their colour bars
    ax = viz.learning_curves([0, 10, 20], {"a": np.ones((2, 3)), "b": np.zeros((1, 3))})
    assert len(ax.get_lines()) == 3 + 1  # a: its mean and two seeds; b (one seed): its mean only
    with pytest.raises(ValueError):
        viz.learning_curves([0, 10], {"a": np.ones((2, 3))})
    table = viz.html_table(["x", "y"], [[1, "<b>"]], caption="c")
    assert "<td>&lt;b&gt;</td>" in table and "<caption>c</caption>" in table
    plt.close("all")


def test_one_softmax_widget_builds():
    widget = viz.one_softmax_widget()
    assert [c.description for c in widget.children[:2]] == ["score gap", "other keys"]
    plt.close("all")


def test_for_task_sizes_the_model_from_the_task():
    task = TwoRelationTask(vocab_size=9, seq_len=7, offsets=(1, 2, 4))
    model = TinyAttentionModel.for_task(task, d_model=12, n_heads=3)
    logits, weights = model(task.sample(2)[0])
    assert tuple(logits.shape) == (2, 7, 3, 9) and tuple(weights.shape) == (2, 3, 7, 7)
    assert model.d_head == 4 and TinyAttentionModel.for_task(task, 12, 3, d_head=5).d_head == 5


def test_train_grid_gives_each_run_what_train_gives_it():
    from manyheads.training import train_grid

    task = TwoRelationTask(vocab_size=5, seq_len=6, offsets=(1, 2))
    config = TrainConfig(steps=6, batch_size=4, eval_every=3, eval_size=16)
    runs = train_grid(
        TinyAttentionModel.for_task, {"one": (8, 1), "two": (8, 2)}, task, config, seeds=(3, 4), progress=False
    )
    assert list(runs) == [("one", 3), ("one", 4), ("two", 3), ("two", 4)]
    alone = train(
        lambda: TinyAttentionModel.for_task(task, 8, 2),
        task,
        TrainConfig(**{**config.__dict__, "seed": 4}),
        progress=False,
    )
    assert runs["two", 4].train_loss == alone.train_loss and runs["two", 4].eval_accuracy == alone.eval_accuracy
    assert runs["two", 3].train_loss != alone.train_loss  # the seed is the run's own


def test_the_training_cache_gives_the_run_it_stored_and_misses_on_any_change(tmp_path, monkeypatch):
    import random

    from manyheads.training import CACHE_ENV

    task = TwoRelationTask(vocab_size=6, seq_len=8, offsets=(1, 3))
    config = TrainConfig(steps=12, batch_size=8, eval_every=6, eval_size=16, seed=2)

    def run(config=config, d_model=16):
        result = train(lambda: TinyAttentionModel(6, 8, d_model, 2), task, config, device="cpu", progress=False)
        return result, (torch.randn(4).tolist(), np.random.rand(), random.random())

    fresh, after_fresh = run()  # no cache: nothing written anywhere
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    stored, after_stored = run()
    assert len(list(tmp_path.glob("*.pt"))) == 1
    loaded, after_loaded = run()
    for a, b in ((fresh, stored), (stored, loaded)):
        assert a.train_loss == b.train_loss and a.eval_accuracy == b.eval_accuracy and a.eval_steps == b.eval_steps
        assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert after_fresh == after_stored == after_loaded  # the random numbers drawn after training are the same
    assert not loaded.model.training
    run(TrainConfig(**{**config.__dict__, "lr": 0.02}))
    run(TrainConfig(**{**config.__dict__, "seed": 3}))
    run(d_model=8)
    assert len(list(tmp_path.glob("*.pt"))) == 4  # each change is a new key


def test_a_model_with_hooks_is_trained_for_real_even_with_the_cache(tmp_path, monkeypatch):
    """A hook may record something at every step (chapter 3's symmetry runs): loading would skip those records."""
    from manyheads.training import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    task = TwoRelationTask(vocab_size=6, seq_len=8, offsets=(1, 3))
    config = TrainConfig(steps=5, batch_size=8, eval_every=5, eval_size=16)
    for _ in range(2):
        calls = []

        def make(calls=calls):
            model = TinyAttentionModel(6, 8, 16, 2)
            model.register_forward_pre_hook(lambda module, _: calls.append(module.training))
            return model

        train(make, task, config, device="cpu", progress=False)
        assert calls.count(True) == 5  # one per training step, both times
    assert list(tmp_path.glob("*.pt")) == []


def test_models_that_differ_only_in_head_count_get_different_cache_keys(tmp_path, monkeypatch):
    """Same weights, same repr (the parameter count does not depend on h), different models: never one key."""
    from manyheads.training import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    task = TwoRelationTask(vocab_size=6, seq_len=8, offsets=(1, 3))
    config = TrainConfig(steps=20, batch_size=8, eval_every=10, eval_size=16)
    runs = {h: train(lambda h=h: TinyAttentionModel(6, 8, 16, h), task, config, progress=False) for h in (1, 2, 4)}
    assert len(list(tmp_path.glob("*.pt"))) == 3
    monkeypatch.delenv(CACHE_ENV)
    for h, cached in runs.items():
        fresh = train(lambda h=h: TinyAttentionModel(6, 8, 16, h), task, config, progress=False)
        assert fresh.train_loss == cached.train_loss, h


def test_progress_bars_show_where_someone_watches_and_never_on_a_static_page(monkeypatch):
    """tools/build_book.py sets MANYHEADS_STATIC_BUILD for the kernels that execute the book: a bar saved into a
    static page is a frozen widget nobody can use (review finding 1-9; test_book.py checks the built pages). In
    Jupyter, Colab or a terminal it shows."""
    from manyheads.runtime import STATIC_BUILD, progress_bar

    monkeypatch.delenv(STATIC_BUILD, raising=False)
    assert progress_bar(range(3), "runs").disable is False
    assert progress_bar(range(3), "runs", show=False).disable is True
    monkeypatch.setenv(STATIC_BUILD, "1")
    assert progress_bar(range(3), "runs").disable is True
    assert list(progress_bar(range(3), "runs")) == [0, 1, 2]
