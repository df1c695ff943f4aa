"""Grading a class: ``manyheads grade`` (sandboxed, parallel) against a plain sequential ``nbgrader autograde``.

Both grade the same N submissions of exercise 1 (correct, partly correct and blank in turn) in the same run, each
from scratch: the baseline is what an instructor would type (``generate_assignment``, ``autograde``,
``generate_feedback`` in a fresh course, default unsandboxed kernel); ``manyheads grade`` does the same steps plus
the integrity checks, the sandbox and the merged gradebook, with ``--jobs`` = the machine's cores. The two must give
every student the same points (checked against the stock gradebook).

Where the time goes: a second table times one kernel's life (start, the notebook's imports, shut down) three ways:
the stock kernel, the sandboxed kernel started on its own, and one forked from a worker's template process
(``manyheads_grader.kernel_fork``), which is what ``manyheads grade`` uses when run as root.

``python benchmarks/grading.py [N]`` (default 60) prints both tables and writes benchmarks/results/grading.json.
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

from manyheads_grader import report as grades  # noqa: E402

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
        [sys.executable, "-m", "manyheads_grader", "grade", EX1, str(subs), "--out", str(out), "--jobs", str(jobs)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"manyheads grade failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


def stock_scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: float(s.score) for s in gb.assignment_submissions(EX1)}


KERNEL_IMPORTS = "import torch, manyheads as mh; mh.checks.check_softmax"


def kernel_lives(kind: str, work: Path, k: int) -> float:
    """Seconds per kernel for ``k`` kernels of ``kind`` (stock, sandbox, template): start, imports, shut down."""
    from jupyter_client import KernelManager

    from manyheads_grader import sandbox

    work.mkdir(parents=True)
    work.chmod(0o755)
    rt, scratch = sandbox.runtime_folder(work / "sandbox")
    share = sandbox.prepare(work / "sandbox", uid=sandbox.worker_uid(0), assignment=EX1)
    template = None
    if kind == "template":
        template = sandbox.start_template(share, rt, uid=sandbox.worker_uid(0), assignment=EX1)
    if kind == "template" and not sandbox.template_ready(rt, template):
        raise SystemExit("the template process did not start (grading as root?)")
    saved = dict(os.environ)
    os.environ.update(sandbox.environment(share, rt, scratch))
    try:
        start = time.perf_counter()
        for i in range(k):
            if kind == "stock":
                km = KernelManager(kernel_name="python3")
            else:
                km = KernelManager(kernel_name=sandbox.KERNEL_NAME, transport="ipc", ip=str(rt / "kernel"))
                km.connection_file = str(rt / f"kernel-{i}.json")
            km.start_kernel()
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=120)
            kc.execute_interactive(KERNEL_IMPORTS, timeout=120)
            kc.stop_channels()
            km.shutdown_kernel()
        return (time.perf_counter() - start) / k
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if template is not None:
            template.kill()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
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
        stock = stock_scores(tmp / "course")
        differ = [s for s, score in stock.items() if float(rows[s]["score"]) != score]
        if differ or len(stock) != n:
            raise SystemExit(f"manyheads grade and stock nbgrader disagree on {differ or 'the number of students'}")
        forked = int((tmp / "out" / "report.md").read_text().split(" kernel(s) forked")[0].rsplit(" ", 1)[-1])
        lives = {kind: kernel_lives(kind, tmp / f"kernels-{kind}", 5) for kind in ("stock", "sandbox", "template")}
    report(
        "grading-kernels",
        ["kernel", "s_per_kernel"],
        [
            {"kernel": "stock ipykernel (python3)", "s_per_kernel": lives["stock"]},
            {"kernel": "sandboxed, started alone", "s_per_kernel": lives["sandbox"]},
            {"kernel": "sandboxed, forked from the template", "s_per_kernel": lives["template"]},
        ],
    )
    print()
    report(
        "grading",
        ["method", "submissions", "jobs", "sandbox", "forked_kernels", "seconds", "s_per_submission", "speedup"],
        [
            {
                "method": "nbgrader autograde (sequential)",
                "submissions": n,
                "jobs": 1,
                "sandbox": "no",
                "forked_kernels": 0,
                "seconds": t_base,
                "s_per_submission": t_base / n,
                "speedup": 1.0,
            },
            {
                "method": "manyheads grade",
                "submissions": n,
                "jobs": jobs,
                "sandbox": "yes",
                "forked_kernels": forked,
                "seconds": t_many,
                "s_per_submission": t_many / n,
                "speedup": t_base / t_many,
            },
        ],
    )
    print(
        f"\nmanyheads grade {t_many:.1f} s vs nbgrader {t_base:.1f} s: {t_base / t_many:.2f}x "
        f"({t_many / n:.2f} vs {t_base / n:.2f} s per submission; target >= 3x); the same points as stock nbgrader "
        "for every student"
    )


if __name__ == "__main__":
    main()
