"""Chapter 3's formulas (computed a second way, from real modules and tensors), the sweep's configurations, the
low-rank bottleneck fit and the head-budget explorer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from manyheads.analysis import capacity
from manyheads.attention import MultiHeadAttention
from manyheads.costs import (
    attention_flops,
    attention_matrix_bytes,
    divisors,
    head_budget,
    head_dim,
    kv_cache_bytes,
    mha_param_count,
)


def test_head_dim_examples():
    assert head_dim(1024, 16) == 64 and type(head_dim(1024, 16)) is int
    assert head_dim(512, 8) == 64 and head_dim(384, 12) == 32 and head_dim(7, 7) == 1 and head_dim(7, 1) == 7


@pytest.mark.parametrize(
    "d_model, n_heads, message",
    [
        (512, 3, r"n_heads=3 does not divide d_model=512.*\[1, 2, 4, 8, 16, 32, 64, 128, 256, 512\]"),
        (12, 5, r"valid head counts for d_model=12 are \[1, 2, 3, 4, 6, 12\]"),
        (0, 4, "d_model must be a positive integer, got 0"),
        (64, -2, "n_heads must be a positive integer, got -2"),
        (10, 2.5, "n_heads must be a positive integer, got 2.5"),
        (True, 1, "d_model must be a positive integer"),
        (64, True, r"n_heads must be a positive integer, got True \(a bool, not an int\)"),
        ("64", 2, "d_model must be a positive integer"),
        ("1024", 16, r"d_model must be a positive integer, got '1024' \(a str, not an int\)"),
        (1024.0, 16, r"d_model must be a positive integer, got 1024.0 \(a float, not an int\)"),
        (1024, 16.0, r"n_heads must be a positive integer, got 16.0 \(a float, not an int\)"),
        (np.float64(1024), 16, "d_model must be a positive integer"),
        (torch.tensor(1024.0), 16, "d_model must be a positive integer"),
        (np.bool_(True), 1, "d_model must be a positive integer"),
    ],
)
def test_head_dim_rejects_invalid_combinations_with_a_helpful_message(d_model, n_heads, message):
    with pytest.raises(ValueError, match=message):
        head_dim(d_model, n_heads)


@pytest.mark.parametrize("d_model, n_heads", [(np.int64(1024), 16), (1024, np.int32(16)), (torch.tensor(1024), 16)])
def test_head_dim_takes_numpy_and_torch_integers_and_returns_a_python_int(d_model, n_heads):
    assert head_dim(d_model, n_heads) == 64 and type(head_dim(d_model, n_heads)) is int


@pytest.mark.parametrize(
    "call",
    [
        lambda: mha_param_count(512.0, 8),
        lambda: attention_flops(512, 8, 128.0),
        lambda: attention_matrix_bytes(8, "128"),
        lambda: kv_cache_bytes(1, 8, 64.0, 100),
        lambda: head_budget(512, 8, seq_len=1024.0),
        lambda: divisors(12.0),
    ],
)
def test_every_cost_function_refuses_non_integer_sizes(call):
    with pytest.raises(ValueError, match="must be a positive integer"):
        call()


def test_cost_functions_return_python_ints_for_numpy_integers():
    assert type(mha_param_count(np.int64(512), np.int64(8))) is int
    assert all(type(v) is int for v in attention_flops(np.int64(512), np.int64(8), np.int64(128)).values())
    budget = head_budget(np.int64(512), np.int64(8), seq_len=np.int64(64))
    assert all(type(getattr(budget, f)) is int for f in ("d_model", "n_heads", "seq_len", "d_head", "params", "flops"))


def test_divisors():
    assert divisors(1) == [1] and divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36] and divisors(13) == [1, 13]


@pytest.mark.parametrize("d_model, n_heads", [(512, 1), (512, 8), (512, 32), (24, 6), (10, 5), (8, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_param_count_matches_real_modules_and_is_independent_of_h(d_model, n_heads, bias):
    expected = 4 * d_model * d_model + (4 * d_model if bias else 0)
    assert mha_param_count(d_model, n_heads, bias) == expected
    torch_mha = nn.MultiheadAttention(d_model, n_heads, bias=bias)
    assert sum(p.numel() for p in torch_mha.parameters()) == expected
    assert sum(p.numel() for p in MultiHeadAttention(d_model, n_heads, bias=bias).parameters()) == expected


def test_param_count_with_grouped_key_value_heads():
    # Llama-2-70B: d_model 8192, 64 query heads, 8 KV heads, no biases: 151.0M, against 268.4M for full MHA (facts §2).
    assert round(mha_param_count(8192, 64, bias=False, n_kv_heads=8) / 1e6, 1) == 151.0
    assert round(mha_param_count(8192, 64, bias=False) / 1e6, 1) == 268.4
    mha = MultiHeadAttention(64, 8)
    kv = 2 * head_dim(64, 8)  # two KV heads
    mha.W_k, mha.W_v = nn.Linear(64, kv), nn.Linear(64, kv)
    assert mha_param_count(64, 8, n_kv_heads=2) == sum(p.numel() for p in mha.parameters())
    with pytest.raises(ValueError, match=r"n_kv_heads=3 does not divide n_heads=8.*\[1, 2, 4, 8\]"):
        mha_param_count(64, 8, n_kv_heads=3)


def test_bert_base_layer_count_from_facts():
    assert mha_param_count(768, 12, bias=False) == 2_359_296
    assert mha_param_count(768, 12) == 2_362_368


def _counted_flops(d_model, n_heads, seq, n_kv):
    """The same FLOPs counted from the tensor shapes of an actual grouped-query forward pass (2 per multiply-add)."""
    d_head = d_model // n_heads
    x = torch.randn(1, seq, d_model)
    total = 0

    def matmul(a, b):
        nonlocal total
        total += 2 * a.shape[-2] * a.shape[-1] * b.shape[-1] * (a.numel() // (a.shape[-2] * a.shape[-1]))
        return a @ b

    q = matmul(x, torch.randn(d_model, d_model)).view(1, seq, n_heads, d_head).transpose(1, 2)
    k = matmul(x, torch.randn(d_model, n_kv * d_head)).view(1, seq, n_kv, d_head).transpose(1, 2)
    v = matmul(x, torch.randn(d_model, n_kv * d_head)).view(1, seq, n_kv, d_head).transpose(1, 2)
    k, v = k.repeat_interleave(n_heads // n_kv, 1), v.repeat_interleave(n_heads // n_kv, 1)
    scores = matmul(q, k.transpose(-2, -1))
    weights = scores.softmax(-1)
    total += 5 * weights.numel()
    out = matmul(weights, v).transpose(1, 2).reshape(1, seq, d_model)
    matmul(out, torch.randn(d_model, d_model))
    return total


@pytest.mark.parametrize("d_model, n_heads, seq, n_kv", [(16, 1, 5, 1), (16, 4, 7, 4), (24, 6, 3, 2), (8, 8, 4, 1)])
def test_flops_match_a_count_from_tensor_shapes(d_model, n_heads, seq, n_kv):
    flops = attention_flops(d_model, n_heads, seq, n_kv_heads=n_kv)
    assert flops["total"] == _counted_flops(d_model, n_heads, seq, n_kv)
    assert flops["total"] == sum(v for k, v in flops.items() if k != "total")


def test_matrix_products_cost_the_same_for_every_head_count_and_only_the_softmax_grows():
    by_h = {h: attention_flops(512, h, 128) for h in divisors(512)}
    for key in ("projections", "scores", "weighted_sum"):
        assert len({f[key] for f in by_h.values()}) == 1
    assert [by_h[h]["softmax"] for h in (1, 2, 4)] == [5 * 128 * 128 * h for h in (1, 2, 4)]


def test_memory_formulas_against_real_tensors():
    mha = MultiHeadAttention(32, 4)
    _, weights = mha(torch.randn(3, 10, 32))
    assert attention_matrix_bytes(4, 10, batch=3) == weights.numel() * weights.element_size()
    # Llama-2-7B: 32 layers, 32 KV heads of 128, 4096 tokens, fp16: 2 GiB per sequence.
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 2**30
    k = torch.zeros(2, 8, 100, 64, dtype=torch.float16)  # (batch, n_kv_heads, seq, d_head)
    assert kv_cache_bytes(1, 8, 64, 100, batch=2) == 2 * k.numel() * k.element_size()
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        kv_cache_bytes(1, 8, 64, 0)


def test_head_budget_combines_the_formulas_and_rejects_invalid_configurations():
    b = head_budget(512, 8, n_kv_heads=2, seq_len=1024)
    assert (b.d_head, b.n_kv_heads) == (64, 2)
    assert b.params == mha_param_count(512, 8, n_kv_heads=2)
    assert b.kv_cache_bytes == kv_cache_bytes(1, 2, 64, 1024) and b.low_rank_bottleneck
    assert head_budget(512, 8, seq_len=64).low_rank_bottleneck is False
    # the softmax's row shift is worth one dimension: d_head = n - 1 reaches every pattern, n - 2 does not
    assert head_budget(512, 8, seq_len=65).low_rank_bottleneck is False
    assert head_budget(512, 8, seq_len=66).low_rank_bottleneck is True
    assert head_budget(512, 8).n_kv_heads == 8
    with pytest.raises(ValueError, match="does not divide d_model"):
        head_budget(512, 6)
    with pytest.raises(ValueError, match="n_kv_heads=16 does not divide n_heads=8"):
        head_budget(512, 8, n_kv_heads=16)


def test_sweep_configs_shapes():
    configs = capacity.sweep_configs(16, seeds=(0, 1, 2))
    assert len(configs) == 5 * 3
    assert [c[0] for c in configs[::3]] == [1, 2, 4, 8, 16] and [c[1] for c in configs[::3]] == [16, 8, 4, 2, 1]
    assert [c[2] for c in configs[:3]] == [0, 1, 2]
    assert capacity.sweep_configs(12, seeds=(5,), head_counts=[1, 3]) == [(1, 12, 5), (3, 4, 5)]
    with pytest.raises(ValueError, match="does not divide"):
        capacity.sweep_configs(12, head_counts=[5])
    with pytest.raises(ValueError, match="at least one seed"):
        capacity.sweep_configs(12, seeds=())


def test_run_head_sweep_trains_one_model_per_configuration_reproducibly():
    from manyheads.data.tasks import TwoRelationTask
    from manyheads.training import TrainConfig

    task = TwoRelationTask(vocab_size=6, seq_len=6, offsets=(1, 2))
    config = TrainConfig(steps=5, eval_every=5, eval_size=16, batch_size=4)
    records = capacity.run_head_sweep(task, 4, config, seeds=(0, 1), head_counts=[1, 4], device="cpu", progress=False)
    assert [(r.n_heads, r.d_head, r.seed) for r in records] == [(1, 4, 0), (1, 4, 1), (4, 1, 0), (4, 1, 1)]
    assert all(len(r.accuracy) == 2 and 0 <= r.mean_accuracy <= 1 for r in records)
    again = capacity.run_head_sweep(task, 4, config, seeds=(0, 1), head_counts=[1, 4], device="cpu", progress=False)
    assert [r.accuracy for r in again] == [r.accuracy for r in records]
    assert records[0].accuracy != records[1].accuracy or records[0].final_loss != records[1].final_loss


def test_random_attention_pattern_rows_are_distributions():
    p = capacity.random_attention_pattern(6, 0.5, seed=3)
    assert p.shape == (6, 6) and (p > 0).all() and torch.allclose(p.sum(-1), torch.ones(6, dtype=torch.float64))
    assert torch.equal(p, capacity.random_attention_pattern(6, 0.5, seed=3))


def test_low_rank_bottleneck_fit():
    n = 6
    x = torch.randn(n, 2 * n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    target = capacity.random_attention_pattern(n, 0.5, seed=1)
    narrow = capacity.fit_attention_pattern(x, target, 1)
    below = capacity.fit_attention_pattern(x, target, n - 2)
    wide = capacity.fit_attention_pattern(x, target, n)
    assert wide["tv"] < 1e-4 < 1e-3 < below["tv"] < narrow["tv"]
    assert 0 <= narrow["max_abs"] <= 1 and narrow["kl"] > 0
    with pytest.raises(ValueError, match="target"):
        capacity.fit_attention_pattern(x, target[:3], 2)


def test_head_budget_explorer_shows_the_numbers_or_explains_the_error():
    from manyheads.viz import widgets as explorer

    page = explorer.head_budget_html(512, 8, 8, seq_len=1024)
    assert "<td>64</td>" in page and "1,050,624" in page and "multi-head" in page and "Invalid" not in page
    assert "4 MiB" in explorer.head_budget_html(512, 1, seq_len=1024)  # one 1024 × 1024 float32 matrix
    assert "32 MiB" in page  # eight of them
    assert "grouped-query" in explorer.head_budget_html(512, 8, 2)
    bad = explorer.head_budget_html(512, 6)
    assert "Invalid combination" in bad and "does not divide" in bad and "[1, 2, 4, 8" in bad
    assert "n_kv_heads=3 does not divide n_heads=8" in explorer.head_budget_html(512, 8, 3)
    assert explorer.format_bytes(2 * 2**30) == "2 GiB" and explorer.format_count(1_050_624) == "1.05 M"
    widget = explorer.head_budget_widget()
    assert [c.description for c in widget.children[:5]] == [
        "d_model",
        "n_heads",
        "n_kv_heads",
        "sequence length",
        "layers",
    ]
