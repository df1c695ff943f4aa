"""Grading a class: ``manyheads grade`` (sandboxed, parallel) against a plain sequential ``nbgrader autograde``.

All in one run, on the same N submissions of exercise 1 (correct, partly correct and blank in turn), each from
scratch: the baseline is what an instructor would type (``generate_assignment``, ``autograde``, ``generate_feedback``
in a fresh course, default unsandboxed kernel); ``manyheads grade`` does the same steps plus the preflight, the
checks and repairs against the release, the sandbox and the merged gradebook, with its default ``--jobs`` (the cores
+ 1), once as root
(kernels forked from a template as the sandbox user) and once as an ordinary user (kernels forked from a template in a
user namespace; ``grader-test`` if that account exists, else an unused uid). Every run must give every student the same
points as stock nbgrader. A third ``manyheads grade`` run has one student's ``softmax`` loop forever (issue 26,
item 3): its extra time over the first run is what one looping notebook adds to the class's time.

Where the time goes: a second table times one kernel's life four ways (the stock kernel, the sandboxed kernel
started on its own, one forked from a worker's template, each with jupyter_client's kernel manager as stock nbgrader
has it; and the forked one with the grader's, which has no fixed waits: ``kernel_client``), split into the start
(until it answers), the notebook's cells (imports, the student's answers, the tests) and the shut-down; what is left
of a notebook's share of the run is nbgrader's own per-notebook work and the run's fixed costs (preflight, release,
feedback, report).

``python benchmarks/grading.py [N]`` (default 60) prints both tables and writes benchmarks/results/grading.json and
grading-kernels.json (CPU model, cores, date, load before and after each run, the users). ``python
benchmarks/grading.py --looping [N]`` runs only the looping check, plain, looping and plain classes back to back
(grading-looping.json, with each progress line's estimate of the time left against the time that was actually
left: issue 37 item 6). ``--quick`` grades 1 submission (a correct one) once, with no ordinary-user or looping run,
and times one kernel of the first kind only (stock), to check that the script works; ``--results DIR`` writes the
JSON there.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "helpers")]

import grading_corpus as corpus  # noqa: E402
import nbformat  # noqa: E402
import unprivileged  # noqa: E402
from _report import arguments, cpu_model, parse, report  # noqa: E402

from manyheads_grader.execution import sandbox  # noqa: E402
from manyheads_grader.output import report as grades  # noqa: E402
from manyheads_grader.output.progress import Progress  # noqa: E402
from manyheads_grader.records import default_jobs  # noqa: E402

EX1 = corpus.EX1
LOOPS = "def softmax(scores):\n    while True:\n        pass"
ORDINARY = "grader-test"


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


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


def ordinary_uid() -> tuple[int, str]:
    """The ordinary user's uid and name: the grader-test account if there is one, else an unused uid."""
    try:
        return pwd.getpwnam(ORDINARY).pw_uid, ORDINARY
    except KeyError:
        uid = sandbox.worker_uid(903)
        return uid, f"uid {uid}"


_ETA = re.compile(r"; about (?:(\d+) h (\d+) min|(\d+) min (\d+) s|(\d+) s) left$")


def _seconds(match: re.Match) -> int:
    h, hm, m, ms, s = (int(g) if g else 0 for g in match.groups())
    return h * 3600 + hm * 60 + m * 60 + ms + s


_LINE = re.compile(r"^\[\s*\d+/\d+\] (\S+)(?: \([^)]*\))?: .*? in (\d+\.\d) s")


def estimates(printed: list[tuple[float, str]], looping: str | None = None) -> dict:
    """Each progress line's estimate of the time left against the time actually left until the last notebook was
    graded (the last progress line); with ``looping``, split by whether that student's notebook had started (its
    line's time less its seconds) when the line was printed: before, nothing could know of it."""
    graded = [(t, m) for t, line in printed if (m := _LINE.match(line))]
    if not graded:
        return {}
    last = graded[-1][0]
    started = next((t - float(m.group(2)) for t, m in graded if m.group(1) == looping), None)
    # when the grader could tell it apart: once it ran SLOW x the usual time (and SLOW_S more) (progress.Progress)
    usual = statistics.median(float(m.group(2)) for _, m in graded if m.group(1) != looping)
    told = None if started is None else started + Progress.SLOW * usual + Progress.SLOW_S
    lines = []
    for t, line in printed:
        if match := _ETA.search(line):
            lines.append({"at_s": round(t, 2), "estimate_s": _seconds(match), "left_s": round(last - t, 2)})
    for line in lines:
        line["looping_started"] = started is not None and line["at_s"] >= started
        line["looping_past_usual"] = told is not None and line["at_s"] >= told

    def summary(chosen: list[dict]) -> dict:
        ratios = [x["estimate_s"] / x["left_s"] for x in chosen if x["left_s"] > 0]
        return {
            "lines": len(chosen),
            "below_half": sum(r < 0.5 for r in ratios),
            "min_ratio": round(min(ratios), 2) if ratios else None,
            "max_ratio": round(max(ratios), 2) if ratios else None,
        }

    found = {"all": summary(lines), "lines": lines}
    if looping:
        found["before_looping_started"] = summary([x for x in lines if not x["looping_started"]])
        found["while_looping_runs"] = summary([x for x in lines if x["looping_started"]])
        found["looping_past_usual"] = summary([x for x in lines if x["looping_past_usual"]])
    return found


def manyheads_grade(subs: Path, out: Path, jobs: int, uid: int | None = None, lines: bool = False) -> dict:
    """One ``manyheads grade`` run (as ``uid`` when given): seconds, load before/after, preflight and forked;
    ``lines``: with its progress lines and when each was printed (``progress``, seconds from the start)."""
    command = [sys.executable, "-m", "manyheads_grader", "grade", EX1, str(subs), "--out", str(out)]
    command += ["--jobs", str(jobs)] + ([] if lines else ["--quiet"])
    env = _env()
    if uid is not None:
        home = out.parent / f"home-{out.name}"
        home.mkdir()
        out.mkdir()
        for path in (home, out):
            os.chown(path, uid, uid)
        command, env = unprivileged.as_user(command, uid, [ROOT]), unprivileged.user_env(home)  # ROOT: the course
    load = _load()
    start = time.perf_counter()
    printed: list[tuple[float, str]] = []
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        for line in run.stderr:  # the progress lines, each timed as it arrives
            printed.append((time.perf_counter() - start, line.rstrip("\n")))
        stdout = run.stdout.read()
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise SystemExit(f"manyheads grade failed:\n{stdout}{''.join(t for _, t in printed)[-3000:]}")
    text = (out / "report.md").read_text()
    preflight = re.search(r"preflight passed in (\d+(?:\.\d+)?) s", text)
    phases = re.search(
        r"nbgrader autograde ([\d.]+) s, of which ([\d.]+) forked kernel\(s\) lived ([\d.]+) s \(their set-up "
        r"before ipykernel ([\d.]+) s\) and the template cleaned up after them for ([\d.]+) s",
        text,
    )
    return {
        "seconds": seconds,
        "load_before": load,
        "load_after": _load(),
        "forked": int(re.search(r"(\d+) kernel\(s\) forked", text).group(1)),
        "preflight_s": float(preflight.group(1)) if preflight else None,
        # where the jobs' time went, summed over the jobs (report.md's line; the preflight's two notebooks included)
        "phases": dict(
            zip(("nbgrader_s", "kernels", "kernel_life_s", "kernel_setup_s", "cleanup_s"), map(float, phases.groups()))
        )
        if phases
        else None,
        "rows": grades.read_csv(out / "grades.csv"),
        "progress": printed,
    }


def stock_scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: float(s.score) for s in gb.assignment_submissions(EX1)}


def _cells() -> list[str]:
    """The code cells of a correct submission, hidden tests included (the autograded notebook's cells)."""
    source = nbformat.read(corpus.SOURCE, as_version=4)
    answers = corpus.answers()
    cells = []
    for cell in source.cells:
        if cell.cell_type != "code":
            continue
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        text = answers.get(gid, cell.source)
        cells.append("\n".join(line for line in text.splitlines() if "HIDDEN TESTS" not in line))
    return cells


KERNEL_KINDS = {  # kind: (the table's label, the kernel, the kernel manager)
    "stock": ("stock ipykernel (python3), jupyter_client's kernel manager", "stock", "jupyter_client"),
    "sandbox": ("sandboxed, started alone", "sandbox", "jupyter_client"),
    "template": ("sandboxed, forked from the template", "template", "jupyter_client"),
    "template-prompt": (
        "sandboxed, forked from the template, the grader's kernel manager (no fixed waits)",
        "template",
        "prompt",
    ),
}


def kernel_lives(kind: str, work: Path, k: int) -> dict[str, float]:
    """Seconds per kernel for ``k`` kernels of ``kind`` (:data:`KERNEL_KINDS`): start (until it answers), the
    notebook's cells (a correct submission's, hidden tests included), shut down. jupyter_client's manager is what
    stock nbgrader uses; the grader's (``kernel_client``) is what ``manyheads grade`` uses."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from manyheads_grader.execution.kernel_client import PromptKernelManager

    _, kernel, manager = KERNEL_KINDS[kind]
    manager_class = PromptKernelManager if manager == "prompt" else AsyncKernelManager
    work.mkdir(parents=True)
    work.chmod(0o755)
    rt, scratch = sandbox.runtime_folder(work / "sandbox")
    share = sandbox.prepare(work / "sandbox", uid=sandbox.worker_uid(0), assignment=EX1)
    template = None
    if kernel == "template":
        template = sandbox.start_template(
            share, rt, sandbox.TemplateSettings(uid=sandbox.worker_uid(0), assignment=EX1)
        )
        if not sandbox.template_ready(rt, template):
            raise SystemExit("the template process did not start")
    saved = dict(os.environ)
    os.environ.update(sandbox.environment(share, rt, scratch))
    cells = _cells()
    times = {"start": 0.0, "cells": 0.0, "stop": 0.0}

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        if kernel == "stock":
            km = manager_class(kernel_name="python3")
        else:
            km = manager_class(kernel_name=sandbox.KERNEL_NAME, transport="ipc", ip=str(rt / "kernel"))
            km.connection_file = str(rt / f"kernel-{i}.json")
        await km.start_kernel(extra_arguments=["--HistoryManager.hist_file=:memory:"])
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=120)
        t1 = time.perf_counter()
        for code in cells:
            reply = await kc.execute_interactive(code, timeout=120, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                raise SystemExit(f"a cell of the correct submission failed in the {kind} kernel: {reply}")
        t2 = time.perf_counter()
        kc.stop_channels()
        await km.shutdown_kernel()
        t3 = time.perf_counter()
        for name, dt in (("start", t1 - t0), ("cells", t2 - t1), ("stop", t3 - t2)):
            times[name] += dt / k

    try:
        for i in range(k):
            asyncio.run(one(i))
        return times
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if template is not None:
            template.kill()
        shutil.rmtree(rt, ignore_errors=True)


def _check(name: str, run: dict, cases, stock: dict[str, float]) -> None:
    rows = run["rows"]
    wrong = [c.student for c in cases if float(rows[c.student]["score"]) != c.score]
    differ = [s for s, score in stock.items() if float(rows[s]["score"]) != score]
    if wrong or differ or len(stock) != len(cases):
        raise SystemExit(f"{name}: scored wrongly {wrong}, disagrees with stock nbgrader on {differ}")


def looping_only(n: int) -> None:
    """``--looping``: only item 3's check, the plain class and the class with one looping notebook graded back to
    back (plain, looping, plain), as whoever runs it; the added time is against the mean of the two plain runs."""
    jobs = default_jobs()  # what `manyheads grade` uses without --jobs: the cores + 1
    with tempfile.TemporaryDirectory(prefix="mh-bench-") as tmp:
        tmp = Path(tmp)
        cases = corpus.build_plain(tmp / "subs", n)
        looping = tmp / "subs-looping"
        shutil.copytree(tmp / "subs", looping)
        loop_student = cases[n // 2].student
        (looping / loop_student / f"{EX1}.ipynb").write_bytes(corpus.dump(corpus.answered({"softmax": LOOPS})))
        runs = [
            ("plain", manyheads_grade(tmp / "subs", tmp / "out-plain-1", jobs, lines=True)),
            ("looping", manyheads_grade(looping, tmp / "out-looping", jobs, lines=True)),
            ("plain", manyheads_grade(tmp / "subs", tmp / "out-plain-2", jobs, lines=True)),
        ]
    # issue 37 item 6: the time left printed against the time actually left
    times_left = [estimates(r["progress"], loop_student if name == "looping" else None) for name, r in runs]
    plain = [r["seconds"] for name, r in runs if name == "plain"]
    added = runs[1][1]["seconds"] - sum(plain) / len(plain)
    meta = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "submissions": n,
        "jobs": jobs,
        "looping_student": loop_student,
    }
    meta.update(user="root" if os.geteuid() == 0 else "ordinary user", looping_added_s=added)
    loop = times_left[1]
    meta["time_left"] = {k: v for k, v in loop.items() if k != "lines"}
    report(
        "grading-looping",
        ["class", "seconds", "load_before", "load_after", "estimates", "below_half", "min_ratio", "max_ratio"],
        [
            {
                "class": name,
                "seconds": r["seconds"],
                "load_before": r["load_before"],
                "load_after": r["load_after"],
                "estimates": left.get("all", {}).get("lines"),
                "below_half": left.get("all", {}).get("below_half"),
                "min_ratio": left.get("all", {}).get("min_ratio"),
                "max_ratio": left.get("all", {}).get("max_ratio"),
                "phases": r["phases"],
                "time_left_lines": left.get("lines", []),
            }
            for (name, r), left in zip(runs, times_left, strict=True)
        ],
        meta,
    )
    print(f"one looping notebook added {added:.1f} s to the class of {n} (target <= 75 s)")
    if loop:
        before, during, past = loop["before_looping_started"], loop["while_looping_runs"], loop["looping_past_usual"]
        print(
            f"time left printed, looping class: under half the time actually left on {past['below_half']} of the "
            f"{past['lines']} lines printed once the looping notebook had run past the usual time (lowest ratio "
            f"{past['min_ratio']}); on {during['below_half']} of the {during['lines']} printed while it ran at all; on "
            f"{before['below_half']} of the {before['lines']} printed before it started (nothing could know of it)"
        )


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("n", type=int, nargs="?", default=60, help="submissions in the class (default 60)")
    parser.add_argument("--looping", action="store_true", help="only the looping check (grading-looping.json)")
    args = parse(parser)
    n = 1 if args.quick else args.n
    if args.looping:
        return looping_only(n)
    jobs = default_jobs()  # what `manyheads grade` uses without --jobs: the cores + 1
    as_root = os.geteuid() == 0
    uid, user = ordinary_uid() if as_root else (os.getuid(), pwd.getpwuid(os.getuid()).pw_name)
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mh-bench-") as tmp:
        tmp = Path(tmp)
        tmp.chmod(0o755)
        cases = corpus.build_plain(tmp / "subs", n)
        for path in [tmp / "subs", *(tmp / "subs").rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        looping = tmp / "subs-looping"
        shutil.copytree(tmp / "subs", looping)
        loop_student = cases[n // 2].student
        (looping / loop_student / f"{EX1}.ipynb").write_bytes(corpus.dump(corpus.answered({"softmax": LOOPS})))
        if as_root:
            runs["root"] = manyheads_grade(tmp / "subs", tmp / "out-root", jobs)
        if not (args.quick and as_root):  # a quick run grades once, as whoever runs it
            runs["ordinary"] = manyheads_grade(tmp / "subs", tmp / "out-user", jobs, uid if as_root else None)
        load = _load()
        t_base = nbgrader_baseline(tmp / "subs", tmp / "course")
        base_load = (load, _load())
        stock = stock_scores(tmp / "course")
        for name, run in runs.items():
            _check(name, run, cases, stock)
        first = "root" if as_root else "ordinary"
        if not args.quick:
            runs["looping"] = manyheads_grade(looping, tmp / "out-looping", jobs)
        lives = (
            {kind: kernel_lives(kind, tmp / f"kernels-{kind}", 1) for kind in list(KERNEL_KINDS)[:1]}
            if args.quick
            else {kind: kernel_lives(kind, tmp / f"kernels-{kind}", 3) for kind in KERNEL_KINDS}
        )
    meta = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "submissions": n,
        "jobs": jobs,
        "grader_started_as": "root" if as_root else "ordinary user",
        "ordinary_user": user,
        "looping_student": loop_student,
    }
    report(
        "grading-kernels",
        ["kernel", "start_s", "cells_s", "stop_s", "total_s"],
        [
            {
                "kernel": label + ((" (root)" if as_root else " (user namespace)") if kernel == "template" else ""),
                "start_s": lives[kind]["start"],
                "cells_s": lives[kind]["cells"],
                "stop_s": lives[kind]["stop"],
                "total_s": sum(lives[kind].values()),
            }
            for kind, (label, kernel, _) in KERNEL_KINDS.items()
            if kind in lives
        ],
        meta,
    )
    print()
    table = [
        {
            "method": "nbgrader autograde (sequential)",
            "user": "root" if as_root else user,
            "jobs": 1,
            "sandbox": "no",
            "forked_kernels": 0,
            "preflight_s": None,
            "seconds": t_base,
            "s_per_submission": t_base / n,
            "speedup": 1.0,
            "load_before": base_load[0],
            "load_after": base_load[1],
        }
    ]
    labels = {"root": ("manyheads grade", "root"), "ordinary": ("manyheads grade", user)}
    labels["looping"] = (f"manyheads grade, {loop_student} loops", "root" if as_root else user)
    for name, run in runs.items():
        method, who = labels[name]
        table.append(
            {
                "method": method,
                "user": who,
                "jobs": jobs,
                "sandbox": "yes",
                "forked_kernels": run["forked"],
                "preflight_s": run["preflight_s"],
                "seconds": run["seconds"],
                "s_per_submission": run["seconds"] / n,
                "speedup": t_base / run["seconds"],
                "load_before": run["load_before"],
                "load_after": run["load_after"],
                "phases": run["phases"],
            }
        )
    added = runs["looping"]["seconds"] - runs[first]["seconds"] if "looping" in runs else None
    meta["looping_added_s"] = added
    report(
        "grading",
        ["method", "user", "jobs", "forked_kernels", "preflight_s", "seconds", "speedup", "load_before", "load_after"],
        table,
        meta,
    )
    for name, run in runs.items():
        if name != "looping":
            print(
                f"manyheads grade as {labels[name][1]}: {run['seconds']:.1f} s vs nbgrader {t_base:.1f} s: "
                f"{t_base / run['seconds']:.2f}x"
            )
    if added is not None:
        print(f"one looping notebook added {added:.1f} s to the class of {n} (target <= 75 s)")
    print("the same points as stock nbgrader for every student in every run")


if __name__ == "__main__":
    main()
