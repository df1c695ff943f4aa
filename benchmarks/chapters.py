"""Wall-clock time to execute each chapter top to bottom on this machine (the course's budget: 90 s on a CPU).

Every run executes the notebook in a fresh process and kernel with `make book`'s environment (the Makefile's
BOOK_ENV line, e.g. OMP_WAIT_POLICY=PASSIVE), which must be in place before the kernel imports torch.

Run: .venv/bin/python benchmarks/chapters.py [chapters/NN_topic.ipynb ...]     # each chapter once
     .venv/bin/python benchmarks/chapters.py chapters/05_pruning.ipynb --solo --beside
         # the median of 3 runs alone, and of 3 runs while a second copy of --neighbour (default: the same
         # chapter) executes again and again beside it, as when two book builds share the machine; --solo N: N runs
     --book-env ''    # another environment instead of the Makefile's ('': torch's defaults, the "before")
     --quick          # a two-cell stand-in notebook instead of the chapters, once: checks that the script works
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import arguments, parse, report

ROOT = Path(__file__).resolve().parents[1]


def book_env(makefile: Path = ROOT / "Makefile") -> dict[str, str]:
    """The variables the Makefile's book target sets for jupyter-book (its ``BOOK_ENV := NAME=value ...`` line)."""
    match = re.search(r"^BOOK_ENV\s*:=(.*)$", makefile.read_text(), re.MULTILINE)
    return _parse_env(match.group(1) if match else "")


def _parse_env(text: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in shlex.split(text))


def execute(path: Path) -> dict:
    """Execute one notebook in this process's environment: seconds for the whole notebook, and its cell count."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    return {"seconds": time.perf_counter() - start, "cells": len(nb.cells)}


def _command(path: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--execute-one", str(path)]


def run_once(path: Path, env: dict[str, str]) -> dict:
    """One execution of ``path`` in a child process (and kernel) with ``env`` added to this environment."""
    done = subprocess.run(_command(path), env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_beside(path: Path, neighbour: Path, env: dict[str, str]) -> dict:
    """One execution of ``path`` while ``neighbour`` executes again and again in its own process group."""
    loop = f"while :; do {shlex.join(_command(neighbour))} >/dev/null 2>&1; done"
    busy = subprocess.Popen(["bash", "-c", loop], env={**os.environ, **env}, start_new_session=True)
    try:
        time.sleep(5)  # the neighbour's kernel is up and computing before the measured run starts
        return run_once(path, env)
    finally:
        os.killpg(busy.pid, signal.SIGTERM)  # the loop, its child and the child's kernel
        busy.wait()


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def compare(paths: list[Path], solo: int, beside: int, neighbour: Path | None, env: dict[str, str]) -> None:
    rows = []
    for path in paths:
        other = neighbour or path
        runs = {"solo": [], "beside": []}
        loads = []
        for kind, count in (("solo", solo), ("beside", beside)):
            for _ in range(count):
                loads.append(_load())
                result = run_once(path, env) if kind == "solo" else run_beside(path, other, env)
                runs[kind].append(round(result["seconds"], 1))
                print(f"{path.stem} {kind}: {result['seconds']:.1f} s (load average before: {loads[-1]})", flush=True)
        solo_s = statistics.median(runs["solo"]) if runs["solo"] else float("nan")
        beside_s = statistics.median(runs["beside"]) if runs["beside"] else float("nan")
        rows.append(
            {
                "chapter": path.stem,
                "neighbour": other.stem,
                "solo_s": solo_s,
                "beside_s": beside_s,
                "ratio": beside_s / solo_s,
                "solo_runs": runs["solo"],
                "beside_runs": runs["beside"],
                "load_1min": f"{min(loads)}-{max(loads)}",
            }
        )
    columns = ["chapter", "neighbour", "solo_s", "beside_s", "ratio", "solo_runs", "beside_runs", "load_1min"]
    meta = {"env": env, "solo_runs": solo, "beside_runs": beside, "command": shlex.join(sys.argv)}
    # Solo runs alone are the chapters' own timings (make book's plan line and the landing page read them).
    report("chapters_beside" if beside else "chapters_solo", columns, rows, meta)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--solo", type=int, nargs="?", const=3, default=0, help="N runs alone (default N: 3)")
    parser.add_argument("--beside", type=int, nargs="?", const=3, default=0, help="N runs beside a second build")
    parser.add_argument("--neighbour", type=Path, help="the chapter the second build executes (default: the same)")
    parser.add_argument("--book-env", help="NAME=value ... instead of the Makefile's BOOK_ENV")
    parser.add_argument("--execute-one", type=Path, help=argparse.SUPPRESS)
    args = parse(parser)
    if args.execute_one:
        print(json.dumps(execute(args.execute_one)))
        return
    env = book_env() if args.book_env is None else _parse_env(args.book_env)
    paths = args.paths or sorted((ROOT / "chapters").glob("*.ipynb"))
    if args.quick:
        with tempfile.TemporaryDirectory(prefix="mh-chapters-") as tmp:
            args.solo, args.beside = min(args.solo, 1), min(args.beside, 1)
            return _run([_stand_in(Path(tmp))], args, env)
    _run(paths, args, env)


def _stand_in(folder: Path) -> Path:
    """A two-cell notebook that imports the course package as a chapter does (for --quick)."""
    import nbformat

    cells = [nbformat.v4.new_code_cell("import manyheads as mh"), nbformat.v4.new_code_cell("mh.head_dim(512, 8)")]
    path = folder / "00_stand_in.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def _run(paths: list[Path], args, env: dict[str, str]) -> None:
    if args.solo or args.beside:
        compare(paths, args.solo, args.beside, args.neighbour, env)
        return
    rows = [{"chapter": p.stem, **run_once(p, env)} for p in paths]
    report("chapters", ["chapter", "seconds", "cells"], rows, {"env": env})


if __name__ == "__main__":
    main()
