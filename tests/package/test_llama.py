"""manyheads.models.llama: the course's SmolLM2 decoder computes what transformers' LlamaForCausalLM computes from the
same GGUF file (logits and every layer's attention weights, with and without padding), its KV cache changes nothing
but the work, and the interventions of chapter 5 work on it."""

from __future__ import annotations

import time

import pytest
import torch

from manyheads import interventions as iv
from manyheads.models.gguf_file import smollm2_gguf_path
from manyheads.models.llama import LlamaDecoder, generate_greedy, load_decoder

PROMPTS = [
    "Hello, world!",
    "The cat sat on the mat.",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "In 2024, 3 cats ate 1,234 fish.",
    "def add(a, b):\n    return a + b\n",
    "Café naïve – 東京 🙂",
    "When Mary and John went to the store, John gave a drink to",
    "1, 2, 3, 4, 5, 6, 7, 8, 9,",
    "a",
    "Attention is all you need. " * 12,  # ~70 tokens: positions well past the short prompts'
]
# float32 through 30 layers, the same operations in a slightly different order (q·kᵀ/√d versus q·kᵀ·d^-½, one
# repeat_kv): measured equal to the last bit on CPU with torch 2.x, but a BLAS may sum in another order. Logits reach
# ~30, so 1e-4 absolute is ~3e-6 relative; attention weights are in [0, 1].
LOGITS_ATOL, WEIGHTS_ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def decoder():
    start = time.perf_counter()
    model, tokenizer = load_decoder()
    print(f"\nload_decoder() took {time.perf_counter() - start:.1f} s")
    return model, tokenizer


@pytest.fixture(scope="module")
def reference():
    """transformers' LlamaForCausalLM from the same GGUF, offline, with eager attention so it returns weights."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    path = smollm2_gguf_path()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        model = transformers.LlamaForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, attn_implementation="eager"
        )
    return model.eval()


def _ids(tokenizer, text: str) -> torch.Tensor:
    return torch.tensor([tokenizer.encode(text).ids])


def test_the_decoder_has_smollm2s_shape(decoder):
    model, _ = decoder
    c = model.config
    assert (c.n_layers, c.n_heads, c.n_kv_heads, c.d_model, c.d_head, c.d_ff, c.vocab_size) == (
        30,
        9,
        3,
        576,
        64,
        1536,
        49152,
    )
    layer = model.layers[0].attention
    assert layer.W_q.weight.shape == (576, 576) and layer.W_k.weight.shape == layer.W_v.weight.shape == (192, 576)
    assert len(iv.attention_layers(model)) == 30
    assert not model.training
    assert all(p.dtype == torch.float32 for p in model.parameters())


@torch.no_grad()
@pytest.mark.parametrize("text", PROMPTS)
def test_logits_and_attention_weights_equal_transformers(decoder, reference, text):
    model, tokenizer = decoder
    ids = _ids(tokenizer, text)
    got = model(ids, output_attentions=True)
    expected = reference(ids, output_attentions=True)
    assert got.logits.shape == (1, ids.shape[1], 49152)
    torch.testing.assert_close(got.logits, expected.logits, rtol=0, atol=LOGITS_ATOL)
    assert len(got.attentions) == 30
    for mine, theirs in zip(got.attentions, expected.attentions):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=WEIGHTS_ATOL)


def _padded(tokenizer, texts, side: str):
    rows = [tokenizer.encode(t).ids for t in texts]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long)  # pad id 0; padding never reaches a real token
    is_token = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        where = slice(0, len(row)) if side == "right" else slice(width - len(row), width)
        ids[i, where] = torch.tensor(row)
        is_token[i, where] = 1
    return ids, is_token


@torch.no_grad()
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_padded_batch_gives_each_prompts_own_logits(decoder, reference, side):
    model, tokenizer = decoder
    texts = PROMPTS[:4]
    ids, is_token = _padded(tokenizer, texts, side)
    # With left padding, positions must count real tokens only, as transformers' generate does.
    position_ids = None if side == "right" else (is_token.cumsum(1) - 1).clamp(min=0)
    got = model(ids, attention_mask=is_token, position_ids=position_ids, output_attentions=True)
    expected = reference(ids, attention_mask=is_token, position_ids=position_ids, output_attentions=True)
    real = is_token.bool()
    torch.testing.assert_close(got.logits[real], expected.logits[real], rtol=0, atol=LOGITS_ATOL)
    for mine, theirs in zip(got.attentions, expected.attentions):  # rows of real queries; pad keys get 0 in both
        torch.testing.assert_close(mine.transpose(1, 2)[real], theirs.transpose(1, 2)[real], rtol=0, atol=WEIGHTS_ATOL)
    for i, text in enumerate(texts):  # ... and the same logits as the prompt alone
        alone = model(_ids(tokenizer, text)).logits[0]
        torch.testing.assert_close(got.logits[i][real[i]], alone, rtol=0, atol=LOGITS_ATOL)


@torch.no_grad()
def test_the_kv_cache_gives_the_same_logits_and_tokens(decoder, reference):
    model, tokenizer = decoder
    ids = _ids(tokenizer, PROMPTS[6])
    full = model(ids).logits
    first = model(ids[:, :-3], use_cache=True)
    k, v = first.past_key_values[0]
    assert k.shape == v.shape == (1, 3, ids.shape[1] - 3, 64)  # n_kv_heads = 3: a third of the heads' memory
    rest = model(ids[:, -3:], past_key_values=first.past_key_values, use_cache=True, output_attentions=True)
    assert rest.attentions[0].shape == (1, 9, 3, ids.shape[1])
    assert rest.past_key_values[0][0].shape[2] == ids.shape[1]
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full, rtol=0, atol=LOGITS_ATOL)

    cached = generate_greedy(model, ids, max_new_tokens=12)
    assert cached.shape == (1, ids.shape[1] + 12)
    assert torch.equal(cached, generate_greedy(model, ids, max_new_tokens=12, use_cache=False))
    expected = reference.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    assert torch.equal(cached, expected)


@torch.no_grad()
def test_gates_and_ablation_work_on_the_decoder(decoder):
    model, tokenizer = decoder
    ids = _ids(tokenizer, PROMPTS[6])
    before = model(ids).logits
    head = (5, 4)  # layer 5, query head 4: shares its K/V head 1 with query heads 3 and 5
    gates = torch.ones(30, 9)
    gates[head] = 0.0
    with iv.ablated(model, head):
        assert iv.current_gates(model)[head] == 0
        ablated = model(ids).logits
    with iv.gated(model, gates):
        gated = model(ids).logits
    torch.testing.assert_close(ablated, gated, rtol=0, atol=0)
    assert (ablated - before).abs().max() > 1e-3  # the head does something
    # Gate 0 is the same as cutting the head's 64 columns out of W_o by hand.
    layer = model.layers[5].attention
    saved = layer.W_o.weight.detach().clone()
    try:
        layer.W_o.weight.data[:, 4 * 64 : 5 * 64] = 0
        torch.testing.assert_close(model(ids).logits, ablated, rtol=0, atol=LOGITS_ATOL)
    finally:
        layer.W_o.weight.data.copy_(saved)
    torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)  # and everything is restored
    with pytest.raises(NotImplementedError, match=r"shares each key/value head among 3 query heads"):
        iv.remove_heads(model, head)


def test_a_small_random_decoder_runs_without_the_checkpoint():
    from manyheads.models.llama import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        d_model=32,
        d_ff=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_head=8,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
    )
    model = LlamaDecoder(config).eval()
    ids = torch.randint(0, 50, (2, 7))
    out = model(ids, output_attentions=True)
    assert out.logits.shape == (2, 7, 50) and out.attentions[1].shape == (2, 4, 7, 7)
    assert torch.all(out.attentions[0].triu(1) == 0)  # causal
    assert torch.equal(generate_greedy(model, ids, 5), generate_greedy(model, ids, 5, use_cache=False))
    with pytest.raises(ValueError, match=r"attention_mask must be \(batch, past \+ seq\)"):
        model(ids, attention_mask=torch.ones(2, 6))
