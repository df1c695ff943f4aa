"""Forward time of manyheads' BertEncoder against transformers' BertModel (same checkpoint, same batch, CPU).

The course's encoder is written to be read (explicit heads, attention weights always returned, per-head gates);
this measures what that costs against BertModel with eager attention (which also returns the weights) and,
for reference, with PyTorch's fused sdpa attention (which does not).
The three are timed in turn within each repeat (not one after the other), so that a busy machine slows all of
them alike. Run: .venv/bin/python benchmarks/encoder.py [--threads N] [--repeats R] [--quick] [--results DIR]
(``--quick``: one batch of 4 sentences, timed once after the warm-up, on one thread, to check that the script works).
"""

from __future__ import annotations

import time

import torch
from _report import arguments, parse, report

from manyheads.models.bert import load_encoder as load
from manyheads.models.checkpoints import model_dir

SENTENCES = [
    "The cat sat on the mat.",
    "When Mary met John, she gave him her book because he had asked for it.",
    "In 1969, 3 astronauts flew 384,400 km to the Moon.",
    "Colorless green ideas sleep furiously.",
    "Despite the rain, which had been falling since the early hours of Tuesday morning, the marathon went ahead.",
    "Hello, world!",
    "The keys to the cabinet are on the table.",
    "Time flies like an arrow; fruit flies like a banana.",
]
BATCHES = [  # (batch, sentences repeated to make longer rows)
    (32, 1),
    (32, 4),
    (8, 12),
]


def _interleaved_medians(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds per call of each function, calling them round-robin so that load drifts hit all alike."""
    for fn in fns.values():
        fn()
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=15)
    args = parse(parser)
    batches, repeats = BATCHES, args.repeats
    if args.quick:  # one small batch, timed once after the warm-up, on one thread (the machine is shared)
        batches, repeats, args.threads = [(4, 1)], 1, 1
    torch.set_num_threads(args.threads)
    from transformers import BertModel

    encoder, tokenizer = load()
    eager = BertModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()
    sdpa = BertModel.from_pretrained(str(model_dir()), attn_implementation="sdpa").eval()
    rows = []
    with torch.inference_mode():
        for batch_size, repeat in batches:
            texts = [" ".join([SENTENCES[(i + j) % len(SENTENCES)] for j in range(repeat)]) for i in range(batch_size)]
            batch = tokenizer(texts).inputs()
            t = _interleaved_medians(
                {
                    # Default arguments bind this iteration's batch (B023).
                    "eager": lambda b=batch: eager(**b, output_attentions=True),
                    "sdpa": lambda b=batch: sdpa(**b),
                    "mine": lambda b=batch: encoder(**b),
                },
                repeats,
            )
            t_eager, t_sdpa, t_mine = t["eager"], t["sdpa"], t["mine"]
            rows.append(
                {
                    "threads": args.threads,
                    "batch": batch_size,
                    "seq": batch["input_ids"].shape[1],
                    "bert_eager_ms": 1e3 * t_eager,
                    "bert_sdpa_ms": 1e3 * t_sdpa,
                    "manyheads_ms": 1e3 * t_mine,
                    "ratio_vs_eager": t_mine / t_eager,
                    "ratio_vs_sdpa": t_mine / t_sdpa,
                }
            )
    report(
        "encoder",
        ["threads", "batch", "seq", "bert_eager_ms", "bert_sdpa_ms", "manyheads_ms", "ratio_vs_eager", "ratio_vs_sdpa"],
        rows,
    )


if __name__ == "__main__":
    main()
