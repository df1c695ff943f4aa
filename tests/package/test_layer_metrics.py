"""Chapter 6's per-layer metrics: attention distance, previous-token, sink and positional scores, rollout, and the
per-layer summaries. Each is checked against its definition written out as loops, and on patterns whose answer is
known by hand."""

from __future__ import annotations

import pytest
import torch

import manyheads as mh
from manyheads.analysis.layers import (
    attention_rollout,
    layer_metrics,
    layer_summary,
    mean_attention_distance,
    positional_score,
    previous_token_score,
    sink_share,
)


def _random_weights(*shape: int, seed: int = 0, causal: bool = False) -> torch.Tensor:
    torch.manual_seed(seed)
    scores = torch.randn(*shape)
    if causal:
        scores = scores.masked_fill(~mh.causal_mask(shape[-1]), float("-inf"))
    return torch.softmax(scores, dim=-1)


def _shifted(seq: int, offset: int) -> torch.Tensor:
    """(seq, seq): each query i puts all its weight on key i + offset (on itself where that key does not exist)."""
    weights = torch.zeros(seq, seq)
    for i in range(seq):
        j = i + offset
        weights[i, j if 0 <= j < seq else i] = 1.0
    return weights


def test_mean_attention_distance_matches_its_definition():
    weights = _random_weights(3, 2, 6, 6)
    expected = torch.zeros(2)
    for b in range(3):
        for i in range(6):
            for j in range(6):
                expected += weights[b, :, i, j] * abs(i - j)
    torch.testing.assert_close(mean_attention_distance(weights), expected / (3 * 6))


def test_mean_attention_distance_on_known_patterns():
    seq = 5
    identity = torch.eye(seq)[None, None]
    uniform = torch.full((1, 1, seq, seq), 1 / seq)
    assert mean_attention_distance(identity).item() == 0.0
    # Spread evenly over a whole (bidirectional) input, the mean |i − j| is (seq² − 1) / (3·seq).
    assert mean_attention_distance(uniform).item() == pytest.approx((seq**2 - 1) / (3 * seq))
    two_back = _shifted(seq, -2)[None, None]
    assert mean_attention_distance(two_back).item() == pytest.approx(2 * 3 / seq)  # queries 2, 3, 4 look 2 back


def test_previous_token_score_matches_its_definition_and_the_threshold():
    weights = _random_weights(2, 3, 7, 7, causal=True)
    expected = torch.stack([weights[:, :, i, i - 1] for i in range(1, 7)], dim=-1).mean(dim=(0, 2))
    torch.testing.assert_close(previous_token_score(weights), expected)
    previous = torch.stack([_shifted(7, -1), _shifted(7, -2)])[None]
    scores = previous_token_score(previous)
    assert scores.tolist() == [1.0, 0.0]
    assert (scores >= mh.PREVIOUS_TOKEN_THRESHOLD).tolist() == [True, False]


def test_sink_share_defaults_to_the_first_token_and_takes_masks():
    weights = _random_weights(2, 3, 5, 5)
    torch.testing.assert_close(sink_share(weights), weights[..., 0].mean(dim=(0, 2)))
    special = torch.tensor([True, False, False, False, True])
    torch.testing.assert_close(sink_share(weights, special), (weights[..., 0] + weights[..., 4]).mean(dim=(0, 2)))
    per_row = torch.tensor([[True, False, False, False, False], [False, True, False, False, False]])
    expected = torch.stack([weights[0, :, :, 0].mean(-1), weights[1, :, :, 1].mean(-1)]).mean(0)
    torch.testing.assert_close(sink_share(weights, per_row), expected)
    with pytest.raises(ValueError, match="bool"):
        sink_share(weights, torch.tensor([1, 0, 0, 0, 0]))
    with pytest.raises(ValueError, match="batch"):
        sink_share(weights, per_row[:1].expand(3, 5))


def test_positional_score_finds_the_strongest_fixed_offset():
    seq = 9
    heads = torch.stack([_shifted(seq, -2), _shifted(seq, 1), torch.full((seq, seq), 1 / seq)])[None]
    scores = positional_score(heads)
    assert scores[:2].tolist() == [1.0, 1.0]
    assert scores[2].item() == pytest.approx(1 / seq)
    assert positional_score(heads, offsets=(-1,))[0].item() == 0.0
    with pytest.raises(ValueError, match="no offset"):
        positional_score(heads, offsets=(seq,))


def test_rollout_is_the_product_of_residual_mixed_layers_later_layers_on_the_left():
    weights = _random_weights(3, 2, 4, 5, 5, seed=3)  # (n_layers, batch, n_heads, seq, seq)
    eye = torch.eye(5)
    mixed = [0.5 * weights[layer].mean(1) + 0.5 * eye for layer in range(3)]
    expected = mixed[2] @ mixed[1] @ mixed[0]
    rollout = attention_rollout(weights)
    torch.testing.assert_close(rollout, expected)
    assert not torch.allclose(rollout, mixed[0] @ mixed[1] @ mixed[2])  # the order matters
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 5))
    torch.testing.assert_close(attention_rollout(weights[:1]), mixed[0])


@pytest.mark.parametrize(
    ("func", "bad", "error"),
    [
        (mean_attention_distance, torch.ones(2, 3, 3), ValueError),
        (mean_attention_distance, torch.ones(1, 1, 3, 4), ValueError),
        (previous_token_score, torch.ones(1, 1, 3, 3, dtype=torch.long), TypeError),
        (attention_rollout, torch.ones(1, 1, 3, 3), ValueError),
        (attention_rollout, [[1.0]], TypeError),
    ],
)
def test_bad_inputs_get_clear_errors(func, bad, error):
    with pytest.raises(error, match="weights"):
        func(bad)


def test_layer_metrics_of_a_stack_equal_the_per_batch_functions():
    weights = _random_weights(2, 3, 4, 6, 6, seed=5, causal=True)  # (n_layers, batch, n_heads, seq, seq)
    metrics = layer_metrics(weights)
    for layer in range(2):
        torch.testing.assert_close(metrics.distance[layer], mean_attention_distance(weights[layer]))
        torch.testing.assert_close(metrics.previous[layer], previous_token_score(weights[layer]))
        torch.testing.assert_close(metrics.sink[layer], sink_share(weights[layer]))
        torch.testing.assert_close(metrics.positional[layer], positional_score(weights[layer]))
        torch.testing.assert_close(metrics.entropy[layer], mh.mean_attention_entropy(weights[layer]).mean(0))
    assert metrics.distance.shape == (2, 4) and metrics.n_queries == 3 * 6


def test_layer_metrics_of_inputs_of_different_lengths_weigh_every_query_the_same():
    short = torch.stack([_shifted(3, -1)] * 2)[None].expand(2, 2, 3, 3)  # (n_layers, n_heads, 3, 3)
    long = torch.stack([_shifted(9, -1), torch.eye(9)])[None].expand(2, 2, 9, 9)
    metrics = layer_metrics([short, long], sinks=[torch.tensor([True, False, False]), torch.zeros(9, dtype=torch.bool)])
    # Head 1: distance 2/3 on the short input (3 queries), 0 on the long one (9 queries): (3·2/3 + 0) / 12.
    assert metrics.distance[0, 1].item() == pytest.approx((3 * (2 / 3)) / 12)
    assert metrics.sink[0, 0].item() == pytest.approx(3 * (2 / 3) / 12)  # queries 0 and 1 of the short input
    assert metrics.n_queries == 12
    assert metrics.previous_token_heads().tolist() == [[True, False], [True, False]]
    assert metrics.share_previous_token_heads().tolist() == [0.5, 0.5]
    assert metrics.share_positional_heads().tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="one per input"):
        layer_metrics([short, long], sinks=[torch.tensor([True, False, False])])
    with pytest.raises(ValueError, match="empty"):
        layer_metrics([])


def test_layer_summary_gives_mean_and_spread_over_heads():
    values = torch.tensor([[1.0, 3.0], [2.0, 2.0]])
    summary = layer_summary(values)
    assert summary["mean"].tolist() == [2.0, 2.0] and summary["std"].tolist() == [1.0, 0.0]
    assert summary["min"].tolist() == [1.0, 2.0] and summary["max"].tolist() == [3.0, 2.0]
    with pytest.raises(ValueError, match="n_layers, n_heads"):
        layer_summary(torch.ones(3))
