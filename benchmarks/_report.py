"""Shared options and output for the benchmarks: a printed table and a JSON file in benchmarks/results/.

Every script takes the same two options (:func:`arguments`, :func:`parse`): ``--quick``, a small run that only
checks that the script still works (its JSON is named ``<name>_quick.json``, which git ignores, and never replaces a
committed result), and ``--results DIR``, which writes the JSON into DIR instead of benchmarks/results/.
tests/benchmarks/test_benchmarks_run.py runs every script with both, so a benchmark that stops working fails the tests.

The JSON's meta says where and when: CPU model, date, load average (1, 5, 15 min) when the report was written, since
a timing taken on a machine shared with other work means little without them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"


class _Output:
    """Where this run writes (set once by :func:`parse`)."""

    folder: Path | None = None  # --results: None writes the committed results
    quick: bool = False


def arguments(doc: str | None, **kwargs) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes (``--quick``, ``--results``); the script adds its
    own. ``doc`` is the script's docstring: its first line is the description, the rest the help's epilogue."""
    parser = argparse.ArgumentParser(
        description=(doc or "").strip().splitlines()[0] if doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small run that checks the script works (its numbers are not results; written as <name>_quick.json)",
    )
    parser.add_argument(
        "--results", type=Path, metavar="DIR", help="write the JSON here instead of benchmarks/results/ (committed)"
    )
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line and remember where the run writes."""
    args = parser.parse_args(argv)
    _Output.folder, _Output.quick = args.results, args.quick
    return args


def destination(name: str, folder: str | None = None) -> Path:
    """The JSON file a result called ``name`` goes to (in ``folder`` under the results, when given)."""
    base = _Output.folder if _Output.folder is not None else RESULTS
    if folder:
        base = base / folder
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{name}{'_quick' if _Output.quick else ''}.json"


def write_budget_check(check) -> list[Path]:
    """A budget check's record: the committed one and the package's copy (``mh.write_budget_check``), or, for a
    quick run or one with ``--results``, only a file there (the committed records stay as they are)."""
    if _Output.folder is None and not _Output.quick:
        import manyheads as mh

        return mh.write_budget_check(check, ROOT)
    path = destination(check.id, "budget_checks" if _Output.folder is not None else None)
    if _Output.folder is None:  # quick, into benchmarks/results/: a top-level *_quick.json, which git ignores
        path = RESULTS / f"budget_check_{check.id}_quick.json"
    path.write_text(check.to_json(), encoding="utf-8")
    return [path]


def command() -> str:
    """The command line that produced a result, for its meta (relative to the repository)."""
    import shlex

    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return shlex.join([str(script), *sys.argv[1:]])


def report(name: str, columns: list[str], rows: list[dict], meta: dict | None = None) -> Path:
    """Print the table, write benchmarks/results/NAME.json; ``meta`` adds the benchmark's own settings."""
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(w) for c, w in zip(columns, widths)))
    path = destination(name)
    meta = {
        "command": command(),
        **(meta or {}),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    # default=str: a setting such as --results DIR (a Path) is written as its text
    path.write_text(json.dumps({"benchmark": name, "meta": meta, "rows": rows}, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")
    return path


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_meta(seconds: float, **more) -> dict:
    """Where and when a budget check ran (benchmarks/budget_check_*.py): UTC time, CPU, Python, its wall-clock
    seconds, and any settings the script adds."""
    return {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "seconds": round(seconds, 1),
        **more,
    }


def first_step(steps: list[int], values: list[float], level: float) -> int | None:
    """The first logged step at which a learning curve reaches ``level`` (None if it never does)."""
    return next((s for s, v in zip(steps, values) if v >= level), None)
