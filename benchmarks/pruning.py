"""Chapter 5 at full size: how many of MiniLM's heads can go, by importance method and task.

The chapter runs the same code at a reduced size to fit its 120 s budget; this script runs it larger and reports
the figures the chapter's closing note sets beside its own: for each task (Lee document similarity, all 50
documents untruncated; movie-review sentiment, a seeded sample of held-out snippets with a ridge probe fitted on
another sample) and each method (gradient importance, leave-one-out re-estimated every step, random order over
several seeds), the share of heads removed before the score first falls 5 % and 10 % below the unpruned score,
plus the single-head ablation maps' counts (heads whose removal changes the score with a 95 % bootstrap interval
excluding 0, and those whose removal helps).

Run: .venv/bin/python benchmarks/pruning.py [--eval 500] [--fit 2000] [--seeds 5] [--lee-tokens 512] [--quick]
All 10,605 snippets take far too long here (one forward pass over them is about 90 s on 2 cores, and the sweep
needs hundreds), so the sentiment task uses a seeded sample; the sizes used are printed and written to the JSON.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _report import report

import manyheads as mh
from manyheads.analysis import pruning as P
from manyheads.data import lee_documents, lee_similarities, movie_review_snippets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=int, default=500, help="held-out snippets the sentiment score is measured on")
    parser.add_argument("--fit", type=int, default=2000, help="snippets the ridge probe is fitted on")
    parser.add_argument("--alpha", type=float, default=1.0, help="ridge regularisation")
    parser.add_argument("--seeds", type=int, default=5, help="random pruning orders")
    parser.add_argument("--lee-tokens", type=int, default=512, help="word pieces kept per Lee document")
    parser.add_argument("--step", type=float, default=0.1, help="share of heads removed per step")
    parser.add_argument("--loo-every", type=int, default=1, help="re-estimate leave-one-out every k steps")
    parser.add_argument("--quick", action="store_true", help="a small run to check the script (not for figures)")
    args = parser.parse_args()
    if args.quick:
        args.eval, args.fit, args.seeds, args.lee_tokens, args.step, args.loo_every = 32, 128, 2, 24, 0.25, 2
    torch.manual_seed(0)
    model, tokenizer = mh.load_encoder()
    texts, ratings = movie_review_snippets()
    tasks = [
        P.lee_similarity_task(model, tokenizer, lee_documents(), lee_similarities(), max_tokens=args.lee_tokens),
        P.sentiment_probe_task(
            model, tokenizer, texts, ratings, n_fit=args.fit, n_eval=args.eval, alpha=args.alpha, n_importance=args.eval
        ),
    ]
    rows = []
    for task in tasks:
        start = time.perf_counter()
        ranked_on = getattr(task, "importance_task", None)  # sentiment: rank heads on other sentences than scored
        maps = {mode: P.ablation_map(task, mode, n_boot=1000) for mode in ("zero", "mean")}
        curves = {
            "gradient": [P.pruning_curve(task, "gradient", step=args.step, importance_task=ranked_on)],
            "leave-one-out": [
                P.pruning_curve(task, "loo", step=args.step, reestimate_every=args.loo_every, importance_task=ranked_on)
            ],
            "random": [P.pruning_curve(task, "random", step=args.step, seed=s) for s in range(args.seeds)],
        }
        seconds = time.perf_counter() - start
        for method, runs in curves.items():
            within = {drop: [P.prunable_fraction(c, drop) for c in runs] for drop in (0.05, 0.10)}
            rows.append(
                {
                    "task": task.name,
                    "metric": task.metric_name,
                    "items": task.n_items,
                    "tokens": task.n_tokens,
                    "unpruned": runs[0].base,
                    "method": method,
                    "runs": len(runs),
                    "pruned_at_5pct_drop": statistics.mean(within[0.05]),
                    "pruned_at_10pct_drop": statistics.mean(within[0.10]),
                    "significant_zero": int(maps["zero"].significant.sum()),
                    "helpful_zero": len(maps["zero"].helpful_removals),
                    "significant_mean": int(maps["mean"].significant.sum()),
                    "helpful_mean": len(maps["mean"].helpful_removals),
                    "curve": [[f, s] for c in runs for f, s in zip(c.fractions, c.scores)],
                    "task_seconds": seconds,
                    "sizes": vars(args),
                }
            )
    columns = [
        "task",
        "items",
        "tokens",
        "unpruned",
        "method",
        "runs",
        "pruned_at_5pct_drop",
        "pruned_at_10pct_drop",
        "significant_zero",
        "helpful_zero",
        "significant_mean",
        "helpful_mean",
        "task_seconds",
    ]
    report("pruning_quick" if args.quick else "pruning", columns, rows)


if __name__ == "__main__":
    main()
