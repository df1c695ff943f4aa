"""Wall-clock time to execute each chapter top to bottom on this machine (the course's budget: 90 s on a CPU).

Run: .venv/bin/python benchmarks/chapters.py [chapters/NN_topic.ipynb ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from _report import report
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def main(paths: list[Path]) -> None:
    rows = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        )
        start = time.perf_counter()
        client.execute()
        rows.append({"chapter": path.stem, "seconds": time.perf_counter() - start, "cells": len(nb.cells)})
    report("chapters", ["chapter", "seconds", "cells"], rows)


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]] or sorted((ROOT / "chapters").glob("*.ipynb")))
