"""What the own-work guard (manyheads.checks.own_work) costs: kernel start-up and each call of a guarded function.

Start-up: a fresh interpreter that imports ipykernel's kernel application (what every grading kernel does) with and
without the guard's two lines from the launcher, median of N runs. Calls: unguarded, guarded with no rule in force
(the book, Colab outside a check), and guarded with the grading rule in force (the frame walk), median over
repeats; ``mh.head_dim`` is the guarded function, because it is cheap enough for the guard's own cost to show.

    python benchmarks/own_work_guard.py [--runs 15] [--quick] [--results DIR]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from _report import arguments, parse, report

STEM = "01_single_head_bottleneck"
BASE = "import ipykernel.kernelapp"
GUARD = f"{BASE}\nfrom manyheads.checks.own_work import require_own_work\nrequire_own_work({STEM!r})"

CALLS = r"""
import statistics, sys, time
import manyheads.costs as costs
from manyheads.checks import own_work as guard
def per_call(n=int(sys.argv[2])):  # a cheap guarded function, so that the guard's own cost shows
    runs = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(n):
            costs.head_dim(512, 8)
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)
plain = per_call()
guard._guard_object(costs.head_dim, "manyheads.costs.head_dim")
idle = per_call()
guard.require_own_work(sys.argv[1])
ruled = per_call()
print(plain, idle, ruled)
"""


def start_up(code: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parse(parser)
    calls = 20000
    if args.quick:
        args.runs, calls = 1, 200
    start_up(BASE, 2)  # warm the file cache
    base, guarded = start_up(BASE, args.runs), start_up(GUARD, args.runs)
    done = subprocess.run(
        [sys.executable, "-c", CALLS, "03_head_size", str(calls)], capture_output=True, text=True, check=True
    )
    plain, idle, ruled = (float(x) for x in done.stdout.split())
    report(
        "own_work_guard",
        ["what", "without guard", "with guard", "added"],
        [
            {
                "what": "kernel start-up, ms (median)",
                "without guard": base * 1e3,
                "with guard": guarded * 1e3,
                "added": (guarded - base) * 1e3,
            },
            {"what": "guarded call, no rule, µs", "without guard": plain, "with guard": idle, "added": idle - plain},
            {
                "what": "guarded call, grading rule, µs",
                "without guard": plain,
                "with guard": ruled,
                "added": ruled - plain,
            },
        ],
    )


if __name__ == "__main__":
    main()
