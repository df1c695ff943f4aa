"""A grading worker: a copy of the course that autogrades chunks of students with nbgrader, in the sandbox, with
kernels forked from its template process where it can. The local runner and the cluster (cluster.py) run the same
class; a chunk's results land where :meth:`Worker.autograded` says.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import nbformat

from manyheads_grader.execution import kernel_client, kernel_fork, sandbox
from manyheads_grader.nbgrader.session import Session
from manyheads_grader.output import progress
from manyheads_grader.records import NO_KERNEL, STARTUP_DEATH, Options, Problem, ProblemKind, not_graded


def why_failed(log: str, student: str) -> Problem:
    """The problem of a notebook nbgrader produced no graded copy of, with the reason read from its log."""
    text = log.replace("\r", "")
    for needle, why in (
        ("Kernel died before replying to kernel_info", STARTUP_DEATH),
        ("DeadKernelError", "the kernel died (e.g. the code killed it or ran out of memory)"),
        ("Kernel died", "the kernel died (e.g. the code killed it or ran out of memory)"),
        ("CellTimeoutError", "a cell ran past the time limit and could not be interrupted"),
        ("stopped after", "grading this notebook ran past the overall time limit"),
        ("Kernel didn't respond", NO_KERNEL),
    ):
        if needle in text:
            return not_graded(why)
    errors = [
        line.strip()
        for line in text.splitlines()
        if ("Error" in line or "ERROR" in line)
        and "above traceback" not in line
        and "There was an error processing" not in line
    ]
    last = errors[-1][:200] if errors else ""
    text = "nbgrader could not grade it" + (f": {last}" if last else "") + " (full log in OUT/.work with --keep-work)"
    return Problem(ProblemKind.NOT_GRADED, text, last)


class Worker:
    def __init__(self, index: int, master: Path | None, work: Path, assignment: str, db: str, opts: Options):
        """A worker in ``work/worker-INDEX`` with its sandbox; with ``master`` also its copy of the course. Without,
        its template can start before the course is released (:meth:`take_course` copies it later)."""
        self.root = work / f"worker-{index}"
        self.root.mkdir(parents=True)
        if master is not None:
            self.take_course(master)
        self.db = db if db.startswith("postgresql") else f"sqlite:///{self.root / 'gradebook.db'}"
        self.assignment, self.opts, self.chunks, self.log = assignment, opts, 0, []
        self.args = [
            f"--Execute.timeout={opts.timeout}",
            "--OverwriteCells.add_missing_cells=True",
            f"--Execute.kernel_manager_class={kernel_client.MANAGER}",  # without jupyter_client's fixed waits
        ]
        self.uid = sandbox.worker_uid(index)
        if opts.sandbox:
            rt, scratch = sandbox.runtime_folder(self.root / "sandbox")
            share = sandbox.prepare(self.root / "sandbox", opts.limits, uid=self.uid, assignment=assignment)
            self.args += sandbox.nbgrader_args(rt)
            self.env = sandbox.environment(share, rt, scratch)
        else:  # no sandbox: the same launcher (the own-work rule) in a plain kernel
            rt, _ = sandbox.runtime_folder(self.root / "kernel")
            share = sandbox.prepare_plain(self.root / "kernel", opts.limits, assignment)
            self.args += [f"--Execute.kernel_name={sandbox.PLAIN_KERNEL_NAME}", sandbox.IN_MEMORY_HISTORY]
            self.env = sandbox.environment(share, rt)
        self.rt: Path | None = rt
        # one nbgrader process for all this worker's commands (None: a chunk graded elsewhere, cluster._Returned)
        self.session: Session | None = Session(self.root, self.db, self.env)
        self.share = share
        self.progress: progress.Progress | None = None  # set by grade() once the preflight is over
        self.test_ids: set[str] = set()
        self.template: subprocess.Popen | None = None
        self.template_waited = False
        self.template_failure = ""
        self.nbgrader_seconds = 0.0  # wall time of this worker's autograde runs (phase_times)

    def take_course(self, master: Path) -> None:
        """Copy the released course (config, source, release, gradebook) into this worker's folder."""
        shutil.copytree(master, self.root, dirs_exist_ok=True)

    def launch_template(self) -> None:
        """Start this worker's template process without waiting for it (its imports take seconds): the runner
        launches every worker's while the preflight runs on the first."""
        if self.template is not None and self.template.poll() is None:
            return
        settings = sandbox.TemplateSettings(self.opts.limits, self.uid, self.assignment, self.opts.sandbox)
        self.template = sandbox.start_template(self.share, self.rt, settings, log=self.root / "template.log")
        self.template_waited = False

    def start_template(self) -> None:
        """(Re)start this worker's template process (kernel_fork.py) and wait until it listens: kernels are
        forked from it, each in its own sandbox, instead of each starting Python and importing torch again. Without
        it they start as before."""
        if self.template is not None and self.template.poll() is None and self.template_waited:
            return
        self.launch_template()
        self.template_waited = True
        if self.template is not None and not sandbox.template_ready(self.rt, self.template):
            text = (self.root / "template.log").read_text(encoding="utf-8", errors="replace")
            self.log.append(text[-2000:])
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            self.template_failure = (lines or ["it did not start within 120 s"])[-1][:200]

    def why_not_forked(self) -> str:
        """One line: why this worker's kernels were not forked from a template ("" when they were or could be)."""
        return (
            f"the template process failed ({self.template_failure}); kernels started one by one"
            if (self.template_failure)
            else ""
        )

    def kernels_from_template(self) -> int:
        """How many kernels this worker's template process has forked so far (its log says)."""
        log = self.root / "template.log"
        if not log.is_file():
            return 0
        text = log.read_text(encoding="utf-8", errors="replace")
        return sum(line.startswith(kernel_fork.SERVED) for line in text.splitlines())

    def phase_times(self) -> dict[str, float]:
        """Where this worker's grading time went (seconds, summed; the preflight's chunk included): ``nbgrader``, its
        autograde runs from start to end; of that, from its template's log, ``kernel_life`` (fork to exit: the
        kernel's set-up, ipykernel's start, the notebook's cells, the shut-down), ``kernel_setup`` (fork until
        ipykernel starts: namespaces, mounts, limits) and ``cleanup`` (killing what a kernel left, after it);
        ``kernels`` counts the lives. The rest of ``nbgrader`` is nbgrader's own work (its start, per notebook the
        reading, the gradebook, writing) and the template waiting for requests."""
        times = dict.fromkeys(("kernel_life", "kernel_setup", "cleanup", "kernels"), 0.0)
        times["nbgrader"] = getattr(self, "nbgrader_seconds", 0.0)  # a cluster's _Returned has none
        log = self.root / "template.log"
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        for line in text.splitlines():
            if not line.startswith(kernel_fork.TIMING):
                continue
            words = line[len(kernel_fork.TIMING) :].split()
            for name, value in zip(words[::2], words[1::2]):
                key = {"set-up": "kernel_setup", "life": "kernel_life", "clean-up": "cleanup"}.get(name)
                if key:
                    try:
                        times[key] += float(value)
                    except ValueError:
                        continue
                    times["kernels"] += key == "kernel_life"
        return times

    def close(self) -> None:
        """Stop the nbgrader session and the template process and remove the runtime folder."""
        if self.session is not None:
            self.session.close()
        if self.template is not None and self.template.poll() is None:
            self.template.kill()
            self.template.wait()
        if self.rt is not None:
            shutil.rmtree(self.rt, ignore_errors=True)

    def autograde(self, students: list) -> dict[str, Problem]:
        """Autograde a chunk of students (records with ``student_id`` and ``notebook``) in one nbgrader run, then
        each that did not come out alone; returns why nbgrader graded none, for each student it failed."""
        self.chunks += 1
        if len(students) > 1:  # its start-up (seconds) pays off from the second notebook; again if it died meanwhile
            self.start_template()
        folder = f"submitted-{self.chunks}"
        for student in students:
            target = self.root / folder / student.student_id / self.assignment
            target.mkdir(parents=True)
            (target / f"{self.assignment}.ipynb").write_text(nbformat.writes(student.notebook), encoding="utf-8")
        watch = progress.Watch(self.progress, students, self.autograded, self.test_ids)
        log = self._run_autograde(folder, watch, len(students))
        failed: dict[str, Problem] = {}
        missing = [r for r in students if not self.autograded(r).is_file()]
        if len(students) > 1 and missing:  # grade the ones that did not make it alone, so one cannot sink the rest
            for student in missing:
                log = self._run_autograde(folder, watch, 1, f"--student={student.student_id}")
                if not self.autograded(student).is_file():
                    failed[student.student_id] = why_failed(log, student.student_id)
        elif missing:
            failed[missing[0].student_id] = why_failed(log, missing[0].student_id)
        for student in students:
            if not self.autograded(student).is_file():
                problem = failed.get(student.student_id)
                watch.failed(student, (problem.detail if problem and problem.detail else "not graded"))
        return failed

    def _run_autograde(self, folder: str, watch, notebooks: int, *only: str) -> str:
        """One ``nbgrader autograde`` of the submissions in ``folder`` (``only``: e.g. one ``--student``); its log."""
        began = time.monotonic()
        status, log = self.session.run(
            "autograde",
            self.assignment,
            "--force",
            *only,
            f"--CourseDirectory.submitted_directory={folder}",
            *self.args,
            timeout=(self.opts.timeout * 8 + 120) * notebooks,
            watch=watch,
        )
        self.nbgrader_seconds += time.monotonic() - began
        self.log.append(log)
        watch(final=True)
        return log

    def autograded(self, student) -> Path:
        return self.root / "autograded" / student.student_id / self.assignment / f"{self.assignment}.ipynb"

    def feedback(self) -> None:
        """The feedback pages of the students graded since the last call (nbgrader skips the pages it has written):
        the runner asks after every chunk, so a job held up by a looping notebook has little left to do after it."""
        if any((self.root / "autograded").glob("*")):
            status, log = self.session.run("generate_feedback", self.assignment)
            self.log.append(log)
