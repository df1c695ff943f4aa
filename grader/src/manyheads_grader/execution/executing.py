"""The execution stage: every checked notebook autograded by nbgrader, in chunks taken from one queue by whichever
job is free (local workers, or the same chunks on a dask cluster), with the run's observations of it.

Chunks are small (at most ``CHUNK_MAX``, equal in size): a job held up by a notebook that loops (60 s, then 5 s a
cell) leaves the other jobs the rest of the queue instead of a fixed half of the class (issue 26, item 3), and each
chunk of two or more still runs in the job's one template process (forked kernels). A chunk in the job's nbgrader
session costs a fraction of a second, so chunks are as small as 5: the notebooks after a looping one in its chunk
wait for it. 60 notebooks on 2 jobs are 12 chunks of 5, 65 are 13 of 5, 7 are 2 of 4 (the last of 3).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.execution import cluster
from manyheads_grader.execution.budget import AFTER_TIMEOUT
from manyheads_grader.execution.worker import Worker
from manyheads_grader.output import progress
from manyheads_grader.records import Checked, Executed, Problem, Run

__all__ = ["CHUNK_MAX", "CLUSTER_CHUNK_MAX", "Execution", "chunk_size", "execute"]

CHUNK_MAX = 5  # notebooks per `nbgrader autograde` at most (chunk_size)
# On a cluster each chunk is a task that sets up a worker of its own (a template process, an nbgrader process):
# larger chunks spread that cost.
CLUSTER_CHUNK_MAX = 10


@dataclass(frozen=True)
class Execution:
    """What the execution stage leaves: which worker graded each student (its gradebook, its autograded
    notebooks and feedback pages), the workers, and what the run observed of them."""

    students: dict[str, Executed]  # student id -> the stage's record: the graded notebook, cells, why not graded
    where: dict[str, Worker]  # student id -> the worker that graded the notebook
    workers: list[Worker]  # every worker that graded something (on a cluster: the chunks it returned)
    forked: int  # kernels forked from a template process (the students', not the preflight's)
    not_forked: str  # why no kernel was forked, in one line, when a worker's template failed
    phases: dict[str, float]  # where the jobs' time went, summed over the jobs (Worker.phase_times)

    @property
    def log(self) -> str:
        return "\n".join(line for w in self.workers for line in w.log)


def chunk_size(n: int, jobs: int, most: int = CHUNK_MAX) -> int:
    """Notebooks per chunk for ``n`` notebooks on ``jobs`` jobs: equal chunks of at most ``most``, at least
    ``jobs`` of them (every job has one), and of two or more where the class allows (a template pays off)."""
    per_job = -(-n // max(1, jobs))
    chunks = max(1, jobs) * -(-per_job // most)
    return max(1, min(-(-n // chunks), per_job), min(2, per_job))


def _queue(todo: list[Checked], jobs: int, run: Run) -> queue.Queue:
    opts = run.opts
    chunk = opts.chunk or chunk_size(len(todo), jobs, CLUSTER_CHUNK_MAX if opts.scheduler else CHUNK_MAX)
    tasks: queue.Queue = queue.Queue()
    for i in range(0, len(todo), chunk):
        tasks.put(todo[i : i + chunk])
    return tasks


def _drain(worker: Worker, tasks: queue.Queue, where: dict[str, Worker], failed: dict, errors: list) -> None:
    """One job: chunks from the queue until it is empty (one `nbgrader autograde`, then the chunk's feedback)."""
    try:
        while True:
            try:
                batch = tasks.get_nowait()
            except queue.Empty:
                break
            for student in batch:
                where[student.student_id] = worker
            failed.update(worker.autograde(batch))
            worker.feedback()
    except BaseException as exc:  # reported after the other workers finish
        errors.append(exc)


def _executed(student: Checked, worker: Worker | None, failed: dict[str, Problem]) -> Executed:
    """A student's record of the stage: the graded notebook, read once (the later stages only read it), the cells
    that hit a limit, and why nbgrader graded none."""
    path = worker.autograded(student) if worker is not None else None
    problems = (failed[student.student_id],) if student.student_id in failed else ()
    if path is None or not path.is_file():
        return Executed(student.student_id, problems=problems)
    graded = nbformat.read(path, as_version=4)
    return Executed(student.student_id, graded, tuple(notebooks.cell_outcomes(graded)), problems)


def _phases(workers: list[Worker]) -> dict[str, float]:
    phases: dict[str, float] = {}
    for worker in workers:
        for key, value in worker.phase_times().items():
            phases[key] = phases.get(key, 0) + value
    return phases


def execute(
    workers: list[Worker], todo: list[Checked], test_ids: list[str], run: Run, jobs: int, preflight_forked: int
) -> Execution:
    """Autograde ``todo`` on ``workers`` (or, with ``run.opts.scheduler``, on that cluster: ``workers`` is then
    empty), ``jobs`` chunks at a time; every worker is closed after. ``preflight_forked`` kernels were the
    preflight's: they are not counted."""
    pace = progress.Pace(jobs, run.opts.timeout, AFTER_TIMEOUT, len(test_ids))
    tracker = progress.Progress(len(todo), quiet=run.opts.quiet, pace=pace)
    for worker in workers:
        worker.progress, worker.test_ids = tracker, set(test_ids)
    tasks = _queue(todo, jobs, run)
    where: dict[str, Worker] = {}
    failed: dict[str, Problem] = {}
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_drain, args=(w, tasks, where, failed, errors)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if run.opts.scheduler:  # the same chunks, each graded by the same Worker code on a dask worker (cluster.py)
        workers = cluster.grade_on_cluster(run, tasks, where, failed)
    done = Execution(
        {s.student_id: _executed(s, where.get(s.student_id), failed) for s in todo},
        where,
        workers,
        sum(w.kernels_from_template() for w in workers) - preflight_forked,
        next((why for w in workers if (why := w.why_not_forked())), ""),
        _phases(workers),
    )
    for worker in workers:
        worker.close()
    if errors:
        raise errors[0]
    return done
