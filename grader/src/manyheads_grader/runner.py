"""Grade a class with real nbgrader: a master course, worker copies graded in parallel, one merged gradebook.

Layout under ``OUT/.work`` (scratch, removed at the end unless ``keep_work``):

* ``course/``   nbgrader_config.py, solutions/ASSIGNMENT, exercises/ASSIGNMENT (regenerated with the gradebook);
* ``worker-K/`` a copy of ``course/`` per job. Each takes chunks of students from a shared queue and runs one
  ``nbgrader autograde`` per chunk (a fresh ``submitted-N/`` folder each time), then ``generate_feedback`` for that
  chunk, all in one nbgrader process of its own (``nbgrader_session``).

With sqlite each worker has its own copy of the gradebook (sqlite is not safe for concurrent writers) and the
copies are merged row by row into ``OUT/course/gradebook.db`` at the end; nbgrader's ids are UUIDs, so rows never
collide. With ``--db postgresql://…`` every worker (and every machine) writes to the one database directly.
``OUT/course`` is a normal nbgrader course (autograded notebooks, gradebook), so ``nbgrader formgrader`` and the
rest of the stock CLI work on it for the written answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import shutil
import sys
import threading
import time
from pathlib import Path

import nbformat

from manyheads.course.layout import CourseLayout
from manyheads_grader import (
    budget,
    cluster,
    feedback,
    gradebook,
    notebooks,
    own_work,
    preflight,
    progress,
    repair,
    report,
    review_flags,
    sandbox,
    versions,
)
from manyheads_grader.nbgrader_command import nbgrader
from manyheads_grader.processes import no_leftovers
from manyheads_grader.records import (
    FEEDBACK_DIR,
    GradingError,
    Options,
    Problem,
    ProblemKind,
    Row,
    RunFacts,
    VersionFacts,
    not_graded,
)
from manyheads_grader.submissions import collect as collect_submissions
from manyheads_grader.worker import Worker

__all__ = [
    "find_course",
    "release_course",
    "check_submissions",
    "grade",
    "FEEDBACK_DIR",
    "GradingError",
    "Options",
    "Row",
]

CONFIG_FILE = CourseLayout.CONFIG_FILE
CHUNK_MAX = 5  # notebooks per `nbgrader autograde` at most (runner.chunk_size)
# On a cluster each chunk is a task that sets up a worker of its own (a template process, an nbgrader process):
# larger chunks spread that cost.
CLUSTER_CHUNK_MAX = 10


def chunk_size(n: int, jobs: int, most: int = CHUNK_MAX) -> int:
    """Notebooks per chunk for ``n`` notebooks on ``jobs`` jobs: equal chunks of at most ``most``, at least
    ``jobs`` of them (every job has one), and of two or more where the class allows (a template pays off)."""
    per_job = -(-n // max(1, jobs))
    chunks = max(1, jobs) * -(-per_job // most)
    return max(1, min(-(-n // chunks), per_job), min(2, per_job))


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


def check_submissions(
    submissions: Path, release: nbformat.NotebookNode, assignment: str, pattern: str | None, lms: str = "auto"
) -> tuple[list[Row], list[str]]:
    """Collect and check every student's files: one Row each (with the notebook to grade, or failed)."""
    subs, skipped = collect_submissions(submissions, pattern, lms)
    rows = []
    for sub in subs:
        row = Row(sub.student_id, problems=[Problem(ProblemKind.COLLECTED, p) for p in sub.problems], name=sub.name)
        checked = {name: (repair.check(data, release, assignment), mtime) for name, (data, mtime) in sub.files.items()}
        pick, repairs, notes = repair.choose(checked) if checked else (None, [], [])
        row.problems += [Problem(ProblemKind.NOTE, n) for n in notes] + [
            Problem(ProblemKind.REPAIRED, r) for r in repairs
        ]
        row.repaired = bool(repairs)
        if pick is None:
            fatal = [f"{n}: {c.fatal}" for n, (c, _) in sorted(checked.items())] or ["no readable notebook"]
            row.problems = [Problem(ProblemKind.UNREADABLE, f) for f in fatal] + row.problems
        else:
            chosen = checked[pick][0]
            row.notebook = chosen.notebook
            row.submitted = review_flags.stored(sub.files[pick][0])
            row.version = versions.written_for(notebooks.read_submitted(sub.files[pick][0])[0])  # before the repairs
            prefix = f"{pick}: " if len(checked) > 1 else ""  # which of the student's files it is about
            row.problems += [Problem(ProblemKind.NOTE, prefix + p) for p in chosen.notes]
            row.problems += [Problem(ProblemKind.REPAIRED, prefix + p) for p in chosen.repairs]
            row.repaired = row.repaired or bool(chosen.repairs)
        rows.append(row)
    return rows, skipped


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
    try:
        return _grade_with(workers, assignment, submissions, out, opts, source, master, db, started)
    finally:
        for worker in workers:
            worker.close()  # again after a normal end (closing twice is harmless); after an error, now


def _grade_with(
    workers: list[Worker],
    assignment: str,
    submissions: Path | None,
    out: Path,
    opts: Options,
    source: Path,
    master: Path,
    db: str,
    started: float,
) -> tuple[list[Row], RunFacts]:
    work = master.parent
    release = release_course(source, assignment, master, db)
    solution = nbformat.read(master / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    helpers = notebooks.hidden_helpers(solution)  # the reference solution: also what review_flags compares with
    feedback.configure(master / CONFIG_FILE, opts.feedback)  # the workers copy it
    budget.use_budget(master / CONFIG_FILE)  # a time budget per notebook: 5 s a cell after its first timeout
    points = notebooks.test_points(release)
    test_ids = list(points)
    rows, skipped = (
        ([], []) if opts.check else check_submissions(submissions, release, assignment, opts.pattern, opts.lms)
    )
    todo = [r for r in rows if r.notebook is not None]
    jobs = 1 if opts.check else max(1, min(opts.jobs, len(todo)))
    for worker in workers[jobs:]:
        worker.close()
    workers = workers[:jobs]
    for worker in workers:
        worker.take_course(master)
    checked = None
    if (opts.preflight or opts.check) and (workers or opts.check):
        first = workers[0] if workers else Worker(0, master, work, assignment, db, opts)
        checked = preflight.run(first, release, solution, assignment, points, sys.executable)
        if not checked.ok or opts.check:
            first.close()
            for worker in workers:
                worker.close()
            if not opts.keep_work:
                shutil.rmtree(work, ignore_errors=True)
            if not checked.ok:
                raise preflight.PreflightError(checked.message(assignment))
            return [], RunFacts(assignment, points, preflight=checked.summary(), seconds=time.monotonic() - started)
    # One `nbgrader autograde` per chunk (in the job's nbgrader session), taken from a shared queue by whichever job
    # is free. Chunks are small (at most CHUNK_MAX, equal in size): a job held up by a notebook that loops (60 s, then
    # 5 s a cell) leaves the other jobs the rest of the queue instead of a fixed half of the class (issue 26, item 3),
    # and each chunk of two or more still runs in the job's one template process (forked kernels). A chunk in the
    # session costs a fraction of a second, so chunks are as small as 5: the notebooks after a looping one in its
    # chunk wait for it. 60 notebooks on 2 jobs are 12 chunks of 5, 65 are 13 of 5, 7 are 2 of 4 (the last of 3).
    tracker = progress.Progress(len(todo), quiet=opts.quiet)
    for worker in workers:
        worker.progress, worker.test_ids = tracker, set(test_ids)
    chunk = opts.chunk or chunk_size(len(todo), jobs, CLUSTER_CHUNK_MAX if opts.scheduler else CHUNK_MAX)
    tasks: queue.Queue = queue.Queue()
    for i in range(0, len(todo), chunk):
        tasks.put(todo[i : i + chunk])
    where: dict[str, Worker] = {}
    errors: list[BaseException] = []

    def run(worker: Worker) -> None:
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
    if opts.scheduler:  # the same chunks, each graded by the same Worker code on a dask worker (cluster.py)
        workers = cluster.grade_on_cluster(opts.scheduler, master, work, assignment, db, opts, tasks, where)
    forked = sum(w.kernels_from_template() for w in workers) - (checked.forked if checked else 0)
    not_forked = next((why for w in workers if (why := w.why_not_forked())), "")
    phases: dict[str, float] = {}
    for worker in workers:
        for key, value in worker.phase_times().items():
            phases[key] = phases.get(key, 0) + value
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
        scores.update(gradebook.scores(worker.db, assignment, by_worker.get(id(worker), [])))
    for row in rows:
        worker = where.get(row.student_id)
        if worker is None or not worker.autograded(row).is_file() or row.student_id not in scores:
            row.status = "failed"
            if row.notebook is not None and not any(p.kind is ProblemKind.NOT_GRADED for p in row.problems):
                row.problems.append(not_graded())
            continue
        got = scores[row.student_id]
        row.tests = {g: got.get(g, (None,))[0] for g in test_ids}
        pending = [g for g in test_ids if got.get(g, (None, 0, True))[2]]
        if pending:
            row.problems.append(
                Problem(ProblemKind.MANUAL, f"needs a manual look: no automatic score for {', '.join(pending)}")
            )
        graded = nbformat.read(worker.autograded(row), as_version=4)  # once: the checks below only read it
        row.problems += [Problem(ProblemKind.RUN, note) for note in notebooks.run_notes(graded)]
        own_work.apply_rule(row, graded, test_ids, helpers, release)
        row.failures = report.failures(graded)
        row.flags = review_flags.out_of_order(row.submitted, graded, release) + review_flags.tampering(
            notebooks.student_cells(row.notebook, release), release, helpers
        )
        row.score = float(sum(v or 0.0 for v in row.tests.values()))
        row.max_score = float(sum(points.values()))
        row.status = "repaired" if row.repaired else "graded"
        html = worker.root / "feedback" / row.student_id / assignment / f"{assignment}.html"
        if html.is_file():
            row.feedback = out / FEEDBACK_DIR[opts.feedback] / row.student_id / f"{assignment}.html"
            row.feedback.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(html, row.feedback)
        else:
            row.problems.append(Problem(ProblemKind.NO_FEEDBACK, "no feedback file was produced"))
    by_student = {r.student_id: review_flags.answers(r.notebook) for r in rows}
    reference = review_flags.answers(solution)  # the published reference solution: marked as such when handed in
    copied = review_flags.identical_answers(by_student, release, reference)
    for row in rows:
        row.flags += copied.get(row.student_id, [])
    groups = [g for g in review_flags.identical_groups(by_student, release, reference) if not g.common]
    gradebook.publish_course(out / "course", master, workers, assignment, db)
    feedback.configure(out / "course" / CONFIG_FILE, "student")  # stock generate_feedback there is safe too
    if not opts.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    released = source / "exercises" / assignment / f"{assignment}.ipynb"
    course_version = versions.course(released if released.is_file() else release)
    mismatches = versions.compare(
        {r.student_id: r.version for r in rows if r.notebook is not None}, course_version.expected
    )
    facts = RunFacts(
        assignment,
        points,
        identical=[dataclasses.asdict(g) for g in groups],  # the report lists one line per group
        versions=VersionFacts(
            course_version.expected,
            course_version.release,
            course_version.package,
            course_version.disagreement(),
            mismatches.other,
            mismatches.unknown,
        ),
        skipped=skipped,
        jobs=jobs,
        sandbox=opts.sandbox,
        forked_kernels=forked,
        not_forked=not_forked,
        phases=phases,  # Worker.phase_times, summed
        preflight=checked.summary() if checked else "not run" + (" (graded on a cluster)" if opts.scheduler else ""),
        seconds=time.monotonic() - started,
        db="postgresql" if opts.db and opts.db.startswith("postgresql") else "sqlite",
        log="\n".join(line for w in workers for line in w.log),
    )
    return rows, facts
