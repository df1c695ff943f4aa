"""Chapter 5 at full size: tokens per second of MiniLM with heads physically removed against the same heads masked.

For several pruned fractions and batch sizes (Michel et al. 2019, Table 4, used 1, 4, 16 and 64 on a GPU, and
found +1.9 % at batch 1 and +17.5 % at batch 16 with 50 % of BERT's heads removed), on the CPU and on CUDA when
there is one, via :func:`manyheads.analysis.speed.pruning_speed`: both models are timed in turn, the median of
``--repeats`` runs after warm-up, and their outputs are checked to be equal. ``ideal_speedup`` is what the removal
would buy if time were proportional to FLOPs: removing a share f of the heads removes f of the attention layers'
FLOPs (projections, scores, weighted sums) but none of the feed-forward layers'. The chapter's toy model is added
for contrast. Run: .venv/bin/python benchmarks/pruning_speed.py [--threads N] [--repeats R]
"""

from __future__ import annotations

import os

import torch
from _report import arguments, parse, report
from encoder import SENTENCES

from manyheads.analysis.speed import pruning_speed
from manyheads.costs import attention_flops
from manyheads.data.tasks import TwoRelationTask
from manyheads.models import TinyAttentionModel, load_encoder

FRACTIONS = (0.25, 0.5, 0.75)
BATCH_SIZES = (1, 4, 16, 64)


def ideal_speedup(config, seq: int, fraction: float) -> float:
    """1 / (1 − removed FLOPs / all FLOPs) − 1 for one encoder layer at this padded length (embeddings ignored)."""
    attention = attention_flops(config.d_model, config.n_heads, seq)["total"]
    feed_forward = 2 * 2 * seq * config.d_model * config.d_ff  # W_in and W_out, a multiply-add counts 2
    return 1 / (1 - fraction * attention / (attention + feed_forward)) - 1


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    args = parse(parser)
    batch_sizes = (1, 4) if args.quick else BATCH_SIZES
    if args.quick:
        args.repeats, args.warmup = 2, 1
    torch.set_num_threads(args.threads)
    encoder, tokenizer = load_encoder()
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(max(batch_sizes))]
    rows = []
    for fraction in FRACTIONS[:1] if args.quick else FRACTIONS:
        records = pruning_speed(
            encoder,
            lambda b: tokenizer(texts[:b]),
            fraction=fraction,
            batch_sizes=batch_sizes,
            repeats=args.repeats,
            warmup=args.warmup,
            name="all-MiniLM-L6-v2",
        )
        for r in records:
            seq = tokenizer(texts[: r.batch]).input_ids.shape[1]
            rows.append(_row(r, seq, ideal_speedup(encoder.config, seq, r.fraction_removed)))
    task = TwoRelationTask()
    torch.manual_seed(0)
    toy = TinyAttentionModel.for_task(task, d_model=32, n_heads=4).eval()
    data = torch.Generator().manual_seed(0)
    for r in pruning_speed(
        toy,
        lambda b: task.sample(b, data)[0],
        fraction=0.5,
        batch_sizes=batch_sizes,
        repeats=args.repeats,
        warmup=args.warmup,
        name="toy (chapter 1)",
    ):
        rows.append(_row(r, task.seq_len, None))
    columns = list(rows[0])
    print(f"load average before the run ended: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    report("pruning_speed", columns, rows)


def _row(r, seq: int, ideal: float | None) -> dict:
    return {
        "model": r.model,
        "device": r.device,
        "threads": r.threads,
        "removed": f"{r.heads_total - r.heads_kept}/{r.heads_total}",
        "batch": r.batch,
        "seq": seq,
        "tokens": r.tokens,
        "masked_tok_s": round(r.masked_tokens_per_s, 1),
        "removed_tok_s": round(r.removed_tokens_per_s, 1),
        "speedup_pct": round(100 * r.speedup, 1),
        "ideal_speedup_pct": None if ideal is None else round(100 * ideal, 1),
        "max_abs_diff": f"{r.max_abs_diff:.1e}",
    }


if __name__ == "__main__":
    main()
