"""Shared output for the benchmarks: a printed table and a JSON file in benchmarks/results/.

The JSON's meta says where and when: CPU model, date, load average (1, 5, 15 min) when the report was written, since
a timing taken on a machine shared with other work means little without them.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def report(name: str, columns: list[str], rows: list[dict], meta: dict | None = None) -> Path:
    """Print the table, write benchmarks/results/NAME.json; ``meta`` adds the benchmark's own settings."""
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(w) for c, w in zip(columns, widths)))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    meta = {
        **(meta or {}),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    path.write_text(json.dumps({"benchmark": name, "meta": meta, "rows": rows}, indent=2) + "\n")
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
