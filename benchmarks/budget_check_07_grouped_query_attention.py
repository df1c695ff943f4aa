"""Budget check for chapter 7's uptraining verdict: the converted model's head start is short, ahead of a model
trained from scratch after 20 steps and level with it in 100 (toy, 2 seeds, 100 steps of uptraining).

The chapter's experiment (``TwoRelationTask(16, 12, (1, 3))``, the toy with 8 heads of width 4, Adam 1e-2, batch 32;
pre-trained as multi-head attention for 400 steps, mean-pooled to one K/V head, then trained on; the control is the
same one-K/V-head architecture trained from scratch with the same recipe and batches), with the uptraining and the
control trained 5x longer (500 steps) from 5 seeds. Two pre-training budgets: the chapter's 400 steps, and 5x that
(2,000 steps), since a longer pre-trained model might keep a longer head start. Each run is scored on the chapter's
held-out set (1,024 sequences drawn with seed 99) at 20, 100 and 500 steps (a run's batches depend only on its seed,
so the score after n steps is that of an n-step run); the record also keeps each first step at 0.99 accuracy.

The verdict holds if, for every seed and both pre-training budgets, the uptrained model is ahead of its control at
20 steps (by more than ``LEVEL``) and the two are level (within ``LEVEL``) at 100 and at 500 steps.

Run: .venv/bin/python benchmarks/budget_check_07_grouped_query_attention.py [--steps 500] [--seeds 5]
     [--pretrain 400 2000] [--rewrite]
Writes benchmarks/results/budget_checks/ch7-uptraining-head-start.json and the package's copy.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from _report import arguments, parse, run_meta, write_budget_check

import manyheads as mh

ROOT = Path(__file__).resolve().parents[1]
CHAPTER_STEPS, EARLY, CHAPTER_PRETRAIN = 100, 20, 400  # the chapter's uptraining budget, its 5 % point, pre-training
CHECK_ID = "ch7-uptraining-head-start"
LEVEL = 0.01  # held-out accuracies within 0.01 are "level"
TOY_HEADS, TOY_D_MODEL = 8, 32
# The record's sentence goes on: "... is gone in 100 training steps, and a check at 500 steps ... confirms it".
VERDICT = (
    f"the uptrained toy's lead over the same architecture trained from scratch (ahead after {EARLY} steps) is gone"
)


def _span(runs: list[dict], column: str) -> str:
    values = [r[column] for r in runs]
    if min(values) == max(values):
        return f"exactly {min(values):+.3f} in every run"
    return f"{min(values):+.3f} to {max(values):+.3f}"


def record(numbers: dict, seeds, steps: int, pretrain, failures: list[str], meta: dict) -> mh.BudgetCheck:
    """The budget-check record of the runs in ``numbers``, with its one-sentence account of the longer run."""
    runs = list(numbers["runs"].values())
    scratch_at = [r["scratch_step_0.99"] for r in runs]
    up_at = [r["uptrained_step_0.99"] for r in runs]
    reached = all(s is not None for s in scratch_at) and all(u is not None for u in up_at)
    final = min(min(r[f"uptrained_acc_{steps}"], r[f"scratch_acc_{steps}"]) for r in runs)
    shows = (
        f"over {len(seeds)} seeds, pre-trained for {' and '.join(f'{p:,}' for p in pretrain)} steps, the uptrained "
        f"model leads its from-scratch control in held-out accuracy by {_span(runs, f'gap_{EARLY}')} after {EARLY} "
        f"steps, by {_span(runs, f'gap_{CHAPTER_STEPS}')} after {CHAPTER_STEPS} and by {_span(runs, f'gap_{steps}')} "
        f"after {steps:,} (every run at {final:.3f} or above by then)"
        + (
            f"; the controls first reach 0.99 between steps {min(scratch_at)} and {max(scratch_at)}, the uptrained "
            f"models between steps {min(up_at)} and {max(up_at)}, so in one run the control gets there first"
            if reached and any(s < u for s, u in zip(scratch_at, up_at))
            else (
                f"; the controls first reach 0.99 between steps {min(scratch_at)} and {max(scratch_at)}, the "
                f"uptrained models between steps {min(up_at)} and {max(up_at)}"
                if reached
                else "; not every run reaches 0.99"
            )
        )
        + (f" (runs off the criterion: {', '.join(failures)})." if failures else ".")
    )
    return mh.BudgetCheck(
        id=CHECK_ID,
        chapter="07_grouped_query_attention",
        verdict=VERDICT,
        criterion=(
            f"for every seed and pre-training budget, uptrained minus from-scratch held-out accuracy is above "
            f"{LEVEL} at {EARLY} steps and within ±{LEVEL} at {CHAPTER_STEPS} and {steps} steps"
        ),
        chapter_steps=CHAPTER_STEPS,
        steps=steps,
        seeds=tuple(seeds),
        holds=not failures,
        shows=shows,
        numbers=numbers,
        command="python benchmarks/budget_check_07_grouped_query_attention.py",
        meta=meta,
    )


def rewrite() -> mh.BudgetCheck:
    """The committed record again, its sentences rebuilt from its own numbers (no training), after a wording change."""
    old = mh.budget_check(CHECK_ID)
    failures = [
        key
        for key, r in old.numbers["runs"].items()
        if not (
            r[f"gap_{EARLY}"] > LEVEL
            and abs(r[f"gap_{CHAPTER_STEPS}"]) <= LEVEL
            and abs(r[f"gap_{old.steps}"]) <= LEVEL
        )
    ]
    return record(old.numbers, old.seeds, old.steps, old.meta["pretrain_steps"], failures, old.meta)


def main() -> None:
    global CHAPTER_STEPS, EARLY, CHAPTER_PRETRAIN
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=5 * CHAPTER_STEPS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pretrain", type=int, nargs="+", default=[CHAPTER_PRETRAIN, 5 * CHAPTER_PRETRAIN])
    parser.add_argument("--rewrite", action="store_true", help="rebuild the record's sentences from its numbers")
    args = parse(parser)
    if args.quick:
        # --quick checks that the script runs (tests/benchmarks/test_benchmarks_run.py): the chapter's budget
        # shrunk, the check still 5x it, over as many seeds; its record is written beside the results, never over them.
        CHAPTER_STEPS, EARLY, CHAPTER_PRETRAIN = 4, 2, 8
        args.steps, args.seeds, args.pretrain = 5 * CHAPTER_STEPS, 3, [CHAPTER_PRETRAIN, 5 * CHAPTER_PRETRAIN]
    if args.rewrite:
        check = rewrite()
        for path in write_budget_check(check):
            print("wrote", path)
        print(check.sentence())
        return
    seeds = tuple(range(args.seeds))
    toy = mh.TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    recipe = mh.TrainConfig(eval_every=10)

    def multi_head():
        return mh.TinyAttentionModel.for_task(toy, TOY_D_MODEL, TOY_HEADS)

    def fresh_single_kv_head():
        model = multi_head()
        model.attention = mh.MultiHeadAttention(TOY_D_MODEL, TOY_HEADS, n_kv_heads=1)
        return model

    budgets = (EARLY, CHAPTER_STEPS, args.steps)
    start = time.perf_counter()
    numbers: dict = {"level": LEVEL, "chance": 1 / toy.vocab_size, "scored_at": list(budgets), "runs": {}}
    failures = []
    for pretrain in args.pretrain:
        for seed in seeds:
            pre = dataclasses.replace(recipe, steps=pretrain, seed=seed)
            pretrained = mh.train(multi_head, toy, pre, device="cpu", progress=False).model
            run = mh.uptrain(
                pretrained,
                toy,
                1,
                steps=budgets,
                config=dataclasses.replace(recipe, seed=seed + 1),
                scratch=fresh_single_kv_head,
            )
            gaps = [up[1] - sc[1] for up, sc in zip(run.after, run.scratch)]
            key = f"pre-trained {pretrain} / seed {seed}"
            numbers["runs"][key] = {
                "pretrain_steps": pretrain,
                "seed": seed,
                "multi_head_acc": round(run.original[1], 4),
                "converted_acc": round(run.converted[1], 4),
                **{f"uptrained_acc_{n}": round(up[1], 4) for n, up in zip(budgets, run.after)},
                **{f"scratch_acc_{n}": round(sc[1], 4) for n, sc in zip(budgets, run.scratch)},
                **{f"gap_{n}": round(g, 4) for n, g in zip(budgets, gaps)},
                "uptrained_step_0.99": run.first_step_at(0.99),
                "scratch_step_0.99": run.first_step_at(0.99, scratch=True),
            }
            if not (gaps[0] > LEVEL and abs(gaps[1]) <= LEVEL and abs(gaps[2]) <= LEVEL):
                failures.append(key)
            print(key, numbers["runs"][key], f"{time.perf_counter() - start:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    meta = run_meta(seconds, pretrain_steps=list(args.pretrain))
    check = record(numbers, seeds, args.steps, args.pretrain, failures, meta)
    for path in write_budget_check(check):
        print("wrote", path)
    print(check.sentence())


if __name__ == "__main__":
    main()
