"""Grade the chunks of a class on a ``dask.distributed`` cluster (``manyheads grade --scheduler tcp://HOST:PORT``).

Taught in ``instructors/grading.md`` ("Grading on a cluster"). ``runner.grade`` cuts the class into chunks as it
does locally; here each chunk is one dask task that runs the SAME worker-side code (``worker.Worker``: its own copy
of the released course, one ``nbgrader autograde`` in the bubblewrap sandbox, then ``generate_feedback``) in a
temporary folder on whichever machine dask picks. The released course travels with the task (a few hundred KB of
tar bytes), so the workers need no shared disk: only the same Python environment (``pip install
"manyheads-grader[cluster]"``, nbgrader, bubblewrap). A task returns the autograded notebooks, feedback HTML, the
submitted files, its sqlite gradebook (with ``--db postgresql://`` the worker writes the shared gradebook directly)
and the log; the lead unpacks each result as it completes into ``.work/cluster-K`` and ``runner.grade`` carries on
as if a local worker had left it there.

A dead worker is dask's business: the task is re-run elsewhere (``retries`` here, the scheduler's
``distributed.scheduler.allowed-failures`` for workers that die). A chunk that still fails is reported on each of
its students' rows, never dropped.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

import nbformat

from manyheads_grader.execution.worker import Worker
from manyheads_grader.records import CLUSTER_LOST, Checked, GradingError, Options, Run, not_graded

EXTRA = "cluster"  # pip install "manyheads-grader[cluster]"
RETRIES = 2  # re-runs of a task that raised (a worker that died counts against allowed-failures instead)


def _client(address: str):
    try:
        from distributed import Client
    except ImportError as exc:
        raise GradingError(
            f"--scheduler needs dask.distributed, which is not installed: pip install 'manyheads-grader[{EXTRA}]'"
        ) from exc
    try:
        return Client(address, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise GradingError(
            f"--scheduler {address}: no dask scheduler answers there ({exc}); start one with `dask scheduler`"
        ) from exc


def _pack(folder: Path, names: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in names:
            if (folder / name).exists():
                tar.add(folder / name, arcname=name)
    return buf.getvalue()


def _unpack(data: bytes, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(folder, filter="data")


def grade_chunk(course: bytes, assignment: str, db: str, opts: Options, index: int, notebooks: dict) -> dict:
    """Runs on a dask worker: grade ``notebooks`` (student -> notebook JSON) as a local ``_Worker`` would."""
    with tempfile.TemporaryDirectory(prefix="mh-dask-") as tmp:
        _unpack(course, Path(tmp) / "course")
        worker = Worker(index, Path(tmp) / "course", Path(tmp), assignment, db, opts)
        try:
            students = [Checked(s, notebook=nbformat.reads(text, as_version=4)) for s, text in notebooks.items()]
            failed = worker.autograde(students)
            worker.feedback()
        finally:
            worker.close()
        names = ["autograded", "feedback", "gradebook.db", *(p.name for p in worker.root.glob("submitted-*"))]
        names.append("template.log")  # the report's count of kernels forked from a template
        return {
            "files": _pack(worker.root, names),
            "failed": failed,  # student -> why nbgrader graded none
            "log": worker.log,
            "template_failure": worker.template_failure,  # the report's one line on why no kernel was forked
        }


class _Returned(Worker):
    """A chunk graded on the cluster, unpacked where ``runner.grade`` looks for a local worker's results."""

    def __init__(self, root: Path, assignment: str, db: str, log: list[str], template_failure: str = ""):
        self.root, self.assignment, self.log, self.rt, self.template = root, assignment, log, None, None
        self.session = None  # its nbgrader ran on the cluster's worker
        self.db = db if db.startswith("postgresql") else f"sqlite:///{root / 'gradebook.db'}"
        self.template_failure = template_failure  # as the cluster's worker saw it (Worker.why_not_forked reads it)


def _submit(client, course: bytes, run: Run, chunks: list[list]) -> dict:
    """Each chunk as one task on the cluster: {future: (index, chunk)}."""
    return {
        client.submit(
            grade_chunk,
            course,
            run.assignment,
            run.db,
            run.opts,
            i,  # the sandbox user (when grading as root): distinct for chunks that share a machine
            {r.student_id: nbformat.writes(r.notebook) for r in chunk},
            retries=RETRIES,
            pure=False,
        ): (i, chunk)
        for i, chunk in enumerate(chunks)
    }


def grade_on_cluster(run: Run, tasks, where: dict, failed: dict) -> list[Worker]:
    """Grade every chunk in ``tasks`` (a queue of lists of checked students) on the cluster; fill ``where`` and
    ``failed`` (student -> why nbgrader graded none) like the local loop."""
    from distributed import as_completed

    client = _client(run.opts.scheduler)
    course = _pack(run.master, [p.name for p in run.master.iterdir()])
    chunks: list[list] = []
    while not tasks.empty():
        chunks.append(tasks.get_nowait())
    returned = []
    try:
        futures = _submit(client, course, run, chunks)
        for future in as_completed(futures):
            i, chunk = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # KilledWorker after allowed-failures, or the task raised RETRIES + 1 times
                why = f"{type(exc).__name__}: {str(exc)[:200]}"
                for student in chunk:
                    failed[student.student_id] = not_graded(f"{CLUSTER_LOST} ({why}); grade it again")
                continue
            root = run.work / f"cluster-{i}"
            worker = _Returned(root, run.assignment, run.db, result["log"], result["template_failure"])
            _unpack(result["files"], worker.root)
            failed.update(result["failed"])
            for student in chunk:
                where[student.student_id] = worker
            returned.append(worker)
    finally:
        client.close()
    return returned
