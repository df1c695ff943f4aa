"""manyheads.models.llama: the course's SmolLM2 decoder computes what transformers' LlamaForCausalLM computes from the
same GGUF file (logits and every layer's attention weights, alone and in right- and left-padded batches), its KV
cache changes nothing but the work and holds exactly the memory the formula says, greedy generation handles padded
batches and stops at <|im_end|>, and the interventions of chapter 5 work on it."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch
from helpers.smollm2_reference import transformers_smollm2
from helpers.tolerances import float32_tolerance

from manyheads import interventions as iv
from manyheads.costs import kv_cache_bytes
from manyheads.models.llama import LlamaConfig, LlamaDecoder, generate_greedy, kv_cache_nbytes, load_decoder, pad_left

IOI = "When Mary and John went to the store, John gave a drink to"  # indirect object: " Mary"
CHAT = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"  # SmolLM2's chat template, one user turn
LONG = (  # ~300 tokens: positions well past the others', prose and code mixed
    "Multi-head attention runs several attention functions in parallel. Each head projects the queries, keys and "
    "values to a smaller width, d_head = d_model / n_heads, attends, and the heads' outputs are concatenated and "
    "projected back. A decoder masks the future: position i attends to positions 0 ... i only. "
) * 3 + "def causal_mask(seq):\n    return torch.ones(seq, seq, dtype=torch.bool).tril()\n" * 4
PROMPTS = [
    "Hello, world!",
    "The cat sat on the mat.",
    CHAT.format("What is the capital of France?"),
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n" + CHAT.format("Count to three."),
    "<|endoftext|>The end.",
    "In 2024, 3 cats ate 1,234 fish.",
    "3.14159 + 2.71828 = 5.85987; 10**6 = 1000000",
    "1, 2, 3, 4, 5, 6, 7, 8, 9,",
    "def add(a, b):\n    return a + b\n",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;",
    '{"name": "Ada", "age": 36, "languages": ["en", "fr"]}',
    "See https://example.com/path?q=1&r=2#frag for details.",
    "Café naïve – 東京 🙂",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "Die Katze schläft auf dem Sofa, weil es warm ist.",
    "E = mc², and ∫₀¹ x² dx = 1/3.",
    "a   b\n\n\tc  ",
    "WHY??? Because!!! ... (really) [sure] {ok}",
    IOI,
    "zebra quantum violin marmalade 42 zebra quantum violin marmalade 42 zebra",  # a repeat: induction heads
    "a",  # one token: a query that sees only itself
    LONG,
]
# Padded batches: every prompt but the long one (21 rows, up to 44 tokens), and the most padding there is (long +
# one-token: 311 pads).
GROUPS = {"varied": PROMPTS[:-1], "extreme": [LONG, "a"]}
# Tolerances (tests/helpers/tolerances.py): float32 through 30 layers whose longest sums have 1536 terms, scaled by
# the reference's magnitude: ~4e-3 for logits that reach ~42, ~1e-4 for attention weights. Both models run the same
# operations in a slightly different order (q·kᵀ/√d versus q·kᵀ·d^-½, our repeat_interleave versus Hugging Face's
# repeat_kv, a boolean versus an additive mask); a prompt in a padded batch against the prompt alone has other matrix
# shapes, so the CPU kernels block and vectorise the sums differently. Measured on the course's 2-core CPU (torch
# 2.13): the two models' logits and weights are bit-identical; padded batch against alone, up to 1.11e-4 (a run of
# the whole suite). A padding, cache or head-numbering bug moves logits by whole units. A change of kernel is bigger
# than rounding: this decoder and transformers' fused SDPA path differ by up to 3e-4 in logits on a random 4 x 128
# batch (measured), which is why the reference here uses eager attention.


def _tolerance(model, reference) -> float:
    return float32_tolerance(reference, depth=model.config.n_layers, width=model.config.d_ff)


@pytest.fixture(scope="module")
def decoder():
    start = time.perf_counter()
    model, tokenizer = load_decoder()
    print(f"\nload_decoder() took {time.perf_counter() - start:.1f} s")
    return model, tokenizer


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """transformers' LlamaForCausalLM from the same GGUF, offline, with eager attention so it returns weights (read
    once per run and shared with test_smollm2_weights.py: helpers/smollm2_reference.py)."""
    return transformers_smollm2(tmp_path_factory, attn_implementation="eager")[0]


def _ids(tokenizer, text: str) -> torch.Tensor:
    return torch.tensor([tokenizer.encode(text).ids])


@pytest.fixture(scope="module")
def alone(decoder):
    """Each prompt's logits computed alone (batch of one, no mask), once per module."""
    model, tokenizer = decoder
    with torch.no_grad():
        return {text: model(_ids(tokenizer, text)).logits[0] for text in PROMPTS}


def test_the_prompts_are_varied_and_tokenize_as_intended(decoder):
    _, tokenizer = decoder
    assert len(set(PROMPTS)) == len(PROMPTS) >= 20
    lengths = {text: len(tokenizer.encode(text).ids) for text in PROMPTS}
    assert lengths["a"] == 1 and lengths[LONG] > 300
    assert (
        tokenizer.encode(PROMPTS[2]).ids[0] == 1 and 2 in tokenizer.encode(PROMPTS[2]).ids
    )  # <|im_start|>, <|im_end|>
    assert tokenizer.encode("<|endoftext|>The end.").ids[0] == 0  # one special token, not its characters


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
@pytest.mark.parametrize("text", [PROMPTS[3], "a", LONG], ids=["chat", "one-token", "long"])
def test_logits_and_attention_weights_equal_transformers(decoder, reference, text):
    model, tokenizer = decoder
    ids = _ids(tokenizer, text)
    got = model(ids, output_attentions=True)
    expected = reference(ids, output_attentions=True)
    assert got.logits.shape == (1, ids.shape[1], 49152)
    torch.testing.assert_close(got.logits, expected.logits, rtol=0, atol=_tolerance(model, expected.logits))
    assert len(got.attentions) == 30
    weights_tolerance = _tolerance(model, expected.attentions)
    for mine, theirs in zip(got.attentions, expected.attentions):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=weights_tolerance)


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
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_padded_batch_gives_each_prompts_own_logits(decoder, reference, alone, side, group):
    model, tokenizer = decoder
    texts = GROUPS[group]
    ids, is_token = _padded(tokenizer, texts, side)
    if side == "left":
        assert all(
            torch.equal(a, b) for a, b in zip(pad_left([tokenizer.encode(t).ids for t in texts]), (ids, is_token))
        )
    # With left padding, positions must count real tokens only (as transformers' generate does); both models get them.
    position_ids = None if side == "right" else (is_token.cumsum(1) - 1).clamp(min=0)
    got = model(ids, attention_mask=is_token, position_ids=position_ids, output_attentions=True)
    expected = reference(ids, attention_mask=is_token, position_ids=position_ids, output_attentions=True)
    real = is_token.bool()
    assert (~real).any()
    logits_tolerance = _tolerance(model, expected.logits[real])
    torch.testing.assert_close(got.logits[real], expected.logits[real], rtol=0, atol=logits_tolerance)
    pad_key_of_real_query = real[:, None, :, None] & ~real[:, None, None, :]  # (batch, 1, seq_q, seq_k)
    weights_tolerance = _tolerance(model, expected.attentions)
    for mine, theirs in zip(got.attentions, expected.attentions):  # rows of real queries
        rows, expected_rows = mine.transpose(1, 2)[real], theirs.transpose(1, 2)[real]
        torch.testing.assert_close(rows, expected_rows, rtol=0, atol=weights_tolerance)
        assert mine.masked_select(pad_key_of_real_query).abs().max() == 0  # no real token attends to padding
    for i, text in enumerate(texts):  # ... and the same logits as the prompt alone
        torch.testing.assert_close(got.logits[i][real[i]], alone[text], rtol=0, atol=_tolerance(model, alone[text]))


@torch.no_grad()
def test_the_kv_cache_gives_the_same_logits_and_tokens(decoder, reference):
    model, tokenizer = decoder
    ids = _ids(tokenizer, IOI)
    full = model(ids).logits
    first = model(ids[:, :-3], use_cache=True)
    k, v = first.past_key_values[0]
    assert k.shape == v.shape == (1, 3, ids.shape[1] - 3, 64)  # n_kv_heads = 3: a third of the heads' memory
    rest = model(ids[:, -3:], past_key_values=first.past_key_values, use_cache=True, output_attentions=True)
    assert rest.attentions[0].shape == (1, 9, 3, ids.shape[1])
    assert rest.past_key_values[0][0].shape[2] == ids.shape[1]
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full, rtol=0, atol=_tolerance(model, full))

    cached = generate_greedy(model, ids, max_new_tokens=12)
    assert cached.shape == (1, ids.shape[1] + 12)
    assert torch.equal(cached, generate_greedy(model, ids, max_new_tokens=12, use_cache=False))
    expected = reference.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    assert torch.equal(cached, expected)


EOS_PROMPT = CHAT.format("What is 2+2? Answer with a number only.")  # the model answers "2 + 2 = 4<|im_end|>"


@torch.no_grad()
def test_a_left_padded_batch_generates_each_prompts_own_tokens(decoder, reference):
    """Prompts of 1 to 44 tokens, one of which ends its turn early: cached == uncached == each prompt alone ==
    transformers' generate on the same left-padded batch."""
    model, tokenizer = decoder
    texts = ["a", IOI, EOS_PROMPT, PROMPTS[3], "1, 2, 3, 4, 5, 6, 7, 8, 9,"]
    ids, mask = pad_left([tokenizer.encode(t).ids for t in texts])
    new = 10
    cached = generate_greedy(model, ids, new, attention_mask=mask)
    assert cached.shape == (len(texts), ids.shape[1] + new)
    assert torch.equal(cached, generate_greedy(model, ids, new, attention_mask=mask, use_cache=False))
    for i, text in enumerate(texts):
        prompt = _ids(tokenizer, text)
        own = generate_greedy(model, prompt, new)[0, prompt.shape[1] :]
        assert torch.equal(cached[i, ids.shape[1] : ids.shape[1] + len(own)], own), text
        assert len(own) == new or own[-1] == 2  # a shorter row ended its turn
    finished = cached[2, ids.shape[1] :]
    assert 2 in finished.tolist() and torch.all(finished[finished.tolist().index(2) :] == 2)  # then only EOS
    expected = reference.generate(ids, attention_mask=mask, max_new_tokens=new, do_sample=False, pad_token_id=2)
    assert torch.equal(cached, expected)


@torch.no_grad()
def test_generation_stops_at_the_end_of_the_chat_turn(decoder):
    model, tokenizer = decoder
    assert model.config.eos_token_id == tokenizer.token_to_id("<|im_end|>") == 2  # from the GGUF's metadata
    prompt = _ids(tokenizer, EOS_PROMPT)
    out = generate_greedy(model, prompt, 30)
    answer = out[0, prompt.shape[1] :].tolist()
    assert answer[-1] == 2 and 2 not in answer[:-1] and len(answer) < 30  # stopped at the first <|im_end|>
    assert tokenizer.decode(answer, skip_special_tokens=True).strip() != ""
    longer = generate_greedy(model, prompt, 30, stop_at_eos=False)
    assert longer.shape[1] == prompt.shape[1] + 30 and torch.equal(longer[:, : out.shape[1]], out)


@torch.no_grad()
def test_the_kv_cache_holds_what_the_formula_says(decoder):
    """Measured bytes of the cache == 2 · layers · batch · seq · n_kv_heads · d_head · 4 (float32), exactly."""
    model, tokenizer = decoder
    ids, mask = pad_left([tokenizer.encode(t).ids for t in (IOI, "Hello, world!")])
    batch, seq = ids.shape
    out = model(ids, attention_mask=mask, use_cache=True)
    per_token = 2 * 30 * 3 * 64 * 4  # 46,080 bytes: K and V, 30 layers, 3 K/V heads of 64 floats
    assert kv_cache_nbytes(out.past_key_values) == per_token * batch * seq == kv_cache_bytes(30, 3, 64, seq, batch, 4)
    for step in range(1, 4):  # each generated token adds one position per row
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=torch.long)], 1)
        next_ids = out.logits[:, -1:].argmax(-1)
        out = model(next_ids, attention_mask=mask, past_key_values=out.past_key_values, use_cache=True)
        assert kv_cache_nbytes(out.past_key_values) == per_token * batch * (seq + step)
    # A view into a bigger tensor is charged the whole storage: the measure is memory held, not numel.
    k, v = out.past_key_values[0]
    assert kv_cache_nbytes([(k[:, :, :1], v[:, :, :1])]) == k.nbytes + v.nbytes


@torch.no_grad()
def test_gates_and_ablation_work_on_the_decoder(decoder):
    model, tokenizer = decoder
    ids = _ids(tokenizer, IOI)
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
    tolerance = _tolerance(model, ablated)
    assert (ablated - before).abs().max() > 10 * tolerance  # the head does far more than rounding
    # Gate 0 is the same as cutting the head's 64 columns out of W_o by hand.
    layer = model.layers[5].attention
    saved = layer.W_o.weight.detach().clone()
    try:
        layer.W_o.weight.data[:, 4 * 64 : 5 * 64] = 0
        torch.testing.assert_close(model(ids).logits, ablated, rtol=0, atol=tolerance)
    finally:
        layer.W_o.weight.data.copy_(saved)
    torch.testing.assert_close(model(ids).logits, before, rtol=0, atol=0)  # and everything is restored
    with pytest.raises(NotImplementedError, match=r"shares each key/value head among 3 query heads"):
        iv.remove_heads(model, head)


def _small_decoder() -> LlamaDecoder:
    """A random 2-layer decoder; weights N(0, 0.5²) so that greedy tokens vary (the default init, with the tied
    output head, mostly repeats the last token)."""
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
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "norm" not in name:
                weight.normal_(0, 0.5)
    return model


def test_a_small_random_decoder_runs_without_the_checkpoint():
    model = _small_decoder()
    ids = torch.randint(0, 50, (2, 7))
    out = model(ids, output_attentions=True)
    assert out.logits.shape == (2, 7, 50) and out.attentions[1].shape == (2, 4, 7, 7)
    assert torch.all(out.attentions[0].triu(1) == 0)  # causal
    assert torch.equal(generate_greedy(model, ids, 5), generate_greedy(model, ids, 5, use_cache=False))
    assert torch.equal(generate_greedy(model, ids, 0), ids)
    with pytest.raises(ValueError, match=r"attention_mask must be \(batch, past \+ seq\)"):
        model(ids, attention_mask=torch.ones(2, 6))


def test_each_row_stops_at_its_own_eos():
    """EOS = the third token row 0 generates: that row stops there (then repeats EOS), row 1 runs on untouched."""
    model = _small_decoder()
    assert model.config.eos_token_id is None  # no EOS: never stops early
    ids, mask = pad_left([[3, 14, 15, 9, 2, 6], [27, 18]])
    free = generate_greedy(model, ids, 8, attention_mask=mask)[:, 6:]
    assert free.shape == (2, 8) and len(set(free[0].tolist())) > 4  # varied tokens
    assert torch.equal(free[1], generate_greedy(model, torch.tensor([[27, 18]]), 8)[0, 2:])  # as if alone
    eos = int(free[0, 2])
    assert eos not in free[0, :2].tolist() + free[1].tolist()
    model.config = dataclasses.replace(model.config, eos_token_id=eos)
    for use_cache in (True, False):
        out = generate_greedy(model, ids, 8, attention_mask=mask, use_cache=use_cache)[:, 6:]
        assert torch.equal(out[0, :3], free[0, :3]) and torch.all(out[0, 2:] == eos)
        assert torch.equal(out[1], free[1])
        alone = generate_greedy(model, ids[:1], 8, use_cache=use_cache)[0, 6:]  # one row: stops after its EOS
        assert torch.equal(alone, free[0, :3])
        assert torch.equal(generate_greedy(model, ids[:1], 8, use_cache=use_cache, stop_at_eos=False)[0, 6:], free[0])


@pytest.mark.parametrize(
    ("input_ids", "kwargs", "error", "match"),
    [
        (torch.zeros(1, 0, dtype=torch.long), {}, ValueError, r"empty prompt.*at least one token"),
        (torch.tensor([[1.0, 2.0]]), {}, TypeError, r"integer token ids \(torch.long\), got dtype torch.float32"),
        ([[1, 2]], {}, TypeError, r"a \(batch, seq\) tensor.*pad_left"),
        (torch.tensor([1, 2]), {}, ValueError, r"\(batch, seq\), got shape \(2,\).*input_ids\[None\]"),
        (torch.tensor([[1, 50]]), {}, ValueError, r"token ids must lie in \[0, 50\)"),
        (torch.tensor([[1, 2]]), {"max_new_tokens": -1}, ValueError, r"max_new_tokens must be a non-negative int"),
        (torch.tensor([[1, 2]]), {"attention_mask": torch.ones(1, 3)}, ValueError, r"input_ids' shape \(1, 2\)"),
        (torch.tensor([[1, 2]]), {"attention_mask": torch.tensor([[1, 0]])}, ValueError, r"pad on the left.*pad_left"),
        (torch.tensor([[1, 2]]), {"attention_mask": torch.tensor([[0, 0]])}, ValueError, r"empty prompt: rows \[0\]"),
        (torch.tensor([[1, 2]]), {"attention_mask": torch.tensor([[0, 2]])}, ValueError, r"1 for real tokens and 0"),
    ],
    ids=["empty", "float", "list", "1-D", "out-of-vocab", "negative", "mask-shape", "right-pad", "all-pad", "mask-2"],
)
def test_bad_generation_input_says_what_to_do(input_ids, kwargs, error, match):
    kwargs = {"max_new_tokens": 3, **kwargs}
    with pytest.raises(error, match=match):
        generate_greedy(_small_decoder(), input_ids, **kwargs)


def test_pad_left_refuses_empty_prompts():
    with pytest.raises(ValueError, match=r"prompts \[1\] are empty"):
        pad_left([[1, 2], []])
    with pytest.raises(ValueError, match="at least one prompt, got none"):
        pad_left([])
