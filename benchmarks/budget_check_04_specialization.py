"""Budget checks for chapter 4's toy specialization (250 steps, 4 seeds): its two verdicts, run 5x longer.

The chapter trains ``TinyAttentionModel`` (d_model 48, 4 heads) on ``TwoRelationTask(16, 10, (1, 2, 4))`` (Adam
1e-2, batch 32) for 250 steps from seeds 0-3 and reads, from each head's share of attention on each offset
(``mh.offset_mass`` over 256 sequences drawn with seed 123), two verdicts:

- ``ch4-toy-heads-specialize``: every seed solves the task, and every head puts at least 90 % of its attention on
  one offset;
- ``ch4-toy-roles-differ``: the seeds give different assignments of offsets to heads (a head's index carries no
  meaning).

This script trains the same runs for 1,250 steps (5x) from the same 4 seeds, and again for the chapter's 250 steps
(the optimiser has no schedule and evaluation draws no training batches, so these are the chapter's runs and the
first 250 steps of the long ones). Recorded per seed and budget: the accuracy on each relation, each head's share on
each offset, and the assignment (each head's offset). "Solves" is at least 99 % on every relation.

Run: .venv/bin/python benchmarks/budget_check_04_specialization.py [--steps 1250] [--seeds 4]
Writes benchmarks/results/budget_checks/ch4-*.json and the package's copies.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from _report import arguments, parse, run_meta, write_budget_check

import manyheads as mh

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "04_specialization"
CHAPTER_STEPS = 250
SOLVED = 0.99
SPECIALIZED = 0.9


def measure(runs: dict, task, tokens) -> dict:
    out = {}
    for (_name, seed), run in runs.items():
        shares = mh.offset_mass(run.model.cpu(), tokens, task.offsets)  # (n_heads, n_offsets)
        out[seed] = {
            "accuracy": [round(a, 4) for a in run.final_accuracy],
            "offset_shares": [[round(float(v), 4) for v in row] for row in shares],
            "assignment": [task.offsets[int(row.argmax())] for row in shares],
            "min_top_share": round(float(shares.max(dim=1).values.min()), 4),
        }
    return out


def main() -> None:
    global CHAPTER_STEPS
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=5 * CHAPTER_STEPS)
    parser.add_argument("--seeds", type=int, default=4)
    args = parse(parser)
    eval_every = 50
    if args.quick:
        # --quick checks that the script runs (tests/benchmarks/test_benchmarks_run.py): the chapter's budget
        # shrunk, the check still 5x it, over as many seeds; its record is written beside the results, never over them.
        CHAPTER_STEPS, args.steps, eval_every = 10, 50, 10
    seeds = tuple(range(args.seeds))
    task = mh.TwoRelationTask(vocab_size=16, seq_len=10, offsets=(1, 2, 4))
    tokens, _ = task.sample(256, torch.Generator().manual_seed(123))
    start = time.perf_counter()
    numbers: dict = {"solved_level": SOLVED, "specialized_level": SPECIALIZED, "offsets": list(task.offsets)}
    for steps in (CHAPTER_STEPS, args.steps):
        config = mh.TrainConfig(steps=steps, batch_size=32, lr=1e-2, eval_every=eval_every, eval_size=256)
        runs = mh.train_grid(mh.TinyAttentionModel.for_task, {"4 heads": (48, 4)}, task, config, seeds, device="cpu")
        numbers[str(steps)] = {f"seed {s}": v for s, v in measure(runs, task, tokens).items()}
    seconds = time.perf_counter() - start
    short, long = numbers[str(CHAPTER_STEPS)], numbers[str(args.steps)]

    meta = run_meta(seconds)
    common = dict(
        chapter=CHAPTER,
        chapter_steps=CHAPTER_STEPS,
        steps=args.steps,
        seeds=seeds,
        numbers=numbers,
        command="python benchmarks/budget_check_04_specialization.py",
        meta=meta,
    )
    min_acc = min(min(v["accuracy"]) for v in long.values())
    min_share = min(v["min_top_share"] for v in long.values())
    specialize = mh.BudgetCheck(
        id="ch4-toy-heads-specialize",
        verdict=f"every seed solves the task and every head puts at least {SPECIALIZED:.0%} of its attention on one "
        "offset",
        criterion=f"every seed reaches {SOLVED:.0%} on every relation and every head of every seed puts at least "
        f"{SPECIALIZED:.0%} of its attention on one offset at the longer budget",
        holds=min_acc >= SOLVED and min_share >= SPECIALIZED,
        shows=(
            f"at {args.steps:,} steps the worst relation of any seed is at {min_acc:.3f} and the least specialized "
            f"head still puts {min_share:.2f} of its attention on one offset."
        ),
        **common,
    )
    assignments = {tuple(v["assignment"]) for v in long.values()}
    kept = sum(short[k]["assignment"] == long[k]["assignment"] for k in long)
    differ = mh.BudgetCheck(
        id="ch4-toy-roles-differ",
        verdict=f"the {len(seeds)} seeds give different assignments of offsets to heads",
        criterion="at least two different assignments of offsets to heads among the seeds at the longer budget",
        holds=len(assignments) >= 2,
        shows=(
            f"at {args.steps:,} steps the {len(seeds)} seeds give {len(assignments)} different assignments, and "
            f"{kept} of {len(seeds)} seeds keep the assignment they had at {CHAPTER_STEPS} steps."
        ),
        **common,
    )
    for check in (specialize, differ):
        for path in write_budget_check(check):
            print("wrote", path)
        print(check.sentence())
    print(f"{seconds:.0f} s")


if __name__ == "__main__":
    main()
