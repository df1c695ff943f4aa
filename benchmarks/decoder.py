"""The course's decoder (manyheads.models.llama, chapters 6-7) against transformers' LlamaForCausalLM read from the same
SmolLM2-135M-Instruct GGUF file, on CPU: load time, forward time on the same batch, greedy generation's tokens per
second with and without the KV cache, and the cache's measured bytes per token against the formula
2 · layers · kv_heads · d_head · bytes (float32: 2 · 30 · 3 · 64 · 4 = 46,080).

Issue 11 part 5's target: the course's forward within 1.3x of transformers'. Both models are float32 and in eval mode
under torch.no_grad; transformers uses its default attention (SDPA), the course its own (explicit softmax) unless
the row says otherwise. Timings are medians over --repeats after a warm-up, the two models alternating, so that a
busy machine slows both alike. Run: .venv/bin/python benchmarks/decoder.py [--batch B --seq S --new-tokens N ...]
--quick runs tiny sizes and leaves transformers out (loading it from the GGUF file alone takes about 30 s).
"""

from __future__ import annotations

import os
import statistics
import time

import torch
from _report import arguments, parse, report

from manyheads.costs import kv_cache_bytes
from manyheads.models.gguf_file import smollm2_gguf_path
from manyheads.models.llama import generate_greedy, kv_cache_nbytes, load_decoder


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _alternating(fns: dict, repeats: int, warm_up: bool = True) -> dict[str, float]:
    """Median seconds of each function, calling them in turn, after one warm-up call each if ``warm_up``."""
    for fn in fns.values() if warm_up else ():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(_seconds(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def _load_reference(attn_implementation: str):
    import transformers

    os.environ["HF_HUB_OFFLINE"] = "1"
    path = smollm2_gguf_path()
    model = transformers.LlamaForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation=attn_implementation
    )
    return model.eval()


def _both(course, reference) -> dict:
    """The functions to time: the course's, and transformers' when it was loaded."""
    return {"course": course} | ({"transformers": reference} if reference else {})


def _row(measure: str, unit: str, course, reference, note: str = "") -> dict:
    ratio = course / reference if isinstance(course, float | int) and isinstance(reference, float | int) else "-"
    return {"measure": measure, "unit": unit, "course": course, "transformers": reference, "ratio": ratio, "note": note}


@torch.no_grad()
def _cache_growth(model, prompt: torch.Tensor, new_tokens: int) -> tuple[int, int, int]:
    """Greedy steps as generate_greedy takes them, measuring the cache: (bytes after the prompt, bytes at the end,
    positions at the end)."""
    out = model(prompt, use_cache=True)
    start = kv_cache_nbytes(out.past_key_values)
    for _ in range(new_tokens):
        out = model(out.logits[:, -1:].argmax(-1), past_key_values=out.past_key_values, use_cache=True)
    return start, kv_cache_nbytes(out.past_key_values), out.past_key_values[0][0].shape[2]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens for generation (batch of one)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--gen-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parse(parser)
    if args.quick:
        args.batch, args.seq, args.repeats, args.prompt, args.new_tokens, args.gen_repeats = 1, 16, 1, 8, 4, 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []

    start = time.perf_counter()
    model, _ = load_decoder()
    course_load = time.perf_counter() - start
    start = time.perf_counter()
    reference = None if args.quick else _load_reference("sdpa")
    reference_load = "-" if reference is None else time.perf_counter() - start
    rows.append(_row("load (GGUF → float32 model)", "s", course_load, reference_load, "course includes the sha256"))
    c = model.config

    with torch.no_grad():
        ids = torch.randint(0, c.vocab_size, (args.batch, args.seq))
        shape = f"{args.batch} x {args.seq} tokens"
        t = _alternating(_both(lambda: model(ids), reference and (lambda: reference(ids))), args.repeats)
        rows.append(_row("forward", "s", t["course"], t.get("transformers", "-"), f"{shape}; target ratio <= 1.3"))
        forward_ratio = t["course"] / t["transformers"] if reference else None
        if reference:
            reference.set_attn_implementation("eager")  # the implementation that can return attention weights
        t = _alternating(
            _both(
                lambda: model(ids, output_attentions=True),
                reference and (lambda: reference(ids, output_attentions=True)),
            ),
            args.repeats,
        )
        rows.append(
            _row("forward + attention weights", "s", t["course"], t.get("transformers", "-"), f"{shape}; eager")
        )
        if reference:
            reference.set_attn_implementation("sdpa")

        prompt = ids[:1, : args.prompt]
        n = args.new_tokens
        tokens = {}
        for use_cache in (True, False):
            t = _alternating(
                _both(
                    lambda cache=use_cache: generate_greedy(model, prompt, n, use_cache=cache, stop_at_eos=False),
                    reference
                    and (
                        lambda cache=use_cache: reference.generate(
                            prompt,
                            attention_mask=torch.ones_like(prompt),
                            max_new_tokens=n,
                            min_new_tokens=n,
                            do_sample=False,
                            use_cache=cache,
                        )
                    ),
                ),
                args.gen_repeats,
                warm_up=False,  # the forward passes above warmed both models up
            )
            tokens[use_cache] = n / t["course"]
            label = "with" if use_cache else "without"
            rows.append(
                _row(
                    f"greedy generation {label} KV cache",
                    "tokens/s",
                    n / t["course"],
                    n / t["transformers"] if reference else "-",
                    f"prompt {args.prompt}, {n} new, batch 1",
                )
            )
        rows.append(_row("KV cache speed-up (with / without)", "x", tokens[True] / tokens[False], "-"))

        start, end, positions = _cache_growth(model, prompt, n)
        formula = 2 * c.n_layers * c.n_kv_heads * c.d_head * 4
        assert kv_cache_bytes(c.n_layers, c.n_kv_heads, c.d_head, positions, 1, 4) == formula * positions
        hf_per_token = "-"
        if reference:
            out = reference(prompt, use_cache=True)
            hf_cache = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
            hf_per_token = kv_cache_nbytes(hf_cache) / args.prompt
        rows.append(_row("KV cache per token, measured", "bytes", (end - start) / n, hf_per_token, "course: growth"))
        rows.append(_row("KV cache per token, formula", "bytes", formula, formula, "2*layers*kv_heads*d_head*4"))
        rows.append(_row(f"KV cache at {positions} positions", "bytes", end, "-", f"formula {formula * positions}"))

    load = os.getloadavg()[0]
    rows.append(_row("machine load (1-min average) at the end", "", load, "-", f"{os.cpu_count()} CPUs"))
    report("decoder", ["measure", "unit", "course", "transformers", "ratio", "note"], rows)
    if forward_ratio is not None:
        verdict = "met" if forward_ratio <= 1.3 else "NOT met"
        print(f"\nforward: course / transformers = {forward_ratio:.2f} (target <= 1.3: {verdict})")


if __name__ == "__main__":
    main()
