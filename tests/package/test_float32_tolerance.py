"""tests/helpers/tolerances.py: the float32 tolerance grows with the outputs' magnitude and the computation's depth
and width, and stays tight enough that real bugs in a real model exceed it by orders of magnitude."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from helpers.tolerances import UNIT_ROUNDOFF, float32_tolerance

from manyheads import interventions as iv
from manyheads.analysis import speed
from manyheads.models import load_encoder

TEXTS = ["The cat sat on the mat.", "When Mary met John, she gave him her book because he had asked for it."]


def test_the_tolerance_scales_with_magnitude_depth_and_width():
    x = torch.tensor([0.5, -2.0, 1.0])
    base = float32_tolerance(x, depth=1, width=1)
    assert base == pytest.approx(8 * UNIT_ROUNDOFF * 2.0)  # 2 = max |reference|
    assert float32_tolerance(10 * x, depth=1, width=1) == pytest.approx(10 * base)
    assert float32_tolerance(x, depth=4, width=1) == pytest.approx(2 * base)
    assert float32_tolerance(x, depth=1, width=100) == pytest.approx(10 * base)
    assert float32_tolerance([x, 3 * x, torch.empty(0)], depth=1, width=1) == pytest.approx(3 * base)
    with pytest.raises(ValueError, match="depth and width must be at least 1"):
        float32_tolerance(x, depth=0, width=16)


@pytest.fixture(scope="module")
def minilm():
    encoder, tokenizer = load_encoder()
    batch = tokenizer(TEXTS)
    with torch.no_grad():
        reference = encoder(**batch.inputs()).last_hidden_state
    return encoder, batch, reference


def _largest_difference(model, batch, reference) -> float:
    with torch.no_grad():
        return float((model(**batch.inputs()).last_hidden_state - reference).abs().max())


def test_pruned_minilm_is_within_and_real_bugs_are_far_outside(minilm):
    encoder, batch, reference = minilm
    tolerance = float32_tolerance(reference, depth=encoder.config.n_layers, width=encoder.config.d_ff)
    assert 1e-4 < tolerance < 1e-3  # outputs up to ~6, 6 layers, d_ff 1536
    # The same function computed another way: 18 heads masked against the same heads removed (padded batch of two).
    keep = iv.prune_mask((11 - torch.arange(12.0))[None, :] * 6 + torch.arange(6.0)[:, None], 0.25)
    masked = speed._masked_copy(encoder, keep, torch.device("cpu"))
    pruned = iv.remove_heads(encoder, ~keep)
    with torch.no_grad():
        expected = masked(**batch.inputs()).last_hidden_state
    assert _largest_difference(pruned, batch, expected) < tolerance
    # A missing 1/sqrt(d_k) is W_q (and its bias) multiplied by sqrt(d_head): scores sqrt(32) times too large.
    unscaled = copy.deepcopy(encoder)
    with torch.no_grad():
        for layer in iv.attention_layers(unscaled):
            layer.W_q.weight.mul_(math.sqrt(layer.d_head))
            layer.W_q.bias.mul_(math.sqrt(layer.d_head))
    assert _largest_difference(unscaled, batch, reference) > 1000 * tolerance
    # One head of 72 dropped (gate 0), in the middle of the stack.
    with iv.ablated(encoder, (3, 5)):
        assert _largest_difference(encoder, batch, reference) > 100 * tolerance
