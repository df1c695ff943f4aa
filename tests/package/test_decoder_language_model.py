"""manyheads.analysis.language_model: the course's decoder is a working language model (issue 11, part 4).

On the real SmolLM2 decoder: its next-token loss on real English (Lee's background news, 4 windows of 64 tokens,
BOS from the GGUF metadata in front) is at most 0.7 x its loss on the same tokens shuffled; on [BOS] + r + r, r 100
random ordinary tokens, its loss on the second copy is at most 0.3 x its loss on the first, for each of 8 seeds.
That is 2 x 4 x 65 + 8 x 201 = 2,128 tokens through the 30-layer decoder, plus loading it (~10 s of CPU) and reading
the GGUF metadata for the BOS id (~5 s): 55 s of CPU time in all, measured on a 2-core machine that other jobs kept
busy. The helpers are checked on a tiny random decoder, which also shows that the two thresholds are not met by a
model that knows nothing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import manyheads as mh
from manyheads.analysis import language_model as lm
from manyheads.models.llama import LlamaConfig, LlamaDecoder, load_decoder

WINDOW, N_WINDOWS = 64, 4  # 256 tokens of real text
LENGTH, SEEDS = 100, range(8)  # r: 100 random tokens, 8 seeds


@pytest.fixture(scope="module")
def decoder():
    model, tokenizer = load_decoder()
    return model, tokenizer, lm.gguf_bos_id()


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    shape = dict(vocab_size=97, d_model=32, d_ff=64, n_layers=2, n_heads=4, n_kv_heads=2, d_head=8)
    config = LlamaConfig(**shape, rms_norm_eps=1e-5, rope_theta=10000.0)
    return LlamaDecoder(config).eval()


# ---- the real decoder ----------------------------------------------------------------------------------------------


def test_the_bos_id_comes_from_the_gguf_metadata(decoder):
    _, tokenizer, bos = decoder
    assert bos == 1 and tokenizer.id_to_token(bos) == "<|im_start|>"


def test_real_english_is_far_more_predictable_than_the_same_tokens_shuffled(decoder):
    model, tokenizer, bos = decoder
    text = mh.lee_background_text()
    result = lm.real_vs_shuffled_loss(model, tokenizer, text, window=WINDOW, n_windows=N_WINDOWS, bos_id=bos)
    print(f"\nreal {result.real:.3f} nats, shuffled {result.shuffled:.3f} nats, ratio {result.ratio:.3f}")
    assert result.n_tokens == WINDOW * N_WINDOWS and result.window == WINDOW
    assert result.real <= 0.7 * result.shuffled
    assert result.real < math.log(model.config.vocab_size) / 2  # far better than guessing uniformly


def test_the_second_copy_of_random_tokens_is_predicted_from_the_first(decoder):
    model, tokenizer, bos = decoder
    result = lm.repeated_tokens_loss(model, tokenizer, length=LENGTH, seeds=SEEDS, bos_id=bos)
    print("\nfirst copy ", [round(x, 2) for x in result.first.tolist()])
    print("second copy", [round(x, 2) for x in result.second.tolist()])
    print("ratio      ", [round(x, 3) for x in result.ratio.tolist()])
    assert result.first.shape == result.second.shape == (len(SEEDS),)
    assert torch.all(result.first > math.log(model.config.vocab_size))  # random tokens: worse than uniform guessing
    assert torch.all(result.second <= 0.3 * result.first), result.ratio


# ---- the helpers, on a tiny random decoder -------------------------------------------------------------------------


def test_next_token_losses_are_the_cross_entropy_of_each_next_token(tiny):
    ids = torch.randint(0, 97, (5, 11), generator=torch.Generator().manual_seed(1))
    losses = lm.next_token_losses(tiny, ids, batch_size=2)
    assert losses.shape == (5, 10) and not losses.requires_grad
    with torch.no_grad():
        log_probs = F.log_softmax(tiny(ids).logits, dim=-1)
    for b in range(5):
        for t in range(10):
            # float32 losses up to ~50 nats: batches of 2 and of 5 sum in another order, so allow a few ulps of the
            # value (1e-6 relative), not a fixed 1e-5 (one ulp at 45 is 4e-6; a run saw a difference of 1.1e-5).
            want = -log_probs[b, t, ids[b, t + 1]].item()
            assert losses[b, t].item() == pytest.approx(want, rel=1e-6, abs=1e-5)
    torch.testing.assert_close(lm.next_token_losses(tiny, ids, batch_size=5), losses)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (torch.tensor([1, 2, 3]), r"\(batch, seq\) tensor of token ids .* got a 1-D"),
        (torch.ones(2, 3), r"torch\.long\), got a 2-D torch\.float32"),
        ([[1, 2, 3]], r"got list"),
        (torch.tensor([[1]]), r"at least 2 tokens per row"),
    ],
)
def test_next_token_losses_explains_bad_ids(tiny, ids, message):
    with pytest.raises(ValueError, match=message):
        lm.next_token_losses(tiny, ids)


def test_token_windows_put_bos_before_consecutive_tokens():
    windows = lm.token_windows(list(range(100, 135)), 8, bos_id=1)
    assert windows.shape == (4, 9)  # 35 tokens: 4 whole windows of 8, the tail of 3 left out
    assert torch.all(windows[:, 0] == 1)
    assert windows[:, 1:].flatten().tolist() == list(range(100, 132))
    assert lm.token_windows(list(range(100, 135)), 8, bos_id=1, n_windows=2).shape == (2, 9)
    with pytest.raises(ValueError, match=r"35 tokens make 4 windows of 8; asked for 5"):
        lm.token_windows(list(range(100, 135)), 8, bos_id=1, n_windows=5)


def test_shuffled_windows_keep_each_windows_tokens_and_bos():
    windows = lm.token_windows(list(range(100, 164)), 16, bos_id=1)
    shuffled = lm.shuffled_windows(windows, seed=3)
    assert torch.equal(shuffled[:, 0], windows[:, 0])
    assert torch.equal(shuffled.sort(dim=1).values, windows.sort(dim=1).values)
    assert (shuffled != windows).sum() > 40
    assert torch.equal(shuffled, lm.shuffled_windows(windows, seed=3))
    assert not torch.equal(shuffled, lm.shuffled_windows(windows, seed=4))


def test_repeated_random_tokens_repeat_ordinary_tokens_only(decoder):
    _, tokenizer, bos = decoder
    vocabulary = lm.ordinary_token_ids(tokenizer)
    assert len(vocabulary) == 49152 - 17 and 0 not in vocabulary and 1 not in vocabulary  # 17 control tokens
    rows = lm.repeated_random_tokens(20, vocabulary=vocabulary, bos_id=bos, seeds=[0, 1, 0])
    assert rows.shape == (3, 41) and torch.all(rows[:, 0] == bos)
    assert torch.equal(rows[:, 1:21], rows[:, 21:])
    assert torch.equal(rows[0], rows[2]) and not torch.equal(rows[0], rows[1])
    assert torch.isin(rows[:, 1:], vocabulary).all()


def test_a_model_that_knows_nothing_meets_neither_threshold(tiny):
    """The two thresholds separate a language model from a random one of the same architecture."""
    text_ids = torch.randint(3, 97, (256,), generator=torch.Generator().manual_seed(0)).tolist()
    windows = lm.token_windows(text_ids, 64, bos_id=1)
    real = lm.next_token_losses(tiny, windows).mean()
    shuffled = lm.next_token_losses(tiny, lm.shuffled_windows(windows, seed=0)).mean()
    assert real > 0.7 * shuffled
    rows = lm.repeated_random_tokens(50, vocabulary=torch.arange(3, 97), bos_id=1, seeds=range(8))
    losses = lm.next_token_losses(tiny, rows)
    assert torch.all(losses[:, 50:].mean(1) > 0.3 * losses[:, :50].mean(1))
