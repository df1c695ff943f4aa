"""Shared output for the benchmarks: a printed table and a JSON file in benchmarks/results/."""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def report(name: str, columns: list[str], rows: list[dict]) -> Path:
    widths = [max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(w) for c, w in zip(columns, widths)))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    meta = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    path.write_text(json.dumps({"benchmark": name, "meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {path}")
    return path


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
