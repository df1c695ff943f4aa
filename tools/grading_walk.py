"""Follow one submission through ``manyheads grade``: the grader's modules its main process enters, in order.

    python tools/grading_walk.py [--course ROOT]

Grades a class of one student (exercise 1, its reference answers) in this process with ``--jobs 1`` and prints
every grader module at the moment a function of it first runs, then which stage each belongs to and how many
modules the walk entered. Workers' nbgrader processes and the kernels are other processes and are not followed:
the walk shows the orchestration, the stages and the outputs. ``--course`` grades with another checkout's grader and
course (put its ``src`` and ``grader/src`` first on ``PYTHONPATH``), to compare layouts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = "01_single_head_bottleneck"


def _submission(course: Path, folder: Path) -> Path:
    """One student's notebook: the release's answers filled from the reference solution (the solution itself)."""
    student = folder / "subs" / "s001"
    student.mkdir(parents=True)
    source = course / "solutions" / EXERCISE / f"{EXERCISE}.ipynb"
    (student / f"{EXERCISE}.ipynb").write_bytes(source.read_bytes())
    return folder / "subs"


def walk(course: Path) -> list[str]:
    """The grader modules in the order a function of each first ran (this process, all its threads)."""
    entered: list[str] = []
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("manyheads_grader") and name not in seen:
                seen.add(name)
                entered.append(name)

    from manyheads_grader import cli

    with tempfile.TemporaryDirectory() as tmp:
        subs = _submission(course, Path(tmp))
        argv = ["grade", EXERCISE, str(subs), "--out", str(Path(tmp) / "out"), "--jobs", "1", "--quiet"]
        argv += ["--course", str(course)]
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            code = cli.main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    if code != 0:
        raise SystemExit(f"manyheads grade exited with {code}")
    return entered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=ROOT, help="the checkout whose course is graded")
    args = parser.parse_args()
    entered = walk(args.course.resolve())
    for i, module in enumerate(entered, 1):
        print(f"{i:3d}  {module}")
    print(f"{len(entered)} grader modules entered by the main process")


if __name__ == "__main__":
    main()
