"""Grade a class with real nbgrader: a master course, worker copies graded in parallel, one merged gradebook.

The runner only wires the stages, in order, each a function of its own module from the frozen records of the stage
before to its own: the release (here), found and checked (``review.checking``: ``Checked``), the preflight
(``execution.preflight``), executed (``execution.executing``: the workers' queue of chunks, or the cluster;
``Executed``), scored (``scoring``: ``Scored``), reviewed (``review.reviewing``: ``Reviewed``), joined into the class
result (``records.class_result``), published (``output.gradebook``, here) and kept (``store``: every stage's records
under OUT/records). The outputs (grades.csv, the LMS files, feedback, the report) are written from the class result
and the :class:`~manyheads_grader.records.RunFacts` it returns, as kept (``cli``).

Layout under ``OUT/.work`` (scratch, removed at the end unless ``keep_work``):

* ``course/``   nbgrader_config.py, solutions/ASSIGNMENT, exercises/ASSIGNMENT (regenerated with the gradebook);
* ``worker-K/`` a copy of ``course/`` per job. Each takes chunks of students from a shared queue and runs one
  ``nbgrader autograde`` per chunk (a fresh ``submitted-N/`` folder each time), then ``generate_feedback`` for that
  chunk, all in one nbgrader process of its own (``nbgrader.session``).

With sqlite each worker has its own copy of the gradebook (sqlite is not safe for concurrent writers) and the
copies are merged row by row into ``OUT/course/gradebook.db`` at the end; nbgrader's ids are UUIDs, so rows never
collide. With ``--db postgresql://…`` every worker (and every machine) writes to the one database directly.
``OUT/course`` is a normal nbgrader course (autograded notebooks, gradebook), so ``nbgrader formgrader`` and the
rest of the stock CLI work on it for the written answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import time
from pathlib import Path

import nbformat

from manyheads.course.layout import CourseLayout
from manyheads_grader import notebooks, store
from manyheads_grader.execution import budget, preflight, sandbox
from manyheads_grader.execution.executing import CHUNK_MAX, CLUSTER_CHUNK_MAX, Execution, chunk_size, execute
from manyheads_grader.execution.processes import no_leftovers
from manyheads_grader.execution.worker import Worker
from manyheads_grader.nbgrader.command import nbgrader
from manyheads_grader.output import feedback, gradebook
from manyheads_grader.records import (
    FEEDBACK_DIR,
    Checked,
    GradingError,
    Options,
    Release,
    Row,
    Run,
    RunFacts,
    VersionFacts,
    class_result,
)
from manyheads_grader.review import versions
from manyheads_grader.review.checking import check_submissions
from manyheads_grader.review.reviewing import answer_key, review_class
from manyheads_grader.scoring import score_class

__all__ = [
    "find_course",
    "release_course",
    "check_submissions",
    "grade",
    "chunk_size",
    "CHUNK_MAX",
    "CLUSTER_CHUNK_MAX",
    "FEEDBACK_DIR",
    "GradingError",
    "Options",
    "Row",
]

CONFIG_FILE = CourseLayout.CONFIG_FILE


def _jobs(opts: Options) -> int:
    """How many workers to prepare before the submissions are counted: ``--jobs``, one for ``--check``."""
    return 1 if opts.check else max(1, opts.jobs)


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


def release_course(source: Path, assignment: str, work: Path, db: str) -> nbformat.NotebookNode:
    """Copy the course's config and the assignment's source into ``work`` and release it with the gradebook."""
    work.mkdir(parents=True)
    shutil.copy2(source / CONFIG_FILE, work / CONFIG_FILE)
    shutil.copytree(source / "solutions" / assignment, work / "solutions" / assignment)
    # In a shared gradebook that already holds the assignment, another grader may be autograding right now:
    # re-releasing would rewrite the rows its submissions point to, so only the files are generated (--no-db).
    no_db = ["--no-db"] if db.startswith("postgresql") and gradebook.released(db, assignment) else []
    for attempt in range(3):  # a shared PostgreSQL gradebook: another grader may be releasing at the same moment
        status, output = nbgrader(work, "generate_assignment", assignment, "--force", *no_db, db=db)
        if status == 0 or not db.startswith("postgresql"):
            break
        time.sleep(2 + 3 * attempt)
    if status != 0:
        raise GradingError(f"nbgrader generate_assignment {assignment} failed:\n{output[-3000:]}")
    return nbformat.read(work / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)


def grade(
    assignment: str, submissions: Path | None, out: Path, opts: Options, course: Path | None = None
) -> tuple[list[Row], RunFacts]:
    """Grade every student's submission; write nothing but ``out``. Returns the rows and what the run observed.
    With ``opts.check`` only the preflight runs (``submissions`` may be None) and the rows are empty. No process
    that grading started outlives it (:func:`no_leftovers`)."""
    # On a cluster the students' kernels run inside the dask workers; the processes started here meanwhile are dask's
    # own (a nanny restarting a lost worker), which must outlive this call.
    with contextlib.nullcontext() if opts.scheduler else no_leftovers():
        return _grade(assignment, submissions, out, opts, course)


def _grade(
    assignment: str, submissions: Path | None, out: Path, opts: Options, course: Path | None = None
) -> tuple[list[Row], RunFacts]:
    started = time.monotonic()
    source = find_course(assignment, course)
    out = Path(out).resolve()
    if not opts.check:
        submissions = Path(submissions).resolve()
        if out == submissions or submissions in out.parents or out in submissions.parents:
            raise GradingError("--out must be outside SUBMISSIONS (the submissions are never modified)")
    if opts.sandbox and (why := sandbox.available()):
        raise GradingError(why)
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    shutil.rmtree(work, ignore_errors=True)
    master = work / "course"
    db = gradebook.normalise_db(opts.db) if opts.db else f"sqlite:///{master / 'gradebook.db'}"
    # The workers' sandboxes and template processes first: a template's imports (torch, seconds of CPU) run while
    # the course is released and the submissions are checked, not after. Those the class turns out not to need
    # are closed below.
    workers = [] if opts.scheduler else [Worker(i, None, work, assignment, db, opts) for i in range(_jobs(opts))]
    for worker in workers:
        worker.launch_template()
    run = Run(assignment, opts, out, source, master, db, started)
    try:
        return _grade_with(workers, submissions, run)
    finally:
        for worker in workers:
            worker.close()  # again after a normal end (closing twice is harmless); after an error, now


def _release(run: Run) -> Release:
    """Release the assignment in the master course (with the gradebook) and read what grading needs of it."""
    notebook = release_course(run.source, run.assignment, run.master, run.db)
    solution = nbformat.read(run.master / "solutions" / run.assignment / f"{run.assignment}.ipynb", as_version=4)
    feedback.configure(run.master / CONFIG_FILE, run.opts.feedback)  # the workers copy it
    budget.use_budget(run.master / CONFIG_FILE)  # a time budget per notebook: 5 s a cell after its first timeout
    # The hidden tests' helpers: what the own-work rule and the review compare with.
    return Release(notebook, solution, frozenset(notebooks.hidden_helpers(solution)), notebooks.test_points(notebook))


def _preflight(workers: list[Worker], release: Release, run: Run):
    """Grade the reference answers and a blank release first (preflight.py): None when it is not run; stops the
    run (closing the workers) when it fails."""
    opts = run.opts
    if not ((opts.preflight or opts.check) and (workers or opts.check)):
        return None
    first = workers[0] if workers else Worker(0, run.master, run.work, run.assignment, run.db, opts)
    checked = preflight.run(first, release.notebook, release.solution, run.assignment, release.points, sys.executable)
    if not checked.ok or opts.check:
        for worker in {first, *workers}:
            worker.close()
        if not opts.keep_work:
            shutil.rmtree(run.work, ignore_errors=True)
        if not checked.ok:
            raise preflight.PreflightError(checked.message(run.assignment))
    return checked


def _publish(run: Run, execution: Execution) -> None:
    """OUT/course: a normal nbgrader course with the merged gradebook, for the formgrader and the stock commands."""
    gradebook.publish_course(run.out / "course", run.master, execution.workers, run.assignment, run.db)
    feedback.configure(run.out / "course" / CONFIG_FILE, "student")  # stock generate_feedback there is safe too
    if not run.opts.keep_work:
        shutil.rmtree(run.work, ignore_errors=True)


def _facts(run: Run, checked: list[Checked], release: Release, execution: Execution, **more) -> RunFacts:
    released = run.source / "exercises" / run.assignment / f"{run.assignment}.ipynb"
    course = versions.course(released if released.is_file() else release.notebook)
    mismatches = versions.compare({c.student_id: c.version for c in checked if c.notebook is not None}, course.expected)
    found = VersionFacts(
        course.expected, course.release, course.package, course.disagreement(), mismatches.other, mismatches.unknown
    )
    db = "postgresql" if run.opts.db and run.opts.db.startswith("postgresql") else "sqlite"
    return RunFacts(
        run.assignment,
        release.points,
        versions=found,
        sandbox=run.opts.sandbox,
        forked_kernels=execution.forked,
        not_forked=execution.not_forked,
        phases=execution.phases,
        seconds=run.seconds(),
        db=db,
        log=execution.log,
        manual=notebooks.manual_points(release.notebook),
        manifest=notebooks.release_manifest(release.notebook),
        **more,
    )


def _grade_with(workers: list[Worker], submissions: Path | None, run: Run) -> tuple[list[Row], RunFacts]:
    """The stages in order: release, found and checked, the preflight, executed, scored, reviewed, published; each
    stage's records are kept under OUT/records."""
    opts = run.opts
    release = _release(run)
    checked, skipped = [], []
    if not opts.check:
        checked, skipped = check_submissions(
            submissions, release.notebook, run.assignment, opts.pattern, opts.lms, opts.earlier
        )
    todo = [c for c in checked if c.notebook is not None]
    jobs = 1 if opts.check else max(1, min(opts.jobs, len(todo)))
    for worker in workers[jobs:]:
        worker.close()
    workers = workers[:jobs]
    for worker in workers:
        worker.take_course(run.master)
    ready = _preflight(workers, release, run)
    if opts.check:
        return [], RunFacts(run.assignment, release.points, preflight=ready.summary(), seconds=run.seconds())
    execution = execute(workers, todo, release.test_ids, run, jobs, ready.forked if ready else 0)
    scored = score_class(checked, execution, release, run)
    graded = {s: e.graded for s, e in execution.students.items() if scored[s].status != "failed"}
    reviewed, groups = review_class(checked, graded, release)
    rows = class_result(checked, execution.students, scored, reviewed)
    _publish(run, execution)
    store.write_stages(run.out, run.assignment, checked, execution.students, scored, reviewed)  # OUT/course: published
    store.write_answer_key(run.out, answer_key(release))  # what a later re-grade compares the class against
    ran = ready.summary() if ready else "not run" + (" (graded on a cluster)" if opts.scheduler else "")
    identical = [dataclasses.asdict(g) for g in groups]  # the report lists one line per group
    return rows, _facts(
        run, checked, release, execution, identical=identical, skipped=skipped, jobs=jobs, preflight=ran
    )
