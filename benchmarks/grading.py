"""Grading a class: ``manyheads grade`` (sandboxed, parallel) against a plain sequential ``nbgrader autograde``.

Both grade the same N submissions of exercise 1 (correct, partly correct and blank in turn) in the same run, each
from scratch: the baseline is what an instructor would type (``generate_assignment``, ``autograde``,
``generate_feedback`` in a fresh course, default unsandboxed kernel); ``manyheads grade`` does the same steps plus
the integrity checks, the sandbox and the merged gradebook, with ``--jobs`` = the machine's cores.

``python benchmarks/grading.py [N]`` (default 40) prints both times, the ratio and seconds per submission.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "helpers")]

import grading_corpus as corpus  # noqa: E402
from _report import report  # noqa: E402

from manyheads.course.grading import report as grades  # noqa: E402

EX1 = corpus.EX1


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def nbgrader_baseline(subs: Path, course: Path) -> float:
    start = time.perf_counter()
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / EX1, course / "solutions" / EX1)
    for student in sorted(p.name for p in subs.iterdir()):
        target = course / "submitted" / student / EX1
        target.mkdir(parents=True)
        shutil.copy2(subs / student / f"{EX1}.ipynb", target / f"{EX1}.ipynb")
    for args in (
        ["generate_assignment", EX1, "--force"],
        ["autograde", EX1, "--force"],
        ["generate_feedback", EX1, "--force"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}"],
            cwd=course,
            env=_env(),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"nbgrader {args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - start


def manyheads_grade(subs: Path, out: Path, jobs: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "manyheads.course.grading",
            "grade",
            EX1,
            str(subs),
            "--out",
            str(out),
            "--jobs",
            str(jobs),
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"manyheads grade failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    jobs = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="mh-bench-") as tmp:
        tmp = Path(tmp)
        cases = corpus.build_plain(tmp / "subs", n)
        t_many = manyheads_grade(tmp / "subs", tmp / "out", jobs)
        t_base = nbgrader_baseline(tmp / "subs", tmp / "course")
        rows = grades.read_csv(tmp / "out" / "grades.csv")
        wrong = [c.student for c in cases if float(rows[c.student]["score"]) != c.score]
        if wrong:
            raise SystemExit(f"manyheads grade scored these wrongly: {wrong}")
    report(
        "grading",
        ["method", "submissions", "jobs", "sandbox", "seconds", "s_per_submission", "speedup"],
        [
            {
                "method": "nbgrader autograde (sequential)",
                "submissions": n,
                "jobs": 1,
                "sandbox": "no",
                "seconds": t_base,
                "s_per_submission": t_base / n,
                "speedup": 1.0,
            },
            {
                "method": "manyheads grade",
                "submissions": n,
                "jobs": jobs,
                "sandbox": "yes",
                "seconds": t_many,
                "s_per_submission": t_many / n,
                "speedup": t_base / t_many,
            },
        ],
    )
    print(
        f"\nmanyheads grade {t_many:.1f} s vs nbgrader {t_base:.1f} s: {t_base / t_many:.2f}x "
        f"({t_many / n:.2f} vs {t_base / n:.2f} s per submission; target >= 1.6x)"
    )


if __name__ == "__main__":
    main()
