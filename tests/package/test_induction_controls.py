"""Chapter 6's controls for induction heads in a pretrained model: inputs where position cannot find the target
(mh.shifted_repeats), the induction score with the target found from the tokens (mh.token_induction_score), random
heads from the same layers (mh.same_layer_heads) and the bootstrap interval of a mean (mh.bootstrap_mean)."""

from __future__ import annotations

import pytest
import torch

import manyheads as mh

VOCAB = torch.arange(10, 60)
BOS = 0


def _content_head(tokens: torch.Tensor) -> torch.Tensor:
    """(batch, 1, seq, seq): a perfect induction head found by content (all weight on the token after the earlier
    occurrence of the current token; on BOS when there is none)."""
    batch, seq = tokens.shape
    w = torch.zeros(batch, 1, seq, seq)
    for b in range(batch):
        for i in range(seq):
            earlier = [j for j in range(i) if tokens[b, j] == tokens[b, i]]
            w[b, 0, i, earlier[0] + 1 if earlier else 0] = 1.0
    return w


def _offset_head(seq: int, back: int, batch: int) -> torch.Tensor:
    """(batch, 1, seq, seq): a head that always looks ``back`` tokens back (on BOS where it cannot)."""
    w = torch.zeros(batch, 1, seq, seq)
    for i in range(seq):
        w[:, 0, i, i - back if i >= back else 0] = 1.0
    return w


def test_shifted_repeats_hold_two_copies_at_a_distance_that_changes_from_row_to_row():
    ids, second = mh.shifted_repeats(6, vocabulary=VOCAB, bos_id=BOS, seeds=range(20), max_shift=5)
    assert ids.shape == (20, 1 + 5 + 12) and (ids[:, 0] == BOS).all()
    starts = set()
    for row, s in zip(ids, second.tolist()):
        r = row[s : s + 6]
        first = s - 6 - torch.arange(1, 6)  # where the first copy may start: gap 1 … 5
        found = [int(f) for f in first if torch.equal(row[f : f + 6], r)]
        assert len(found) == 1, "the second copy repeats the first, at a gap of 1 to 5 filler tokens"
        starts.add(s - found[0])
        assert not torch.isin(row[1 : found[0]], r).any() and not torch.isin(row[found[0] + 6 : s], r).any()
    assert len(starts) > 2, "the distance between the copies varies"
    again, _ = mh.shifted_repeats(6, vocabulary=VOCAB, bos_id=BOS, seeds=[3], max_shift=5)
    assert torch.equal(again[0], ids[3])  # a row depends on its seed only
    with pytest.raises(ValueError):
        mh.shifted_repeats(6, vocabulary=VOCAB, bos_id=BOS, seeds=[], max_shift=5)
    with pytest.raises(ValueError):
        mh.shifted_repeats(6, vocabulary=VOCAB, bos_id=BOS, seeds=[0], max_shift=0)


def test_token_induction_score_equals_the_position_score_on_plain_repeats():
    half = 7
    r = torch.randperm(50)[:half] + 10  # no token twice inside r
    tokens = torch.cat([torch.tensor([BOS]), r, r])[None]
    weights = torch.softmax(torch.randn(1, 3, 2 * half + 1, 2 * half + 1), -1)
    second = torch.zeros_like(tokens, dtype=torch.bool)
    second[:, half + 1 :] = True
    assert torch.allclose(mh.token_induction_score(weights, tokens, second), mh.induction_score(weights, half))
    assert torch.allclose(mh.token_induction_score(weights, tokens), mh.induction_score(weights, half))


def test_a_fixed_offset_head_passes_the_plain_test_and_fails_the_shifted_one():
    half = 6
    plain = mh.repeated_random_tokens(half, vocabulary=VOCAB, bos_id=BOS, seeds=range(8))
    offset = _offset_head(plain.shape[1], half - 1, len(plain))
    assert mh.induction_score(offset, half).item() == pytest.approx(1.0)  # position arithmetic looks perfect here
    ids, second = mh.shifted_repeats(half, vocabulary=VOCAB, bos_id=BOS, seeds=range(8), max_shift=6)
    queries = torch.arange(ids.shape[1])[None, :] >= second[:, None]
    moved = mh.token_induction_score(_offset_head(ids.shape[1], half - 1, len(ids)), ids, queries)
    assert moved.item() < 0.2  # … and fails where the copy is not half − 1 tokens back
    content = mh.token_induction_score(_content_head(ids), ids, queries)
    assert content.item() == pytest.approx(1.0)  # a head that matches tokens passes both


def test_token_induction_score_counts_every_earlier_occurrence_and_checks_its_inputs():
    tokens = torch.tensor([[0, 5, 6, 5, 6, 5]])  # 5 at 1, 3, 5: the query at 5 has targets 2 and 4
    w = torch.zeros(1, 1, 6, 6)
    w[0, 0, :, 0] = 1.0
    w[0, 0, 5] = torch.tensor([0.0, 0.0, 0.3, 0.0, 0.5, 0.2])
    only_last = torch.zeros(1, 6, dtype=torch.bool)
    only_last[0, 5] = True
    assert mh.token_induction_score(w, tokens, only_last).item() == pytest.approx(0.8)
    with pytest.raises(ValueError):
        mh.token_induction_score(w, tokens[:, :5])
    with pytest.raises(ValueError):
        mh.token_induction_score(w[:, :, :3, :3], torch.tensor([[0, 1, 2]]))  # nothing repeats


def test_same_layer_heads_draw_from_the_chosen_layers_only_and_never_a_chosen_head():
    chosen = [(18, 6), (17, 3), (17, 4), (23, 2)]
    draws = mh.same_layer_heads(chosen, n_heads=9, n_draws=50, seed=1)
    assert len(draws) == 50
    for picked in draws:
        assert [layer for layer, _ in picked] == [18, 17, 17, 23]
        assert not set(picked) & set(chosen) and len(set(picked)) == len(picked)
    assert len({tuple(p) for p in draws}) > 10  # they vary
    assert mh.same_layer_heads(chosen, 9, 5, seed=1) == draws[:5]  # seeded
    with pytest.raises(ValueError):
        mh.same_layer_heads([(0, 0), (0, 1)], n_heads=2, n_draws=1)  # layer 0 has no free head


def test_bootstrap_mean_covers_the_mean_and_narrows_with_more_items():
    gen = torch.Generator().manual_seed(0)
    small = torch.randn(10, generator=gen) + 1.0
    large = torch.randn(400, generator=gen) + 1.0
    m, lo, hi = mh.bootstrap_mean(small)
    assert lo <= m <= hi and m == pytest.approx(small.mean().item())
    _, lo2, hi2 = mh.bootstrap_mean(large)
    assert lo2 < 1.0 < hi2 and hi2 - lo2 < hi - lo
    assert mh.bootstrap_mean(small, seed=3) == mh.bootstrap_mean(small, seed=3)
    with pytest.raises(ValueError):
        mh.bootstrap_mean([1.0])


def test_induction_runs_collects_the_background_runs_of_the_same_jobs_or_trains_them_here(monkeypatch):
    from manyheads.analysis import induction

    class Started:
        def results(self):
            return ["from the background"]

    jobs = [{"seed": 3, "n_layers": 1, "device": "cpu"}]
    monkeypatch.setitem(induction._STARTED, induction._jobs_key(jobs), Started())
    assert mh.induction_runs([dict(job) for job in jobs]) == ["from the background"]
    trained = []
    monkeypatch.setattr(induction, "train_induction_model", lambda **job: trained.append(job) or job["seed"])
    assert mh.induction_runs(jobs) == [3]  # collected once; asked again, it trains here
    assert trained == [{"seed": 3, "n_layers": 1, "device": "cpu", "progress": False}]
