"""Budget checks for chapter 5's two verdicts drawn from training toy models.

1. ``ch5-identical-heads`` (the symmetry experiment, 200 steps in the chapter): four heads that start identical stay
   identical within float32 rounding, score about the same as one head of the same width (8), and below four normally
   initialised heads of width 8. The same task, widths and optimiser as the chapter (``TwoRelationTask(16, 12,
   (1, 3))``, d_model 32, d_head 8, ``mh.symmetry_experiment``), at 1,000 steps from 3 seeds; the chapter's 200-step
   numbers for the same seeds are recorded beside them.
   Criterion, for every seed: the identical heads never differ by more than the rounding tolerance; four normal heads
   score at least ``GAP`` (0.05) higher in accuracy than four identical ones; four identical heads score within
   ``GAP`` of one head of width 8.
2. ``ch5-quiet-pairs`` (the pairs experiment, 300 steps in the chapter): among the four toy heads whose removal alone
   costs least, at least one pair costs clearly more together than the sum of its two single costs (the difference
   is below ``-CLEAR`` = -0.01 of accuracy and its 95 % paired-bootstrap interval lies below 0). The chapter's toy
   model (8 heads of width 4), scored on sample seed 7, trained from 3 seeds at 300 and at 1,500 steps.
   Criterion: every seed has such a pair at 1,500 steps. The record also holds, per seed and budget, the share of
   heads each pruning order (gradient, leave-one-out, random) removes before accuracy falls 10 % of the way to its
   floor.

Run: .venv/bin/python benchmarks/budget_check_05_pruning.py [--seeds 3] [--only identical|pairs]
Writes benchmarks/results/budget_checks/ch5-*.json and the package's copies (about 10 minutes on 2 busy cores).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from _report import arguments, parse, run_meta, write_budget_check

import manyheads as mh

ROOT = Path(__file__).resolve().parents[1]
GAP = 0.05  # accuracy: "about the same" within it, "higher" beyond it
CLEAR = 0.01  # accuracy: a pair's extra cost that counts as more than nothing
SYM_STEPS, PAIR_STEPS, FACTOR = 200, 300, 5
N_BOOT = 200  # bootstrap resamples of the pairs' intervals, as in the chapter
ROWS = 512  # sequences the pairs experiment scores on (and ranks heads on), as in the chapter
TOY = mh.TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))


def meta(seconds: float) -> dict:
    return run_meta(seconds)


def identical_heads(seeds: tuple[int, ...]) -> mh.BudgetCheck:
    start = time.perf_counter()
    numbers: dict = {"gap": GAP, "d_model": 32, "d_head": 8}
    for steps in (SYM_STEPS, FACTOR * SYM_STEPS):
        runs = mh.symmetry_experiment(
            TOY,
            d_model=32,
            d_head=8,
            head_counts=(1, 4),
            config=mh.TrainConfig(steps=steps, seed=0, eval_every=min(100, SYM_STEPS)),
            seeds=seeds,
            progress=False,
        )
        numbers[str(steps)] = {
            f"{r.n_heads} heads, {r.init} / seed {r.seed}": {
                "accuracy": round(r.mean_accuracy, 4),
                "max_spread": r.max_spread,
                "tolerance": r.tolerance,
            }
            for r in runs
        }
    long = numbers[str(FACTOR * SYM_STEPS)]
    failures = []
    for seed in seeds:
        ident, normal, one = (
            long[f"{k} / seed {seed}"] for k in ("4 heads, identical", "4 heads, normal", "1 heads, normal")
        )
        if ident["max_spread"] > ident["tolerance"]:
            failures.append(f"seed {seed}: identical heads drifted apart")
        if not normal["accuracy"] - ident["accuracy"] >= GAP:
            failures.append(f"seed {seed}: four normal heads not {GAP} above four identical ones")
        if not abs(ident["accuracy"] - one["accuracy"]) <= GAP:
            failures.append(f"seed {seed}: four identical heads not within {GAP} of one head of width 8")
    numbers["failures"] = failures

    def mean(budget: dict, key: str) -> float:
        return sum(budget[f"{key} / seed {s}"]["accuracy"] for s in seeds) / len(seeds)

    steps = FACTOR * SYM_STEPS
    shows = (
        f"at {steps:,} steps, four identical heads score {mean(long, '4 heads, identical'):.3f} on average over "
        f"{len(seeds)} seeds, one head of width 8 {mean(long, '1 heads, normal'):.3f} and four normal heads "
        f"{mean(long, '4 heads, normal'):.3f}, and the identical heads still differ by at most "
        f"{max(long[f'4 heads, identical / seed {s}']['max_spread'] for s in seeds):.2g}"
        + ("" if not failures else f" ({'; '.join(failures)})")
    )
    return mh.BudgetCheck(
        id="ch5-identical-heads",
        chapter="05_pruning",
        verdict="four heads that start identical stay identical and score about the same as one head of the same "
        "width, below four normally initialised heads",
        criterion=f"for every seed: identical heads within the rounding tolerance; four normal heads at least {GAP} "
        f"above four identical ones in accuracy; four identical heads within {GAP} of one head of width 8",
        chapter_steps=SYM_STEPS,
        steps=steps,
        seeds=seeds,
        holds=not failures,
        shows=shows,
        numbers=numbers,
        command="python benchmarks/budget_check_05_pruning.py --only identical",
        meta=meta(time.perf_counter() - start),
    )


def toy_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=mh.IGNORE_INDEX)


def pairs_for(steps: int, seed: int) -> dict:
    """The chapter's pairs experiment and toy pruning curves, for one training budget and seed."""
    run = mh.train(
        lambda: mh.TinyAttentionModel.for_task(TOY, 32, 8), TOY, mh.TrainConfig(steps=steps, seed=seed), progress=False
    )

    def task(sample_seed: int, name: str):
        tokens, targets = TOY.sample(ROWS, torch.Generator().manual_seed(sample_seed))
        accuracy = lambda logits, targets: float(mh.readout_accuracy(logits, targets).mean())  # noqa: E731
        return mh.ModelTask(run.model.eval(), tokens, targets, accuracy, toy_loss, name=name)

    scored, ranking = task(7, "toy"), task(8, "toy (for ranking)")
    singles = mh.ablation_map(scored, "zero", n_boot=N_BOOT)
    cost = singles.delta.abs().flatten()
    quiet = [divmod(int(i), 8) for i in torch.argsort(cost)[:4]]
    joint = mh.joint_ablation(scored, list(itertools.combinations(quiet, 2)), n_boot=N_BOOT)
    below = (joint.high < 0).tolist()
    clear = [bool(b and d < -CLEAR) for b, d in zip(below, joint.interaction.tolist())]
    curves = {
        "gradient": [mh.pruning_curve(scored, "gradient", step=1 / 8, importance_task=ranking)],
        "leave-one-out": [mh.pruning_curve(scored, "loo", step=1 / 8, importance_task=ranking)],
        "random": [mh.pruning_curve(scored, "random", step=1 / 8, seed=s) for s in (0, 1, 2)],
    }
    return {
        "accuracy": [round(a, 4) for a in run.final_accuracy],
        "pairs": [" and ".join(mh.head_name(*h) for h in g) for g in joint.groups],
        "difference": [round(v, 4) for v in joint.interaction.tolist()],
        "low": [round(v, 4) for v in joint.low.tolist()],
        "high": [round(v, 4) for v in joint.high.tolist()],
        "pairs_below_0": sum(below),
        "pairs_clearly_below": sum(clear),
        "prunable_at_10pct_of_gap": {
            m: round(sum(mh.prunable_fraction(c, 0.10, floor=c.floor) for c in cs) / len(cs), 4)
            for m, cs in curves.items()
        },
    }


def quiet_pairs(seeds: tuple[int, ...]) -> mh.BudgetCheck:
    start = time.perf_counter()
    steps = FACTOR * PAIR_STEPS
    numbers: dict = {"clear": CLEAR}
    for budget in (PAIR_STEPS, steps):
        numbers[str(budget)] = {f"seed {s}": pairs_for(budget, s) for s in seeds}
        print(budget, numbers[str(budget)])
    long = numbers[str(steps)]
    failing = [s for s in seeds if long[f"seed {s}"]["pairs_clearly_below"] == 0]
    n_pairs = len(long[f"seed {seeds[0]}"]["pairs"])
    per_seed = ", ".join(
        f"{long[f'seed {s}']['pairs_clearly_below']} (smallest difference {min(long[f'seed {s}']['difference']):+.3f})"
        for s in seeds
    )
    shows = (
        f"at {steps:,} steps the number of the {n_pairs} pairs that cost clearly more together (by more than "
        f"{CLEAR} of accuracy, interval below 0) is, for seeds {', '.join(map(str, seeds))}: {per_seed}"
    )
    return mh.BudgetCheck(
        id="ch5-quiet-pairs",
        chapter="05_pruning",
        verdict="some pair of the toy model's quietest heads costs clearly more together than its two single costs "
        "add up to",
        criterion=f"every seed has a pair of its 4 quietest heads whose joint cost exceeds the sum of single costs by "
        f"more than {CLEAR} of accuracy, with the 95 % paired-bootstrap interval of the difference below 0",
        chapter_steps=PAIR_STEPS,
        steps=steps,
        seeds=seeds,
        holds=not failing,
        shows=shows,
        numbers=numbers,
        command="python benchmarks/budget_check_05_pruning.py --only pairs",
        meta=meta(time.perf_counter() - start),
    )


def main() -> None:
    global SYM_STEPS, PAIR_STEPS, N_BOOT, ROWS
    parser = arguments(__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", choices=("identical", "pairs"))
    args = parse(parser)
    if args.quick:
        # --quick checks that the script runs (tests/benchmarks/test_benchmarks_run.py): the chapter's budget
        # shrunk, the check still 5x it, over as many seeds, scored on fewer sequences with fewer resamples; its record
        # is written beside the results, never over them.
        SYM_STEPS, PAIR_STEPS, N_BOOT, ROWS = 4, 4, 20, 128
    seeds = tuple(range(args.seeds))
    torch.set_num_threads(1)
    makers = {"identical": identical_heads, "pairs": quiet_pairs}
    for name, make in makers.items():
        if args.only in (None, name):
            check = make(seeds)
            for path in write_budget_check(check):
                print("wrote", path)
            print(check.sentence())


if __name__ == "__main__":
    main()
