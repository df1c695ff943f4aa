"""Grade a class with real nbgrader: a master course, worker copies graded in parallel, one merged gradebook.

Layout under ``OUT/.work`` (scratch, removed at the end unless ``keep_work``):

* ``course/``   nbgrader_config.py, solutions/ASSIGNMENT, exercises/ASSIGNMENT (regenerated with the gradebook);
* ``worker-K/`` a copy of ``course/`` per job. Each takes chunks of students from a shared queue and runs one
  ``nbgrader autograde`` per chunk (a fresh ``submitted-N/`` folder each time), then ``generate_feedback`` once.

With sqlite each worker has its own copy of the gradebook (sqlite is not safe for concurrent writers) and the
copies are merged row by row into ``OUT/course/gradebook.db`` at the end; nbgrader's ids are UUIDs, so rows never
collide. With ``--db postgresql://…`` every worker (and every machine) writes to the one database directly.
``OUT/course`` is a normal nbgrader course (autograded notebooks, gradebook), so ``nbgrader formgrader`` and the
rest of the stock CLI work on it for the written answers.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import queue
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from manyheads.course import delegation
from manyheads.course.grading import budget, integrity, kernel_template, versions
from manyheads.course.grading import collect as collect_mod
from manyheads.course.grading import feedback as feedback_mod
from manyheads.course.grading import flags as flags_mod
from manyheads.course.grading import progress as progress_mod
from manyheads.course.grading import report as report_mod
from manyheads.course.grading import sandbox as sandbox_mod
from manyheads.course.layout import CourseLayout

CONFIG_FILE = CourseLayout.CONFIG_FILE
FEEDBACK_DIR = {"student": "feedback", "full": "feedback-full"}


class GradingError(Exception):
    """Misuse or a broken course (unknown assignment, nbgrader cannot release it): the command stops."""


@dataclass
class Row:
    student_id: str
    status: str = "failed"
    problems: list[str] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    tests: dict[str, float | None] = field(default_factory=dict)
    notebook: nbformat.NotebookNode | None = None
    feedback: Path | None = None
    repaired: bool = False
    zeroed: dict[str, str] = field(default_factory=dict)  # test id -> evidence: no points by the own-work rule
    failures: dict[str, str] = field(default_factory=dict)  # test id -> the message its test raised (report.py)
    flags: list[str] = field(default_factory=list)  # integrity flags for a human (flags.py): no points, no status
    submitted: nbformat.NotebookNode | None = None  # the file as handed in, cut to what flags.out_of_order compares
    name: str = ""  # the display name from the LMS's file names, if any (never the id)
    version: str | None = None  # the course release the notebook was written for (versions.py); None: unknown


@dataclass
class Options:
    jobs: int = max(1, os.cpu_count() or 1)
    timeout: int = 60
    db: str | None = None
    pattern: str | None = None
    lms: str = "auto"  # the download's layout (lms.py): auto, canvas, moodle, blackboard or generic
    sandbox: bool = True
    keep_work: bool = False
    chunk: int | None = None
    feedback: str = "student"  # or "full": the instructor's private view, written to OUT/feedback-full
    limits: sandbox_mod.Limits = sandbox_mod.Limits()
    scheduler: str | None = None  # tcp://HOST:PORT of a dask.distributed scheduler: the chunks are graded there
    preflight: bool = True  # grade the reference answers and a blank release first (preflight.py)
    quiet: bool = False  # no progress lines (progress.py)
    check: bool = False  # only the preflight (``manyheads grade --check``): no submissions, nothing written to OUT


@contextlib.contextmanager
def _alembic_on_path():
    """nbgrader's Gradebook creates a new database's tables by running ``alembic`` from PATH: in this process too
    (a PostgreSQL gradebook is opened here), with the venv's bin/ first even when the venv is not activated."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), before])
    try:
        yield
    finally:
        os.environ["PATH"] = before


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """nbgrader runs ``alembic`` from PATH when it creates a gradebook: the venv's bin/ goes first."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("JUPYTER_PATH", None)
    return {**env, **(extra or {})}


def normalise_db(url: str) -> str:
    """``postgresql://`` with the psycopg2 driver when psycopg (3) is not installed (SQLAlchemy's default)."""
    if url.startswith("postgresql://"):
        import importlib.util

        if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2") is not None:
            return "postgresql+psycopg2://" + url[len("postgresql://") :]
    return url


def nbgrader(
    course: Path, *args: str, db: str, env: dict | None = None, timeout: float | None = None, watch=None
) -> tuple[int, str]:
    """Run one nbgrader command in ``course``: (exit status, output). Never raises on nbgrader's own failures.
    ``watch`` is called about twice a second while it runs (progress.Watch)."""
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        *args,
        f"--CourseDirectory.root={course}",
        f"--CourseDirectory.db_url={db}",
    ]
    deadline = None if timeout is None else time.monotonic() + timeout
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(cmd, cwd=course, env=_env(env), stdout=log, stderr=subprocess.STDOUT, text=True)
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                proc.wait(timeout=left if watch is None else 0.5 if left is None else min(0.5, left))
                break
            except subprocess.TimeoutExpired:
                if watch is not None:
                    watch()
                if deadline is not None and time.monotonic() >= deadline:
                    proc.kill()
                    proc.wait()
                    log.seek(0)
                    return -9, f"{log.read()}\nnbgrader stopped after {timeout:.0f} s"
        log.seek(0)
        return proc.returncode, log.read()


def find_course(assignment: str, course: Path | None = None) -> Path:
    """The course holding solutions/ASSIGNMENT: ``course``, else the current folder, else this checkout."""
    from manyheads.course.layout import REPO_ROOT, CourseLayout, CourseNotFound

    candidates = [Path(course)] if course else [Path.cwd(), REPO_ROOT]
    for root in candidates:
        layout = CourseLayout(root)
        if layout.is_course():
            try:
                return layout.require(assignment).root.resolve()
            except CourseNotFound as exc:
                raise GradingError(str(exc)) from exc
    raise GradingError(f"no nbgrader course (nbgrader_config.py + solutions/) in {', '.join(map(str, candidates))}")


def _released(db: str, assignment: str) -> bool:
    """Whether the gradebook at ``db`` already holds the assignment with its notebooks."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SQLAlchemyError

    for attempt in range(5):  # opening a new gradebook creates its tables: two graders may race to do it
        try:
            with _alembic_on_path(), Gradebook(db, "manyheads") as gb:
                return bool(gb.find_assignment(assignment).notebooks)
        except MissingEntry:
            return False
        except SQLAlchemyError:
            if attempt == 4:
                raise
            time.sleep(1 + attempt)
    return False


def release_course(source: Path, assignment: str, work: Path, db: str) -> nbformat.NotebookNode:
    """Copy the course's config and the assignment's source into ``work`` and release it with the gradebook."""
    work.mkdir(parents=True)
    shutil.copy2(source / CONFIG_FILE, work / CONFIG_FILE)
    shutil.copytree(source / "solutions" / assignment, work / "solutions" / assignment)
    # In a shared gradebook that already holds the assignment, another grader may be autograding right now:
    # re-releasing would rewrite the rows its submissions point to, so only the files are generated (--no-db).
    no_db = ["--no-db"] if db.startswith("postgresql") and _released(db, assignment) else []
    for attempt in range(3):  # a shared PostgreSQL gradebook: another grader may be releasing at the same moment
        status, output = nbgrader(work, "generate_assignment", assignment, "--force", *no_db, db=db)
        if status == 0 or not db.startswith("postgresql"):
            break
        time.sleep(2 + 3 * attempt)
    if status != 0:
        raise GradingError(f"nbgrader generate_assignment {assignment} failed:\n{output[-3000:]}")
    return nbformat.read(work / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)


def check_submissions(
    submissions: Path, release: nbformat.NotebookNode, assignment: str, pattern: str | None, lms: str = "auto"
) -> tuple[list[Row], list[str]]:
    """Collect and check every student's files: one Row each (with the notebook to grade, or failed)."""
    subs, skipped = collect_mod.collect(submissions, pattern, lms)
    rows = []
    for sub in subs:
        row = Row(sub.student_id, problems=list(sub.problems), name=sub.name)
        checked = {
            name: (integrity.check(data, release, assignment), mtime) for name, (data, mtime) in sub.files.items()
        }
        pick, repairs, notes = integrity.choose(checked) if checked else (None, [], [])
        row.problems += notes + repairs
        row.repaired = bool(repairs)
        if pick is None:
            fatal = [f"{n}: {c.fatal}" for n, (c, _) in sorted(checked.items())] or ["no readable notebook"]
            row.problems = fatal + row.problems
        else:
            chosen = checked[pick][0]
            row.notebook = chosen.notebook
            row.submitted = flags_mod.stored(sub.files[pick][0])
            row.version = versions.written_for(integrity.parse(sub.files[pick][0])[0])  # before the repairs
            row.problems += [f"{pick}: {p}" if len(checked) > 1 else p for p in chosen.notes + chosen.repairs]
            row.repaired = row.repaired or bool(chosen.repairs)
        rows.append(row)
    return rows, skipped


STARTUP_DEATH = (
    "the kernel died at start-up, before any of the notebook ran: an environment problem, not the student's "
    "(`manyheads grade --check ASSIGNMENT` says why)"
)


def _why_failed(log: str, student: str) -> str:
    text = log.replace("\r", "")
    for needle, why in (
        ("Kernel died before replying to kernel_info", STARTUP_DEATH),
        ("DeadKernelError", "the kernel died (e.g. the code killed it or ran out of memory)"),
        ("Kernel died", "the kernel died (e.g. the code killed it or ran out of memory)"),
        ("CellTimeoutError", "a cell ran past the time limit and could not be interrupted"),
        ("stopped after", "grading this notebook ran past the overall time limit"),
        ("Kernel didn't respond", "the kernel did not start"),
    ):
        if needle in text:
            return f"nbgrader could not grade it: {why}"
    errors = [
        line.strip()
        for line in text.splitlines()
        if ("Error" in line or "ERROR" in line)
        and "above traceback" not in line
        and "There was an error processing" not in line
    ]
    last = f": {errors[-1][:200]}" if errors else ""
    return f"nbgrader could not grade it{last} (full log in OUT/.work with --keep-work)"


class _Worker:
    def __init__(self, index: int, master: Path, work: Path, assignment: str, db: str, opts: Options):
        self.root = work / f"worker-{index}"
        shutil.copytree(master, self.root)
        self.db = db if db.startswith("postgresql") else f"sqlite:///{self.root / 'gradebook.db'}"
        self.assignment, self.opts, self.chunks, self.log = assignment, opts, 0, []
        self.args = [f"--Execute.timeout={opts.timeout}", "--OverwriteCells.add_missing_cells=True"]
        self.uid = sandbox_mod.worker_uid(index)
        if opts.sandbox:
            rt, scratch = sandbox_mod.runtime_folder(self.root / "sandbox")
            share = sandbox_mod.prepare(self.root / "sandbox", opts.limits, uid=self.uid, assignment=assignment)
            self.args += sandbox_mod.nbgrader_args(rt)
            self.env = sandbox_mod.environment(share, rt, scratch)
        else:  # no sandbox: the same launcher (the own-work rule) in a plain kernel
            rt, _ = sandbox_mod.runtime_folder(self.root / "kernel")
            share = sandbox_mod.prepare_plain(self.root / "kernel", opts.limits, assignment)
            self.args += [f"--Execute.kernel_name={sandbox_mod.PLAIN_KERNEL_NAME}", sandbox_mod.IN_MEMORY_HISTORY]
            self.env = sandbox_mod.environment(share, rt)
        self.rt: Path | None = rt
        self.share = share
        self.progress: progress_mod.Progress | None = None  # set by grade() once the preflight is over
        self.test_ids: set[str] = set()
        self.template: subprocess.Popen | None = None

    def start_template(self) -> None:
        """(Re)start this worker's template process (kernel_template.py): kernels are forked from it, each in its
        own sandbox, instead of each starting Python and importing torch again. Without it they start as before."""
        if self.template is not None and self.template.poll() is None:
            return
        self.template = sandbox_mod.start_template(
            self.share,
            self.rt,
            self.opts.limits,
            uid=self.uid,
            assignment=self.assignment,
            sandboxed=self.opts.sandbox,
            log=self.root / "template.log",
        )
        if self.template is not None and not sandbox_mod.template_ready(self.rt, self.template):
            self.log.append((self.root / "template.log").read_text(encoding="utf-8", errors="replace")[-2000:])

    def kernels_from_template(self) -> int:
        """How many kernels this worker's template process has forked so far (its log says)."""
        log = self.root / "template.log"
        if not log.is_file():
            return 0
        text = log.read_text(encoding="utf-8", errors="replace")
        return sum(line.startswith(kernel_template.SERVED) for line in text.splitlines())

    def close(self) -> None:
        """Stop the template process and remove the runtime folder."""
        if self.template is not None and self.template.poll() is None:
            self.template.kill()
            self.template.wait()
        if self.rt is not None:
            shutil.rmtree(self.rt, ignore_errors=True)

    def autograde(self, rows: list[Row]) -> None:
        self.chunks += 1
        if len(rows) > 1:  # its start-up (seconds) pays off from the second notebook; again if it died meanwhile
            self.start_template()
        folder = f"submitted-{self.chunks}"
        for row in rows:
            target = self.root / folder / row.student_id / self.assignment
            target.mkdir(parents=True)
            (target / f"{self.assignment}.ipynb").write_text(nbformat.writes(row.notebook), encoding="utf-8")
        per_notebook = self.opts.timeout * 8 + 120
        watch = progress_mod.Watch(self.progress, rows, self.autograded, self.test_ids)
        status, log = nbgrader(
            self.root,
            "autograde",
            self.assignment,
            "--force",
            f"--CourseDirectory.submitted_directory={folder}",
            *self.args,
            db=self.db,
            env=self.env,
            timeout=per_notebook * len(rows),
            watch=watch,
        )
        watch(final=True)
        self.log.append(log)
        missing = [r for r in rows if not self.autograded(r).is_file()]
        if len(rows) > 1 and missing:  # grade the ones that did not make it alone, so one cannot sink the rest
            for row in missing:
                status, log = nbgrader(
                    self.root,
                    "autograde",
                    self.assignment,
                    "--force",
                    f"--student={row.student_id}",
                    f"--CourseDirectory.submitted_directory={folder}",
                    *self.args,
                    db=self.db,
                    env=self.env,
                    timeout=per_notebook,
                    watch=watch,
                )
                self.log.append(log)
                watch(final=True)
                if not self.autograded(row).is_file():
                    row.problems.append(_why_failed(log, row.student_id))
        elif missing:
            missing[0].problems.append(_why_failed(log, missing[0].student_id))
        for row in rows:
            if not self.autograded(row).is_file():
                watch.failed(row, (row.problems or ["not graded"])[-1].removeprefix("nbgrader could not grade it: "))

    def autograded(self, row: Row) -> Path:
        return self.root / "autograded" / row.student_id / self.assignment / f"{self.assignment}.ipynb"

    def feedback(self) -> None:
        if any((self.root / "autograded").glob("*")):
            status, log = nbgrader(self.root, "generate_feedback", self.assignment, "--force", db=self.db)
            self.log.append(log)


def _scores(db: str, assignment: str, students: list[str]) -> dict[str, dict]:
    from nbgrader.api import Gradebook, MissingEntry

    found = {}
    with _alembic_on_path(), Gradebook(db, "manyheads") as gb:
        for student in students:
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            [nb] = sub.notebooks
            found[student] = {g.name: (g.auto_score, g.max_score, g.needs_manual_grade, g.cell_type) for g in nb.grades}
    return found


RUN_NOTES = {
    "time": "a cell ran past its time limit (an infinite loop?) and was stopped",
    "memory": "a cell ran out of memory (MemoryError)",
    "output": "output cut at the grader's limit",
}


def _run_notes(path: Path) -> list[str]:
    """What happened while the notebook ran that the instructor should know (limits hit), from its outputs."""
    nb = nbformat.read(path, as_version=4)
    hit = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                if out.get("ename") in ("KeyboardInterrupt", "CellTimeoutError", "TimeoutError"):
                    hit.add("time")
                elif out.get("ename") == "MemoryError":
                    hit.add("memory")
            elif "[output cut by the grader" in str(out.get("text", "")):
                hit.add("output")
    return [RUN_NOTES[k] for k in RUN_NOTES if k in hit]


OWN_WORK = "own work"  # starts every problem about the own-work rule (report.py lists them for a human)


def hidden_helpers(source: nbformat.NotebookNode) -> set[str]:
    """Names of the functions the hidden tests define (between the HIDDEN TESTS markers of the test cells)."""
    names: set[str] = set()
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        hidden = cell.source.partition("### BEGIN HIDDEN TESTS")[2].partition("### END HIDDEN TESTS")[0]
        names.update(re.findall(r"^\s*def\s+(\w+)", hidden, flags=re.MULTILINE))
    return names


def student_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(label, source) of the code the student wrote: answer and extra cells, not the course's cells as released."""
    course = {versions.without_version(c.source).strip() for c in release.cells if c.cell_type == "code"}
    found = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        ours = versions.without_version(cell.source).strip() in course
        if cell.cell_type != "code" or meta.get("locked") or meta.get("grade") or ours:
            continue
        found.append(
            (f"answer cell {meta['grade_id']}" if meta.get("grade_id") else f"extra cell {i + 1}", cell.source)
        )
    return found


def own_work(row: Row, graded: Path, test_ids: list[str], helpers: set[str], release: nbformat.NotebookNode) -> None:
    """Add to ``row`` the parts given no points by the own-work rule (with the evidence the kernel left in the
    graded notebook), refusals the answer caught, and the ways around the rule the guard cannot close."""
    zeroed, caught = delegation.delegations(nbformat.read(graded, as_version=4), test_ids)
    row.zeroed = zeroed
    row.problems += [f"{OWN_WORK}: {test} got no points: {why}" for test, why in zeroed.items()]
    row.problems += [f"{OWN_WORK}: a refusal was caught by the answer ({line})" for line in caught]
    if row.notebook is not None:
        row.problems += [
            f"{OWN_WORK}, look by hand: {note}"
            for note in delegation.open_routes(student_cells(row.notebook, release), helpers)
        ]


def merge_sqlite(target: Path, sources: list[Path]) -> None:
    """Merge worker gradebooks into ``target`` (a copy of the master gradebook): every row once, in FK order."""
    from nbgrader.api import Base

    tables = [t.name for t in Base.metadata.sorted_tables]
    with sqlite3.connect(target) as con:
        for i, source in enumerate(sources):
            con.execute(f"ATTACH DATABASE ? AS w{i}", (str(source),))
            for table in tables:
                con.execute(f"INSERT OR IGNORE INTO main.{table} SELECT * FROM w{i}.{table}")
            con.commit()
            con.execute(f"DETACH DATABASE w{i}")


def test_points(release: nbformat.NotebookNode) -> dict[str, float]:
    """{grade id: points} of the release's autograded test cells, in notebook order."""
    return {
        c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
    }


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def _children() -> dict[int, list[int]]:
    """{parent pid: child pids} of every process this one can see."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(b")") + 2 :].split()[:2]  # the name in parentheses may hold spaces
        if state not in (b"Z", b"X"):  # exited, waiting to be reaped: nothing to kill
            tree.setdefault(int(ppid), []).append(int(entry))
    return tree


def _exited_children() -> set[int]:
    """This process's children that have exited and wait to be reaped (zombies)."""
    me, found = str(os.getpid()), set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == b"Z" and fields[1].decode() == me:
            found.add(int(entry))
    return found


def descendants(pid: int | None = None) -> set[int]:
    """Every process below ``pid`` (default: this one) in the process tree."""
    tree, found, todo = _children(), set(), [pid or os.getpid()]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@contextlib.contextmanager
def no_leftovers():
    """While grading, this process adopts every orphan that grading leaves (a child subreaper: a student's
    double-forked or ``setsid`` process lands here, not on init); at the end every process started meanwhile that
    still runs is killed, whichever sandbox or kernel it came from. Processes that were there before are kept."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = ctypes.c_int(0)
    libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
    existing = descendants()
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        for _ in range(100):  # a process may fork while it is being killed: look again until nothing is left
            left = descendants() - existing
            for pid in _exited_children() - existing:  # adopted orphans that have exited: reap them
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


def grade(
    assignment: str, submissions: Path | None, out: Path, opts: Options, course: Path | None = None
) -> tuple[list[Row], dict]:
    """Grade every student's submission; write nothing but ``out``. Returns the rows and facts for the report.
    With ``opts.check`` only the preflight runs (``submissions`` may be None) and the rows are empty. No process
    that grading started outlives it (:func:`no_leftovers`)."""
    # On a cluster the students' kernels run inside the dask workers; the processes started here meanwhile are dask's
    # own (a nanny restarting a lost worker), which must outlive this call.
    with contextlib.nullcontext() if opts.scheduler else no_leftovers():
        return _grade(assignment, submissions, out, opts, course)


def _grade(
    assignment: str, submissions: Path | None, out: Path, opts: Options, course: Path | None = None
) -> tuple[list[Row], dict]:
    started = time.monotonic()
    source = find_course(assignment, course)
    out = Path(out).resolve()
    if not opts.check:
        submissions = Path(submissions).resolve()
        if out == submissions or submissions in out.parents or out in submissions.parents:
            raise GradingError("--out must be outside SUBMISSIONS (the submissions are never modified)")
    if opts.sandbox and (why := sandbox_mod.available()):
        raise GradingError(why)
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    shutil.rmtree(work, ignore_errors=True)
    master = work / "course"
    db = normalise_db(opts.db) if opts.db else f"sqlite:///{master / 'gradebook.db'}"
    release = release_course(source, assignment, master, db)
    helpers = hidden_helpers(nbformat.read(master / "solutions" / assignment / f"{assignment}.ipynb", as_version=4))
    feedback_mod.configure(master / CONFIG_FILE, opts.feedback)  # the workers copy it
    budget.use_budget(master / CONFIG_FILE)  # a time budget per notebook: 5 s a cell after its first timeout
    points = test_points(release)
    test_ids = list(points)
    rows, skipped = (
        ([], []) if opts.check else check_submissions(submissions, release, assignment, opts.pattern, opts.lms)
    )
    todo = [r for r in rows if r.notebook is not None]
    jobs = max(1, min(opts.jobs, len(todo)))
    workers = [] if opts.scheduler else [_Worker(i, master, work, assignment, db, opts) for i in range(jobs)]
    checked = None
    if (opts.preflight or opts.check) and (workers or opts.check):
        from manyheads.course.grading import preflight

        first = workers[0] if workers else _Worker(0, master, work, assignment, db, opts)
        solution = nbformat.read(master / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
        checked = preflight.run(first, release, solution, assignment, points, sys.executable)
        if not checked.ok or opts.check:
            first.close()
            for worker in workers:
                worker.close()
            if not opts.keep_work:
                shutil.rmtree(work, ignore_errors=True)
            if not checked.ok:
                raise preflight.PreflightError(checked.message(assignment))
            return [], {"assignment": assignment, "preflight": checked.summary(), "seconds": time.monotonic() - started}
    # One nbgrader process per chunk: its start-up costs seconds, so chunks are large (one per job for a small
    # class); a large class is cut into several chunks per job, taken from a queue so that the jobs stay balanced.
    # Equal chunks of at most 40 (each costs an nbgrader start, and a chunk that fails is graded again one by one):
    # 60 notebooks on 2 jobs are 2 chunks of 30, 100 are 4 of 25, not 40 + 40 + 20 (one job would grade 60).
    tracker = progress_mod.Progress(len(todo), quiet=opts.quiet)
    for worker in workers:
        worker.progress, worker.test_ids = tracker, set(test_ids)
    per_job = -(-len(todo) // jobs)
    chunk = opts.chunk or max(1, -(-len(todo) // (jobs * max(1, -(-per_job // 40)))))
    tasks: queue.Queue = queue.Queue()
    for i in range(0, len(todo), chunk):
        tasks.put(todo[i : i + chunk])
    where: dict[str, _Worker] = {}
    errors: list[BaseException] = []

    def run(worker: _Worker) -> None:
        try:
            while True:
                try:
                    batch = tasks.get_nowait()
                except queue.Empty:
                    break
                for row in batch:
                    where[row.student_id] = worker
                worker.autograde(batch)
            worker.feedback()
        except BaseException as exc:  # reported after the other workers finish
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if opts.scheduler:  # the same chunks, each graded by the same _Worker code on a dask worker (cluster.py)
        from manyheads.course.grading import cluster

        workers = cluster.grade_on_cluster(opts.scheduler, master, work, assignment, db, opts, tasks, where)
    forked = sum(w.kernels_from_template() for w in workers) - (checked.forked if checked else 0)
    for worker in workers:
        worker.close()
    if errors:
        raise errors[0]
    # Scores from the gradebook(s), feedback into OUT/feedback/<student>/<notebook>.html
    by_worker: dict[int, list[str]] = {}
    for student, worker in where.items():
        by_worker.setdefault(id(worker), []).append(student)
    scores: dict[str, dict] = {}
    for worker in workers:
        scores.update(_scores(worker.db, assignment, by_worker.get(id(worker), [])))
    for row in rows:
        worker = where.get(row.student_id)
        if worker is None or not worker.autograded(row).is_file() or row.student_id not in scores:
            row.status = "failed"
            if row.notebook is not None and not any(p.startswith("nbgrader could not") for p in row.problems):
                row.problems.append("nbgrader could not grade it")
            continue
        got = scores[row.student_id]
        row.tests = {g: got.get(g, (None,))[0] for g in test_ids}
        pending = [g for g in test_ids if got.get(g, (None, 0, True))[2]]
        if pending:
            row.problems.append(f"needs a manual look: no automatic score for {', '.join(pending)}")
        row.problems += _run_notes(worker.autograded(row))
        own_work(row, worker.autograded(row), test_ids, helpers, release)
        row.failures = report_mod.failures(nbformat.read(worker.autograded(row), as_version=4))
        row.flags = flags_mod.out_of_order(
            row.submitted, nbformat.read(worker.autograded(row), as_version=4), release
        ) + flags_mod.tampering(student_cells(row.notebook, release), release, helpers)
        row.score = float(sum(v or 0.0 for v in row.tests.values()))
        row.max_score = float(sum(points.values()))
        row.status = "repaired" if row.repaired else "graded"
        html = worker.root / "feedback" / row.student_id / assignment / f"{assignment}.html"
        if html.is_file():
            row.feedback = out / FEEDBACK_DIR[opts.feedback] / row.student_id / f"{assignment}.html"
            row.feedback.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(html, row.feedback)
        else:
            row.problems.append("no feedback file was produced")
    by_student = {r.student_id: flags_mod.answers(r.notebook) for r in rows}
    solution = nbformat.read(master / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    reference = flags_mod.answers(solution)  # the published reference solution: marked as such when handed in
    copied = flags_mod.identical_answers(by_student, release, reference)
    for row in rows:
        row.flags += copied.get(row.student_id, [])
    groups = [g for g in flags_mod.identical_groups(by_student, release, reference) if not g.common]
    _publish_course(out / "course", master, workers, assignment, db, opts)
    feedback_mod.configure(out / "course" / CONFIG_FILE, "student")  # stock generate_feedback there is safe too
    if not opts.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    released = source / "exercises" / assignment / f"{assignment}.ipynb"
    course_version = versions.course(released if released.is_file() else release)
    mismatches = versions.compare(
        {r.student_id: r.version for r in rows if r.notebook is not None}, course_version.expected
    )
    facts = {
        "assignment": assignment,
        "identical": [dataclasses.asdict(g) for g in groups],  # the report lists one line per group
        "versions": {
            "expected": course_version.expected,
            "release": course_version.release,
            "package": course_version.package,
            "disagreement": course_version.disagreement(),
            "other": mismatches.other,
            "unknown": mismatches.unknown,
        },
        "skipped": skipped,
        "jobs": jobs,
        "sandbox": opts.sandbox,
        "forked_kernels": forked,  # kernels forked from a template process (the rest started Python each)
        "preflight": checked.summary() if checked else "not run" + (" (graded on a cluster)" if opts.scheduler else ""),
        "seconds": time.monotonic() - started,
        "test_ids": test_ids,
        "points": points,
        "db": "postgresql" if opts.db and opts.db.startswith("postgresql") else "sqlite",
        "log": "\n".join(line for w in workers for line in w.log),
    }
    return rows, facts


def _publish_course(dest: Path, master: Path, workers: list[_Worker], assignment: str, db: str, opts: Options) -> None:
    """OUT/course: an nbgrader course with the release, the graded notebooks and (with sqlite) the merged gradebook."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in (CONFIG_FILE, "solutions", "exercises"):
        (shutil.copytree if (master / name).is_dir() else shutil.copy2)(master / name, dest / name)
    if not db.startswith("postgresql"):
        shutil.copy2(master / "gradebook.db", dest / "gradebook.db")
        merge_sqlite(dest / "gradebook.db", [w.root / "gradebook.db" for w in workers])
    else:
        with open(dest / CONFIG_FILE, "a", encoding="utf-8") as config:
            config.write(f"\n# Written by manyheads grade: the class's gradebook.\nc.CourseDirectory.db_url = {db!r}\n")
    for worker in workers:
        for step in ("autograded", "feedback"):
            if (worker.root / step).is_dir():
                shutil.copytree(worker.root / step, dest / step, dirs_exist_ok=True)
        for submitted in worker.root.glob("submitted-*"):
            shutil.copytree(submitted, dest / "submitted", dirs_exist_ok=True)
