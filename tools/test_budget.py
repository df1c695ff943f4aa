"""The test suite's time budget (tests/budget.toml), checked at the end of ``make test``.

``make test`` runs three steps of this tool around pytest:

1. ``calibrate`` (before pytest, on a quiet machine): times three small fixed workloads that stand for what the
   suite does (start Python and import torch, run Python code, run torch on one thread) and writes this machine's
   speed relative to the reference machine the budgets were measured on (``speed`` 1.0 there, 2.0 on a machine
   that takes twice as long) to ``_build/test-speed.json``.
2. pytest writes its JUnit report (``--junitxml=_build/test-report.xml``): every test's seconds, set-up and
   teardown included, and the whole run's.
3. ``check``: each test folder's seconds (the sum over its tests, both workers together) and pytest's wall time
   against their budgets times the speed (never
   less than 1: :func:`scale`). A figure more than ``margin`` (25 %) over its scaled budget fails the
   step, with the folder's slowest tests named, so that the change that made the suite slow fails where it is made.
   A folder with no budget fails too: a new folder of tests starts with one. The figures go to
   ``_build/test-durations.json``.

Run: .venv/bin/python tools/test_budget.py calibrate | check [REPORT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = ROOT / "tests" / "budget.toml"
SPEED = ROOT / "_build" / "test-speed.json"
REPORT = ROOT / "_build" / "test-report.xml"
DURATIONS = ROOT / "_build" / "test-durations.json"
TIMELINE = ROOT / "_build" / "test-timeline.jsonl"  # written by tests/conftest.py: each test phase's worker and times
SLOWEST = 8  # tests named per folder over budget


# --- the machine's speed --------------------------------------------------------------------------------------------


def _python_code() -> float:
    start, total = time.perf_counter(), 0
    for i in range(3_000_000):
        total += i * i % 7
    return time.perf_counter() - start


def _torch_import() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.perf_counter() - start


def _torch_ops() -> float:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    a = torch.randn(256, 256)
    start = time.perf_counter()
    for _ in range(200):
        (a @ a).softmax(-1)
    return time.perf_counter() - start


WORKLOADS = {"torch_import_s": _torch_import, "python_code_s": _python_code, "torch_ops_s": _torch_ops}


REPEATS = {"torch_import_s": 3, "python_code_s": 5, "torch_ops_s": 5}  # about 12 s on the reference machine


def measure() -> dict[str, float]:
    """Seconds of each workload: the fastest of its runs (the one least disturbed by anything else)."""
    return {name: min(work() for _ in range(REPEATS[name])) for name, work in WORKLOADS.items()}


def speed(measured: dict[str, float], reference: dict[str, float]) -> float:
    """How many times longer this machine takes than the reference: the geometric mean of the workloads' ratios."""
    ratios = [measured[name] / reference[name] for name in WORKLOADS]
    return statistics.geometric_mean(ratios)


def scale(measured: float) -> float:
    """The factor the budgets are multiplied by: the measured speed, but never below 1.

    The workloads run alone on a quiet machine for a few seconds; the suite runs for half an hour with both cores
    busy. A machine that reads faster than the reference need not run the suite faster: CI read 0.78x the first
    reference while its suite took 8 % longer than on the reference machine, and the reference machine itself read
    from 0.80x to 1.03x in runs minutes apart. So a fast reading never tightens the budgets (a false failure); a
    slow one still loosens them, as a slow machine does run the suite slower."""
    return max(1.0, measured)


# --- the report -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    wall_s: float  # pytest's own time for the whole run
    tests: dict[str, float]  # test id (path::name) -> seconds, set-up and teardown included


def read_report(path: Path) -> Run:
    """The JUnit XML that pytest writes (``--junitxml``), with or without pytest-xdist."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests: dict[str, float] = {}
    for case in root.iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = f"{module}.py::{case.get('name')}"
        tests[name] = tests.get(name, 0.0) + float(case.get("time") or 0.0)
    return Run(sum(float(s.get("time") or 0.0) for s in suites), tests)


def folder_of(test: str) -> str:
    """``tests/book`` for ``tests/book/test_book.py::test_x`` (a class name, if any, is part of the module part)."""
    return "/".join(test.split("::")[0].split("/")[:2])


def by_folder(run: Run) -> dict[str, float]:
    sums: dict[str, float] = {}
    for test, seconds in run.tests.items():
        sums[folder_of(test)] = sums.get(folder_of(test), 0.0) + seconds
    return sums


def problems(run: Run, budget: dict, factor: float) -> list[str]:
    """What is over budget (more than the margin over budget × speed), each with the tests to look at."""
    margin = budget["margin"]
    found = []
    limit = budget["suite"]["pytest_wall_s"] * factor
    if run.wall_s > limit * (1 + margin):
        found.append(
            f"the whole run took {run.wall_s:.0f} s of pytest: over its budget of {limit:.0f} s "
            f"(+{margin:.0%} allowed); the folders below say where"
        )
    folders = budget["folders"]
    for folder, seconds in sorted(by_folder(run).items()):
        if folder not in folders:
            found.append(f"{folder} has no budget: give it one in {BUDGET.relative_to(ROOT)} ({seconds:.0f} s now)")
            continue
        limit = folders[folder] * factor
        if seconds > limit * (1 + margin):
            mine = sorted(((s, t) for t, s in run.tests.items() if folder_of(t) == folder), reverse=True)
            slow = "\n".join(f"    {s:7.1f} s  {t}" for s, t in mine[:SLOWEST])
            found.append(
                f"{folder} took {seconds:.0f} s: over its budget of {limit:.0f} s (+{margin:.0%} allowed). "
                f"Its slowest tests:\n{slow}"
            )
    return found


def table(run: Run, budget: dict, factor: float) -> str:
    sums = by_folder(run)
    lines = [f"{'':22}{'seconds':>9}{'budget':>9}{'x speed':>9}"]
    for folder in sorted(set(sums) | set(budget["folders"])):
        limit = budget["folders"].get(folder)
        shown = f"{limit:9.0f}{limit * factor:9.0f}" if limit is not None else f"{'-':>9}{'-':>9}"
        lines.append(f"{folder:22}{sums.get(folder, 0.0):9.0f}{shown}")
    wall = budget["suite"]["pytest_wall_s"]
    lines.append(f"{'pytest wall time':22}{run.wall_s:9.0f}{wall:9.0f}{wall * factor:9.0f}")
    return "\n".join(lines)


def workers(timeline: Path = TIMELINE) -> str:
    """Each pytest worker's busy time and when it finished (from the run's start): an idle worker at the end means
    the last files are too big for the other one to share."""
    if not timeline.is_file():
        return ""
    rows = [json.loads(line) for line in timeline.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        return ""
    start = min(r["start"] for r in rows)
    lines = []
    for worker in sorted({r["worker"] for r in rows}):
        mine = [r for r in rows if r["worker"] == worker]
        busy = sum(r["stop"] - r["start"] for r in mine)
        end = max(r["stop"] for r in mine) - start
        lines.append(f"  {worker}: busy {busy:.0f} s, finished {end:.0f} s after the start")
    return "\n".join(["Workers:", *lines])


# --- the commands ---------------------------------------------------------------------------------------------------


def load_budget(path: Path = BUDGET) -> dict:
    import tomllib  # Python 3.11+, as the development environment (the package itself admits 3.10)

    return tomllib.loads(path.read_text(encoding="utf-8"))


def calibrate(out: Path = SPEED, budget: dict | None = None) -> dict:
    budget = budget or load_budget()
    measured = measure()
    found = {
        "measured": measured,
        "reference": budget["reference"],
        "speed": speed(measured, budget["reference"]),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    return found


def check(report: Path = REPORT, speed_file: Path = SPEED, budget: dict | None = None, out: Path = DURATIONS) -> int:
    budget = budget or load_budget()
    measured = json.loads(speed_file.read_text(encoding="utf-8"))["speed"] if speed_file.is_file() else 1.0
    factor = scale(measured)
    run = read_report(report)
    print(
        f"Test time against tests/budget.toml (this machine takes {measured:.2f}x the reference's time; "
        f"budgets x {factor:.2f}):"
    )
    print(table(run, budget, factor))
    print(workers())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"speed": factor, "wall_s": run.wall_s, "folders": by_folder(run), "tests": run.tests}, indent=1)
        + "\n",
        encoding="utf-8",
    )
    found = problems(run, budget, factor)
    if found:
        print("\nOver budget: make the tests named below faster (share an expensive set-up, test the same thing with")
        print("less), or, if the time is worth it, raise the budget in tests/budget.toml and say why there.\n")
        print("\n".join(found))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("calibrate", help="measure this machine's speed against the reference's")
    checking = sub.add_parser("check", help="the JUnit report's times against the budget")
    checking.add_argument("report", nargs="?", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        found = calibrate()
        parts = ", ".join(f"{k} {v:.3f}" for k, v in found["measured"].items())
        print(f"this machine takes {found['speed']:.2f}x the reference's time ({parts})")
        return 0
    return check(args.report)


if __name__ == "__main__":
    sys.exit(main())
