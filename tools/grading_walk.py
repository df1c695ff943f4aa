"""Follow one submission through ``manyheads grade``: the grader's modules its main process enters, in order.

    python tools/grading_walk.py [--course ROOT]

Grades a class of one student (exercise 1, its reference answers) in this process with ``--jobs 1`` and prints each
stage of the pipeline as it starts (the function that is the stage), with the grader modules first entered while it
ran, then how many modules the walk entered. A stage that ran twice, or out of order, shows as such. Workers'
nbgrader processes and the kernels are other processes and are not followed: the walk shows the orchestration, the
stages and the outputs. ``--course`` grades another checkout's course (to compare layouts, run it with that
checkout's grader and course package installed, e.g. in a virtual environment of its own: the kernels import them
too).
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


# The function that is each stage (module, function): what the walk shows as the stage's start.
STAGES = {
    ("manyheads_grader.runner", "_release"): "release",
    ("manyheads_grader.submissions", "collect"): "found",
    ("manyheads_grader.review.checking", "_check_one"): "checked",
    ("manyheads_grader.runner", "_preflight"): "preflight",
    ("manyheads_grader.execution.executing", "execute"): "executed",
    ("manyheads_grader.scoring", "score_class"): "scored",
    ("manyheads_grader.review.reviewing", "review_class"): "reviewed",
    ("manyheads_grader.records", "class_result"): "class result",
    ("manyheads_grader.runner", "_publish"): "published",
    ("manyheads_grader.store", "write_stages"): "kept",
    ("manyheads_grader.cli", "_write_outputs"): "outputs",
}


def walk(course: Path) -> list[tuple[str, str]]:
    """(stage, grader module) in the order a function of each module first ran (this process, all its threads); the
    stage is the one running then ("" outside every stage), and each stage's start is listed as (stage, "")."""
    entered: list[tuple[str, str]] = []
    seen: set[str] = set()
    current: list[object] = []  # the frame of the stage that runs now

    def profile(frame, event, arg):
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("manyheads_grader"):
            return
        if event == "call":
            stage = STAGES.get((name, frame.f_code.co_name))
            if stage and not current:
                current.append(frame)
                if not entered or entered[-1] != (stage, ""):  # once per stage, not once per student
                    entered.append((stage, ""))
            if name not in seen:
                seen.add(name)
                entered.append(
                    (
                        STAGES.get((current[0].f_globals["__name__"], current[0].f_code.co_name), "")
                        if current
                        else "",
                        name,
                    )
                )
        elif event == "return" and current and current[0] is frame:
            current.clear()

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
    starts = [stage for stage, module in entered if not module]
    for stage, module in entered:
        print(f"stage {stage}" if not module else f"    {module}")
    modules = [m for _, m in entered if m]
    order = ", ".join(starts) or "none found"
    print(f"{len(modules)} grader modules entered by the main process; stages in order: {order}")


if __name__ == "__main__":
    main()
