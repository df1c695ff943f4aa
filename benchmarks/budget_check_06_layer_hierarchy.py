"""Budget checks for chapter 6's verdicts from training the toy induction models (1,500 steps, seeds 0 and 1).

The chapter trains ``mh.INDUCTION_RECIPE`` (AdamW, lr 3e-3, batch 32, no schedule, 1,500 steps) on
``mh.RepeatedHalvesTask()``: two 2-layer attention-only models (seeds 0 and 1) and a 1-layer control (seed 0). This
script trains the same recipe 5x longer (7,500 steps) from 3 seeds, 2-layer and 1-layer, with ``benchmarks/
induction.py``'s functions where they fit. The optimiser has no schedule and evaluation draws no training batches,
so the first 1,500 steps of each run are the chapter's run (seeds 0 and 1): the record's 1,500-step numbers are the
chapter's, measured on the same probe batches (``mh.probe_batches``) from a snapshot of the weights at step 1,500.

Four records, one per verdict the chapter draws from this training:

* ``ch6-one-layer-no-induction``: a 1-layer model forms no induction head. Holds if every 1-layer seed ends with its
  best induction score below 0.5 and its second-copy loss above 1 nat (every 2-layer seed falls below 1 nat).
* ``ch6-two-layer-needs-layer0``: every 2-layer seed forms an induction head (score >= 0.5, second-copy loss below
  1 nat) that needs layer 0 (ablating all of layer 0 leaves less than half of its induction score).
* ``ch6-composition-varies``: seeds build it by different routes, some through layer 1's keys (K-composition) and
  some through its queries (Q-composition), and each keeps its route when trained longer. The route is the input
  (queries or keys) from which removing all of layer 0 hurts the induction head more (``composition_test``).
* ``ch6-sharpness-varies``: how sharply the induction head forms varies between seeds. Holds if, at the longer
  budget, at least one seed's rise is "sudden" and one's is not, judged by ``mh.change_words``'s cut (a stretch of
  one tenth of the chapter's run, 150 steps, holds at least half of the rise from step 0 to the end).

Run: .venv/bin/python benchmarks/budget_check_06_layer_hierarchy.py [--steps 7500] [--seeds 3] [--processes 2]
       [--cache DIR]   (--cache keeps each trained run, so that a stopped run resumes and the records can be rewritten
       without training)
Writes benchmarks/results/budget_checks/ch6-*.json and the package's copies.
"""

from __future__ import annotations

import copy
import io
import multiprocessing
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch
from _report import arguments, cpu_model, parse, write_budget_check

import manyheads as mh
from manyheads.analysis.induction import _train_to_bytes

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "06_layer_hierarchy"
RECIPE = mh.INDUCTION_RECIPE  # the chapter's recipe (a quick run logs its curves more often)
CHAPTER_STEPS = RECIPE.steps  # 1,500
LEVEL = 0.5  # an induction head: induction score >= 0.5 (as the chapter counts SmolLM2's)
COPIES = 1.0  # nats: the second-copy loss below which a model copies (the chapter's "first drops below 1 nat")


def jump_share(curve: list[float], span: int) -> float:
    """The largest share of the rise from the curve's first to last value held by ``span`` consecutive logged
    steps (``mh.change_words`` calls the rise "sudden" when it is at least 0.5 for a tenth of the run)."""
    rise = curve[-1] - curve[0]
    return max((curve[i + span] - curve[i]) / rise for i in range(len(curve) - span))


def layer0_tests(model, probes, target: tuple[int, int]) -> dict:
    """The induction head ``target``'s score with all of layer 0 ablated, and removed from layer 1's queries only or
    keys only (``mh.composition_test``), and the route that follows."""
    layer0 = [(0, h) for h in range(model.n_heads)]
    with mh.ablated(model, layer0):
        ablated = mh.repeat_metrics(model, probes)
    whole = mh.composition_test(model, probes, layer0)
    q, k = whole["q"].induction[target].item(), whole["k"].induction[target].item()
    return {
        "abl_layer0": round(ablated.induction[target].item(), 4),
        "loss_abl_layer0": round(ablated.second, 4),
        "q_all_l0": round(q, 4),
        "k_all_l0": round(k, 4),
        "route": "K" if k < q else "Q",
    }


def at_step(run, step: int, probes, span: int) -> dict:
    """A 2-layer run's numbers at ``step`` (a snapshot's weights), with the curves up to that step."""
    model = copy.deepcopy(run.model)
    model.load_state_dict(run.snapshots[step])
    index = run.steps.index(step)
    metrics = run.history[index]
    target = (1, int(metrics.induction[1].argmax()))
    curve = run.induction[: index + 1, 1, target[1]].tolist()
    below = [s for s, loss in zip(run.steps[: index + 1], run.second_loss[: index + 1]) if loss < COPIES]
    return {
        "first": round(metrics.first, 4),
        "second": round(metrics.second, 4),
        "ind_head": target[1],
        "ind_score": round(metrics.induction[target].item(), 4),
        "prev_score_l0": round(metrics.previous[0].max().item(), 4),
        "phase_step": below[0] if below else None,
        "jump_share": round(jump_share(curve, span), 4),
        "jump_share_tenth_of_run": round(jump_share(curve, max(1, round(0.1 * (len(curve) - 1)))), 4),
        "change": mh.change_words(curve),
        **layer0_tests(model, probes, target),
    }


def train_all(seeds, steps: int, processes: int, cache: Path | None) -> list:
    """The 2-layer runs, then the 1-layer runs, of ``seeds``, ``processes`` at a time (one thread each). With
    ``cache`` (a folder), each run is saved there as soon as it finishes and a run already saved is not retrained."""
    config = replace(RECIPE, steps=steps)
    jobs = [{"seed": s, "config": config, "snapshot_every": CHAPTER_STEPS} for s in seeds]
    jobs += [{"seed": s, "n_layers": 1, "config": config} for s in seeds]
    paths = [
        None if cache is None else cache / f"{job.get('n_layers', 2)}-layer-seed-{job['seed']}-{steps}.pt"
        for job in jobs
    ]
    todo = [(job, path) for job, path in zip(jobs, paths) if path is None or not path.is_file()]
    if todo:
        if cache is not None:
            cache.mkdir(parents=True, exist_ok=True)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(processes, len(todo)), mp_context=context) as pool:
            futures = {pool.submit(_train_to_bytes, job): path for job, path in todo}
            for future in as_completed(futures):
                if futures[future] is not None:
                    futures[future].write_bytes(future.result())
                print("trained", futures[future] or "a run", flush=True)
            if cache is None:
                return [torch.load(io.BytesIO(f.result()), weights_only=False) for f in futures]
    return [torch.load(path, weights_only=False) for path in paths]


def main() -> None:
    global CHAPTER_STEPS, RECIPE
    parser = arguments(__doc__)
    parser.add_argument("--steps", type=int, default=5 * CHAPTER_STEPS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--cache", type=Path, help="a folder: keep each trained run there, and reuse those found")
    args = parse(parser)
    if args.quick:
        # --quick checks that the script runs (tests/benchmarks/test_benchmarks_run.py): the chapter's budget
        # shrunk (its curves logged every 5 steps, not 50), the check still 5x it, over as many seeds, trained in one
        # worker process; its record is written beside the results, never over them.
        RECIPE = replace(mh.INDUCTION_RECIPE, eval_every=5)
        CHAPTER_STEPS = 2 * RECIPE.eval_every  # the fewest steps whose curve has three points
        args.steps, args.processes = 5 * CHAPTER_STEPS, 1
        torch.set_num_threads(1)  # the analysis too, like the workers: a quick run shares the machine with other work
    seeds = tuple(range(args.seeds))
    start = time.perf_counter()
    runs = train_all(seeds, args.steps, args.processes, args.cache)
    seconds = time.perf_counter() - start
    two, one = runs[: len(seeds)], runs[len(seeds) :]
    probes = mh.probe_batches(mh.RepeatedHalvesTask())
    span = max(1, round(0.1 * CHAPTER_STEPS / RECIPE.eval_every))  # 150 steps: a tenth of the chapter's run
    short, long = str(CHAPTER_STEPS), str(args.steps)

    two_layer = {
        f"seed {run.seed}": {
            short: at_step(run, CHAPTER_STEPS, probes, span),
            long: at_step(run, args.steps, probes, span),
        }
        for run in two
    }
    one_layer = {}
    for run in one:
        index = run.steps.index(CHAPTER_STEPS)
        one_layer[f"seed {run.seed}"] = {
            budget: {
                "first": round(run.history[i].first, 4),
                "second": round(run.history[i].second, 4),
                "best_induction": round(run.history[i].induction.max().item(), 4),
            }
            for budget, i in ((short, index), (long, len(run.steps) - 1))
        }
    ln_half = round(one[0].final.log_half, 4)
    meta = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "seconds": round(seconds, 1),  # this invocation (training, or reading --cache)
        "train_seconds": {f"{r.n_layers} layers, seed {r.seed}": round(r.seconds, 1) for r in runs},  # wall clock
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "runs": f"{len(seeds)} seeds x (2-layer, 1-layer), {args.processes} processes of one thread each",
    }
    command = "python benchmarks/budget_check_06_layer_hierarchy.py"
    common = {"chapter": CHAPTER, "chapter_steps": CHAPTER_STEPS, "steps": args.steps, "seeds": seeds}
    common.update(command=command, meta=meta)
    n = len(seeds)

    # 1. One layer forms no induction head.
    ones = [v[long] for v in one_layer.values()]
    holds = all(v["best_induction"] < LEVEL and v["second"] > COPIES for v in ones)
    low, high = min(v["second"] for v in ones), max(v["second"] for v in ones)
    two_low = min(v[long]["second"] for v in two_layer.values())
    two_high = max(v[long]["second"] for v in two_layer.values())
    if high < ln_half - 0.1:
        versus = f"below mean ln(half) = {ln_half:.2f}, so one layer learns more than an even guess among r's tokens"
    elif low > ln_half + 0.1:
        versus = f"above mean ln(half) = {ln_half:.2f}"
    else:
        versus = f"near mean ln(half) = {ln_half:.2f}"
    checks = [
        mh.BudgetCheck(
            id="ch6-one-layer-no-induction",
            verdict="a 1-layer model forms no induction head",
            criterion=f"every 1-layer seed ends with its best induction score below {LEVEL} and its second-copy "
            f"loss above {COPIES:g} nat",
            holds=holds,
            shows=f"at {args.steps:,} steps the {n} one-layer seeds end with second-copy losses of {low:.2f} to "
            f"{high:.2f} nats, {versus}, but their best induction scores stay at "
            f"{min(v['best_induction'] for v in ones):.2f} to {max(v['best_induction'] for v in ones):.2f} and their "
            f"losses {'far ' if low > 2 * two_high else ''}above the two-layer seeds' {two_low:.2f} to {two_high:.2f}.",
            numbers={"ln_half": ln_half, "level": LEVEL, "copies_below": COPIES, "one_layer": one_layer},
            **common,
        )
    ]

    # 2. Every 2-layer seed forms an induction head, and it needs layer 0.
    longs = {seed: v[long] for seed, v in two_layer.items()}
    formed = all(v["ind_score"] >= LEVEL and v["second"] < COPIES for v in longs.values())
    needs = all(v["abl_layer0"] < 0.5 * v["ind_score"] for v in longs.values())
    checks.append(
        mh.BudgetCheck(
            id="ch6-two-layer-needs-layer0",
            verdict="every 2-layer seed builds its induction head on layer 0",
            criterion=f"every 2-layer seed ends with an induction score >= {LEVEL} and a second-copy loss below "
            f"{COPIES:g} nat, and ablating all of layer 0 leaves less than half of that score",
            holds=formed and needs,
            shows=f"at {args.steps:,} steps the {n} two-layer seeds' induction heads score "
            f"{min(v['ind_score'] for v in longs.values()):.2f} to {max(v['ind_score'] for v in longs.values()):.2f}"
            f" (second-copy loss {min(v['second'] for v in longs.values()):.2f} to "
            f"{max(v['second'] for v in longs.values()):.2f} nats), and "
            f"{min(v['abl_layer0'] for v in longs.values()):.2f} to "
            f"{max(v['abl_layer0'] for v in longs.values()):.2f} with layer 0 ablated.",
            numbers={"level": LEVEL, "copies_below": COPIES, "two_layer": two_layer},
            **common,
        )
    )

    # 3. Seeds build it by different routes, and each keeps its route.
    routes = {seed: (v[short]["route"], v[long]["route"]) for seed, v in two_layer.items()}
    kept = all(a == b for a, b in routes.values())
    both = {b for _, b in routes.values()} == {"K", "Q"}
    route_words = "; ".join(
        f"{seed}: {a} at {CHAPTER_STEPS:,}, {b} at {args.steps:,} (keys {v[long]['k_all_l0']:.2f}, queries "
        f"{v[long]['q_all_l0']:.2f})"
        for (seed, (a, b)), v in zip(routes.items(), two_layer.values())
    )
    checks.append(
        mh.BudgetCheck(
            id="ch6-composition-varies",
            verdict="the seeds do not all take the same route from layer 0 to the induction head, some going "
            "through layer 1's keys (K-composition) and some through its queries (Q-composition)",
            criterion="at the longer budget at least one seed uses each route, and every seed uses the route it used "
            f"at {CHAPTER_STEPS:,} steps (route: the input of layer 1 from which removing all of layer 0 leaves the "
            "lower induction score)",
            holds=kept and both,
            shows=f"routes per seed ({route_words}; the score left with all of layer 0 removed from that input alone).",
            numbers={
                "routes": {seed: {"short": a, "long": b} for seed, (a, b) in routes.items()},
                "two_layer": two_layer,
            },
            **common,
        )
    )

    # 4. Sharpness varies between seeds.
    shares = {seed: v[long]["jump_share"] for seed, v in two_layer.items()}
    varies = any(s >= 0.5 for s in shares.values()) and any(s < 0.5 for s in shares.values())
    share_words = ", ".join(
        f"{seed} {two_layer[seed][short]['jump_share']:.2f} → {s:.2f}" for seed, s in shares.items()
    )
    checks.append(
        mh.BudgetCheck(
            id="ch6-sharpness-varies",
            verdict="the sharpness with which the induction head forms varies between seeds",
            criterion=f"at the longer budget at least one seed's steepest {span * RECIPE.eval_every}-step "
            "stretch holds at least half of its induction score's rise from step 0 to the end, and at least one "
            "seed's holds less",
            holds=varies,
            shows=f"the share of the rise held by the steepest {span * RECIPE.eval_every} steps, at "
            f"{CHAPTER_STEPS:,} → {args.steps:,} steps, is {share_words} (0.5 is the cut between a jump and a "
            f"gradual rise); with one tenth of the longer run ({round(0.1 * args.steps):,} steps) as the window, "
            f"{sum(v[long]['change'] == 'sudden' for v in two_layer.values())} of {n} seeds would count as sudden, "
            "so the cut's window decides the word.",
            numbers={"span_steps": span * RECIPE.eval_every, "cut": 0.5, "two_layer": two_layer},
            **common,
        )
    )
    for check in checks:
        for path in write_budget_check(check):
            print("wrote", path)
        print(check.sentence(), "\n")


if __name__ == "__main__":
    main()
