"""Chapter 6 at full size: induction heads from scratch in a 2-layer attention-only transformer, over seeds.

For each seed, the issue's recipe (vocabulary 64 + BOS, d_model 64, 4 heads, learned positions, AdamW lr 3e-3,
batch 32, 1,500 steps, half-lengths 4-16; ``mh.INDUCTION_RECIPE``) trains a 2-layer model and a 1-layer control.
Reported per seed, on fixed probe batches (16 rows per half-length, ``mh.probe_batches``):

* losses on the first copy (chance: ln 64 = 4.16) and on the announced tokens of the second copy, with mean ln(half)
  (the loss of guessing evenly among r's tokens, which a 1-layer model can reach without induction);
* the step at which the second-copy loss first falls below 1 nat, and whether the induction head's score rises
  "sudden"-ly or "gradual"-ly (``mh.change_words``: sudden when one tenth of the run holds at least half of the rise;
  ``jump_share`` is that largest share), so that a phase change is counted per seed;
* layer 0's best previous-token score and layer 1's best induction score (head indices from 0);
* the induction head's score with all layer-0 heads ablated, with only the best previous-token head ablated, and
  with the layer-0 heads that are not previous-token heads (score < 0.5) ablated (zero ablation; ablating other
  layer-1 heads cannot move a layer-1 pattern, so they are no control);
* the path test: the previous-token head removed from layer 1's queries, keys or values only (induction score, and
  the second-copy loss, which is what the value path changes), and all of layer 0 removed from the queries only or
  the keys only: which composition the seed's induction head uses (K in the textbook circuit, Q in some seeds).

``seconds`` is wall-clock time per training run, ``cpu_s`` the process's CPU time over it (the loop runs on one
thread), which depends less on what else the machine is running.

Run: .venv/bin/python benchmarks/induction.py [--seeds 5] [--steps 1500] [--quick]
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from _report import arguments, parse, report

import manyheads as mh


def two_layer_row(seed: int, config, task, probes) -> dict:
    cpu = time.process_time()
    run = mh.train_induction_model(seed=seed, n_layers=2, task=task, config=config, probes=probes, progress=False)
    cpu = time.process_time() - cpu
    (_, prev_head), target = run.best_heads()
    final = run.final
    model = run.model
    below = [step for step, loss in zip(run.steps, run.second_loss) if loss < 1.0]
    curve = run.induction[:, target[0], target[1]].tolist()
    span = max(1, round(0.1 * (len(curve) - 1)))
    jump = max((curve[i + span] - curve[i]) / (curve[-1] - curve[0]) for i in range(len(curve) - span))
    with mh.ablated(model, [(0, h) for h in range(model.n_heads)]):
        layer0_off = mh.repeat_metrics(model, probes)
    with mh.ablated(model, (0, prev_head)):
        prev_off = mh.repeat_metrics(model, probes)
    previous_heads = [h for h in range(model.n_heads) if final.previous[0, h] >= mh.PREVIOUS_TOKEN_THRESHOLD]
    others = [(0, h) for h in range(model.n_heads) if h not in previous_heads]
    with mh.ablated(model, others):
        others_off = mh.repeat_metrics(model, probes)
    paths = mh.composition_test(model, probes, (0, prev_head))
    whole_layer = mh.composition_test(model, probes, [(0, h) for h in range(model.n_heads)])
    return {
        "layers": 2,
        "seed": seed,
        "seconds": round(run.seconds, 1),
        "cpu_s": round(cpu, 1),
        "first": final.first,
        "second": final.second,
        "ln_half": final.log_half,
        "phase_step": below[0] if below else None,
        "change": mh.change_words(curve),
        "jump_share": round(jump, 2),
        "prev_head": prev_head,
        "prev_score": final.previous[0, prev_head].item(),
        "n_prev_l0": len(previous_heads),
        "ind_head": target[1],
        "ind_score": final.induction[target].item(),
        "abl_layer0": layer0_off.induction[target].item(),
        "abl_prev": prev_off.induction[target].item(),
        "abl_non_prev_l0": others_off.induction[target].item(),
        "loss_abl_layer0": layer0_off.second,
        "q_score": paths["q"].induction[target].item(),
        "k_score": paths["k"].induction[target].item(),
        "v_score": paths["v"].induction[target].item(),
        "q_loss": paths["q"].second,
        "k_loss": paths["k"].second,
        "v_loss": paths["v"].second,
        "q_all_l0": whole_layer["q"].induction[target].item(),
        "k_all_l0": whole_layer["k"].induction[target].item(),
    }


def one_layer_row(seed: int, config, task, probes) -> dict:
    cpu = time.process_time()
    run = mh.train_induction_model(seed=seed, n_layers=1, task=task, config=config, probes=probes, progress=False)
    cpu = time.process_time() - cpu
    final = run.final
    return {
        "layers": 1,
        "seed": seed,
        "seconds": round(run.seconds, 1),
        "cpu_s": round(cpu, 1),
        "first": final.first,
        "second": final.second,
        "ln_half": final.log_half,
        "ind_score": final.induction[0].max().item(),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seeds", type=int, default=5, help="seeds per model (0, 1, …)")
    parser.add_argument("--steps", type=int, default=mh.INDUCTION_RECIPE.steps, help="training steps")
    args = parse(parser)
    if args.quick:
        args.seeds, args.steps = 1, 100
    task = mh.RepeatedHalvesTask()
    config = replace(mh.INDUCTION_RECIPE, steps=args.steps)
    probes = mh.probe_batches(task)
    start = time.perf_counter()
    rows = [two_layer_row(seed, config, task, probes) for seed in range(args.seeds)]
    rows += [one_layer_row(seed, config, task, probes) for seed in range(args.seeds)]
    print(
        f"{args.seeds} seeds × 2 models, {args.steps} steps each: {time.perf_counter() - start:.0f} s; "
        f"load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    columns = list(rows[0])
    for row in rows:
        for column in columns:
            row.setdefault(column, "")
    report("induction", columns, rows)


if __name__ == "__main__":
    main()
