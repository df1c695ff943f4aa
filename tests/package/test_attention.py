"""manyheads.attention against torch's own implementations, on several shapes and masks."""

import math

import pytest
import torch
import torch.nn.functional as F

import manyheads as mh
from manyheads.attention import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

# (leading dims, seq_q, seq_k, d_k, d_v): batch > 1, extra leading dims, seq_q != seq_k, d_v != d_k, odd sizes.
SHAPES = [((1,), 1, 1, 1, 1), ((2,), 5, 5, 8, 8), ((3,), 4, 7, 6, 3), ((2, 3), 7, 2, 5, 9), ((), 3, 11, 4, 4)]


def _random_mask(lead, seq_q, seq_k, generator):
    """Random boolean mask with at least one allowed key per query row."""
    mask = torch.rand(*lead, seq_q, seq_k, generator=generator) > 0.4
    mask[..., torch.randint(seq_k, (1,), generator=generator)] = True
    return mask


@pytest.mark.parametrize("lead, seq_q, seq_k, d_k, d_v", SHAPES)
@pytest.mark.parametrize("mask_kind", ["none", "full", "broadcast_row", "causal_like"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_matches_torch(lead, seq_q, seq_k, d_k, d_v, mask_kind, dtype):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(*lead, seq_q, d_k, generator=g, dtype=dtype)
    k = torch.randn(*lead, seq_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(*lead, seq_k, d_v, generator=g, dtype=dtype)
    mask = {
        "none": None,
        "full": _random_mask(lead, seq_q, seq_k, g),
        # one row of allowed keys shared by every query and every leading index
        "broadcast_row": _random_mask((), 1, seq_k, g),
        "causal_like": torch.ones(seq_q, seq_k, dtype=torch.bool).tril(diagonal=max(seq_k - seq_q, 0)),
    }[mask_kind]
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert out.shape == (*lead, seq_q, d_v)
    assert weights.shape == (*lead, seq_q, seq_k)
    torch.testing.assert_close(out, expected, atol=tol, rtol=tol)
    # Weights are probabilities over the keys, zero where masked.
    torch.testing.assert_close(weights.sum(-1), torch.ones(*lead, seq_q, dtype=dtype), atol=tol, rtol=tol)
    if mask is not None:
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_sdpa_weights_are_the_scaled_softmax():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 16, generator=g) for _ in range(3))
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1)
    torch.testing.assert_close(weights, expected)


def test_fully_masked_row_gives_zeros_like_torch():
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(1, 3, 4, generator=g), torch.randn(1, 5, 4, generator=g), torch.randn(1, 5, 2, generator=g)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (weights[0, 1] == 0).all() and (out[0, 1] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_sdpa_rejects_bad_input_with_clear_messages():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match="same last dimension"):
        scaled_dot_product_attention(q, torch.randn(2, 5, 3), v)
    with pytest.raises(ValueError, match="same seq_k"):
        scaled_dot_product_attention(q, k, torch.randn(2, 4, 6))
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, torch.ones(3, 5))


def test_split_heads_gives_each_head_its_contiguous_features():
    batch, seq, n_heads, d_head = 2, 3, 4, 5
    x = torch.arange(batch * seq * n_heads * d_head, dtype=torch.float32).reshape(batch, seq, n_heads * d_head)
    heads = split_heads(x, n_heads)
    assert heads.shape == (batch, n_heads, seq, d_head)
    for i in range(n_heads):
        torch.testing.assert_close(heads[:, i], x[..., i * d_head : (i + 1) * d_head])
    torch.testing.assert_close(merge_heads(heads), x)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x, 3)


def test_masks_helpers():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    pm = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert pm.shape == (2, 1, 1, 3) and pm.dtype == torch.bool
    assert pm[1, 0, 0].tolist() == [True, False, False]


# (d_model, n_heads, batch, seq_q, seq_k, bias)
MHA_CASES = [
    (8, 1, 1, 4, 4, True),
    (12, 3, 2, 5, 7, True),
    (16, 4, 3, 6, 6, False),
    (30, 5, 2, 3, 9, True),
    (16, 16, 2, 4, 4, True),  # d_head = 1
]


@pytest.mark.parametrize("d_model, n_heads, batch, seq_q, seq_k, bias", MHA_CASES)
@pytest.mark.parametrize("mask_kind", ["none", "shared", "per_batch", "padding"])
def test_multihead_matches_torch_multiheadattention(d_model, n_heads, batch, seq_q, seq_k, bias, mask_kind):
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True).eval()
    if bias:  # torch initialises biases to zero; make them count
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
    mine = MultiHeadAttention.from_torch(reference)
    g = torch.Generator().manual_seed(3)
    query = torch.randn(batch, seq_q, d_model, generator=g)
    key = torch.randn(batch, seq_k, d_model, generator=g)
    value = torch.randn(batch, seq_k, d_model, generator=g)
    mine_mask, torch_kwargs = None, {}
    if mask_kind == "shared":
        mine_mask = _random_mask((), seq_q, seq_k, g)
        torch_kwargs = {"attn_mask": ~mine_mask}  # torch's boolean attn_mask means "not allowed"
    elif mask_kind == "per_batch":
        mine_mask = _random_mask((batch,), seq_q, seq_k, g)
        torch_kwargs = {"attn_mask": (~mine_mask).repeat_interleave(n_heads, dim=0)}
    elif mask_kind == "padding":
        is_token = torch.ones(batch, seq_k, dtype=torch.bool)
        if seq_k > 2:
            is_token[0, -2:] = False  # the first sequence ends in two padding positions
        mine_mask = padding_mask(is_token)
        torch_kwargs = {"key_padding_mask": ~is_token}
    out, weights = mine(query, key, value, mask=mine_mask)
    ref_out, ref_weights = reference(query, key, value, need_weights=True, average_attn_weights=False, **torch_kwargs)
    assert out.shape == (batch, seq_q, d_model)
    assert weights.shape == (batch, n_heads, seq_q, seq_k)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-5)


def test_multihead_dv_differs_from_dk_and_cross_attention_shapes():
    mha = MultiHeadAttention(d_model=10, n_heads=2, d_head=3, d_value=7)
    out, weights = mha(torch.randn(4, 5, 10), torch.randn(4, 9, 10))
    assert out.shape == (4, 5, 10) and weights.shape == (4, 2, 5, 9)
    assert mha.W_v.weight.shape == (14, 10) and mha.W_o.weight.shape == (10, 14)
    # Same thing computed head by head with the from-scratch formula.
    x_q, x_k = torch.randn(1, 5, 10), torch.randn(1, 9, 10)
    out, _ = mha(x_q, x_k)
    heads = []
    for h in range(2):
        q = x_q @ mha.W_q.weight[h * 3 : (h + 1) * 3].T + mha.W_q.bias[h * 3 : (h + 1) * 3]
        k = x_k @ mha.W_k.weight[h * 3 : (h + 1) * 3].T + mha.W_k.bias[h * 3 : (h + 1) * 3]
        v = x_k @ mha.W_v.weight[h * 7 : (h + 1) * 7].T + mha.W_v.bias[h * 7 : (h + 1) * 7]
        heads.append(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(3), -1) @ v)
    torch.testing.assert_close(out, mha.W_o(torch.cat(heads, -1)), atol=1e-6, rtol=1e-5)


def test_parameter_count_is_independent_of_n_heads():
    d_model = 48
    counts = {h: sum(p.numel() for p in MultiHeadAttention(d_model, h).parameters()) for h in (1, 2, 3, 4, 6, 8, 48)}
    assert set(counts.values()) == {4 * d_model**2 + 4 * d_model}


def test_head_gates_mask_heads_and_carry_gradients():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=3)
    x = torch.randn(2, 4, 12)
    full, _ = mha(x)
    # Gate 0 on head 1 equals zeroing that head's slice of W_o's input.
    mha.head_gates[1] = 0.0
    gated, _ = mha(x)
    reference = MultiHeadAttention(12, 3)
    reference.load_state_dict(mha.state_dict())
    with torch.no_grad():
        reference.W_o.weight[:, 4:8] = 0
    torch.testing.assert_close(gated, reference(x)[0])
    assert not torch.allclose(gated, full)
    # Gradients with respect to the gates (Michel et al. importance).
    mha.head_gates.fill_(1.0)
    mha.head_gates.requires_grad_(True)
    mha(x)[0].pow(2).sum().backward()
    assert mha.head_gates.grad is not None and mha.head_gates.grad.shape == (3,)
    assert (mha.head_gates.grad != 0).all()
    # The gates are not trainable parameters and are not saved with the weights.
    assert "head_gates" not in mha.state_dict()
    assert all(p is not mha.head_gates for p in mha.parameters())


def test_multihead_errors_are_clear():
    with pytest.raises(ValueError, match="does not divide"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(batch, seq, d_model=8\)"):
        mha(torch.randn(2, 3, 7))


def test_device_prefers_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert mh.device() == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert mh.device() == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert mh.device() == torch.device("cuda")


def test_seed_everything_repeats():
    mh.seed_everything(7)
    a = torch.randn(5)
    mh.seed_everything(7)
    assert torch.equal(a, torch.randn(5))


def _grouped(d_model=24, n_heads=6, n_kv_heads=2, d_head=4):
    torch.manual_seed(0)
    return MultiHeadAttention(d_model, n_heads, d_head=d_head, n_kv_heads=n_kv_heads)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3, 6])
def test_grouped_query_attention_equals_mha_with_repeated_kv_weights(n_kv_heads):
    gqa = _grouped(n_kv_heads=n_kv_heads)
    group, d_head = 6 // n_kv_heads, gqa.d_head
    assert gqa.W_k.weight.shape == gqa.W_v.weight.shape == (n_kv_heads * d_head, 24)
    mha = MultiHeadAttention(24, 6, d_head=d_head)
    with torch.no_grad():
        mha.W_q.load_state_dict(gqa.W_q.state_dict())
        mha.W_o.load_state_dict(gqa.W_o.state_dict())
        for mine, shared in ((mha.W_k, gqa.W_k), (mha.W_v, gqa.W_v)):
            # K/V head j, rows [j·d_head, (j+1)·d_head), serves query heads j·group ... (j+1)·group - 1.
            mine.weight.copy_(shared.weight.reshape(n_kv_heads, d_head, 24).repeat_interleave(group, 0).reshape(-1, 24))
            mine.bias.copy_(shared.bias.reshape(n_kv_heads, d_head).repeat_interleave(group, 0).reshape(-1))
    x = torch.randn(2, 5, 24)
    mask = causal_mask(5)
    out, weights = gqa(x, mask=mask)
    ref_out, ref_weights = mha(x, mask=mask)
    assert weights.shape == (2, 6, 5, 5)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights, ref_weights)


def test_multi_query_attention_shares_one_key_and_value_for_all_heads():
    mqa = _grouped(n_kv_heads=1)
    assert mqa.n_kv_heads == 1 and mqa.W_k.out_features == mqa.d_head
    x = torch.randn(1, 4, 24)
    mqa.W_q.weight.data[:] = mqa.W_q.weight.data[:4].repeat(6, 1)  # same query for every head
    mqa.W_q.bias.data[:] = mqa.W_q.bias.data[:4].repeat(6)
    _, weights = mqa(x)
    torch.testing.assert_close(weights, weights[:, :1].expand_as(weights))  # so the same pattern in every head


@pytest.mark.parametrize("n_kv_heads", [4, 0, 7])
def test_n_kv_heads_must_divide_n_heads(n_kv_heads):
    with pytest.raises(ValueError, match=rf"n_kv_heads={n_kv_heads} must be positive and divide n_heads=6"):
        MultiHeadAttention(24, 6, n_kv_heads=n_kv_heads)
