"""Rescoring a class: ``manyheads rescore`` (issue 37, item 3) remakes every output of a graded class from the grades
kept in OUT (totals with the late policy, grades.csv, the LMS CSV and feedback zip, the feedback pages, the report)
and starts no kernel. The target: a class of 60 in under 10 s.

The class is graded for real first (``manyheads grade``, exercise 1, N submissions: correct, partly correct and blank
in turn); then ``rescore`` runs 3 times, the first with a late policy (a due date, a penalty and a times CSV that
makes every third student a day late), the others keeping it; each run's wall-clock time, as the instructor waits
for it, is a row.

``python benchmarks/rescore.py [N]`` (default 60) prints the table and writes benchmarks/results/rescore.json;
``--quick`` grades 1 submission and rescores once; ``--results DIR`` writes the JSON there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "helpers")]

import grading_corpus as corpus  # noqa: E402
from _report import arguments, cpu_model, parse, report  # noqa: E402

from manyheads_grader.output import report as grades  # noqa: E402

EX1 = corpus.EX1
RUNS = 3


def _manyheads(*args: str) -> float:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "manyheads_grader", *args], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"manyheads {args[0]} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("n", type=int, nargs="?", default=60, help="students in the class (default 60)")
    args = parse(parser)
    n, runs = (1, 1) if args.quick else (args.n, RUNS)
    with tempfile.TemporaryDirectory(prefix="mh-rescore-") as tmp:
        subs, out = Path(tmp) / "submissions", Path(tmp) / "out"
        corpus.build_plain(subs, n)
        graded_s = _manyheads("grade", EX1, str(subs), "--out", str(out), "--quiet")
        times = Path(tmp) / "times.csv"
        stamps = ["2026-12-02T11:00:00+00:00" if i % 3 == 0 else "2026-11-30T12:00:00+00:00" for i in range(n)]
        times.write_text("student_id,submitted_at\n" + "".join(f"s{i:03d},{t}\n" for i, t in enumerate(stamps)))
        policy = ["--due", "2026-12-01T00:00:00+00:00", "--late-penalty", "10", "--times", str(times)]
        rows = []
        for run in range(runs):
            seconds = _manyheads("rescore", EX1, "--out", str(out), *(policy if run == 0 else []))
            rows.append({"run": run + 1, "late_policy": "given" if run == 0 else "kept", "seconds": round(seconds, 2)})
        late = sum(1 for r in grades.read_csv(out / "grades.csv").values() if "late:" in r["problems"])
    report(
        "rescore",
        ["run", "late_policy", "seconds"],
        rows,
        meta={
            "students": n,
            "late_students": late,
            "grade_s": round(graded_s, 1),
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
        },
    )


if __name__ == "__main__":
    main()
