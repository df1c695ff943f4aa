"""``manyheads grade`` of one class by an earlier release's grader and by this checkout's, interleaved.

    git worktree add ../old <the release commit>        # e.g. the commit "Release 0.7.0 ..."
    .venv/bin/python tools/compare_grading.py ../old [--submissions 60] [--rounds 3] [--results FILE]

The same N submissions of exercise 1 (``tests/helpers/grading_corpus.build_plain``: correct, partly correct and blank
in turn) are graded with the default ``--jobs``, alternately by the old checkout and by this one, ``--rounds`` times
each; it prints every run and the medians (JSON to ``--results``). Each version runs from its own checkout, course
package and grader together: for its runs the virtual environment's editable installs (``.pth`` files) are pointed
at it, and they are pointed back here at the end, also after an error. Run it on a quiet machine, and nothing else
from this virtual environment meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import grading_corpus as corpus  # noqa: E402

SITE = Path(sysconfig.get_paths()["purelib"])


def _point_at(root: Path) -> None:
    """The editable installs of the course package and the grader, pointed at ``root``."""
    for pth, folder in (("__editable__.manyheads-*.pth", "src"), ("__editable__.manyheads_grader-*.pth", "grader/src")):
        for path in SITE.glob(pth):
            path.write_text(f"{root / folder}\n")


def _grade(root: Path, subs: Path, out: Path) -> float:
    python = str(Path(sys.executable))
    which = subprocess.run(
        [python, "-c", "import manyheads, manyheads_grader; print(manyheads.__file__, manyheads_grader.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if which.count(str(root)) != 2:
        raise SystemExit(f"the grader imported is not {root}'s: {which}")
    env = {**os.environ, "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [python, "-m", "manyheads_grader", "grade", corpus.EX1, str(subs), "--out", str(out), "--quiet"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{root}: manyheads grade failed\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="a checkout of the earlier release")
    parser.add_argument("--submissions", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", type=Path, help="write the runs and medians here (JSON)")
    args = parser.parse_args()
    old = args.old.resolve()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    versions = {f"old {old.name}": old, f"this checkout {head.stdout.strip()}": ROOT}
    runs: dict[str, list[float]] = {label: [] for label in versions}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            subs = Path(tmp) / "subs"
            corpus.build_plain(subs, args.submissions)
            for i in range(args.rounds):
                for k, (label, root) in enumerate(versions.items()):
                    _point_at(root)
                    runs[label].append(round(_grade(root, subs, Path(tmp) / f"out-{k}-{i}"), 2))
                    print(f"{label}, round {i + 1}: {runs[label][-1]:.1f} s", flush=True)
    finally:
        _point_at(ROOT)
    medians = {label: statistics.median(values) for label, values in runs.items()}
    old_s, new_s = medians.values()
    result = {
        "submissions": args.submissions,
        "rounds": args.rounds,
        "runs_s": runs,
        "median_s": medians,
        "change": round(new_s / old_s - 1, 4),
        "cores": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    print(json.dumps(result, indent=2))
    if args.results:
        args.results.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
