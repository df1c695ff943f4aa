"""``manyheads grade --scheduler``: a class graded on a local dask.distributed cluster of two worker processes
(sandboxed, slow): the same grades as a local run, and a worker killed mid-batch loses no submission.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import distributed  # requirements.txt pins it (the extra manyheads[cluster]): missing, these tests fail
import pytest
from helpers import grading_corpus as corpus

from manyheads_grader import cli, runner
from manyheads_grader.execution import cluster, sandbox
from manyheads_grader.output import gradebook
from manyheads_grader.records import texts

EX1 = corpus.EX1


def test_misuse_is_refused_with_what_to_do(monkeypatch, capsys):
    assert cli.main(["grade", EX1, "subs", "--out", "out", "--scheduler", "localhost:8786"]) == 2
    assert "--scheduler must be a tcp://HOST:PORT" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    with pytest.raises(runner.GradingError, match=r"pip install 'manyheads-grader\[cluster\]'"):
        cluster._client("tcp://127.0.0.1:8786")


@pytest.fixture(scope="module")
def local_cluster():
    if sandbox.available():  # a reason string when bubblewrap is missing; `make test` installs it
        pytest.fail(sandbox.available())
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
        ) as local,
        distributed.Client(local) as client,
    ):
        yield local, client


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Four ordinary submissions of exercise 01 and their grades from a local run (two jobs, the sandbox)."""
    subs = tmp_path_factory.mktemp("subs")
    cases = corpus.build_plain(subs, 4)
    rows, _ = runner.grade(EX1, subs, tmp_path_factory.mktemp("local"), runner.Options(jobs=2))
    return subs, cases, _grades(rows)


def _grades(rows) -> dict[str, tuple]:
    return {r.student_id: (r.status, r.score, r.tests, r.feedback is not None) for r in rows}


def _expected(cases) -> dict[str, tuple[str, float]]:
    return {c.student: (c.status, c.score) for c in cases}


def _kill_a_busy_worker(client, killed: list[int], stop: threading.Event, after_first: bool = True) -> None:
    """Once a chunk is running (and, with ``after_first``, one is done), SIGKILL the worker process running it."""
    while not stop.is_set():
        done = sum(ts.state == "memory" for ts in list(client.cluster.scheduler.tasks.values()))
        busy = {addr: keys for addr, keys in client.processing().items() if keys}
        if (done or not after_first) and busy:
            time.sleep(2)  # well into nbgrader: the kernel is running the student's code
            pids = client.run(os.getpid)
            addr = next(iter(busy))
            if addr in pids:
                os.kill(pids[addr], 9)
                killed.append(pids[addr])
                return
        time.sleep(0.2)


@pytest.mark.slow
def test_the_cluster_gives_the_grades_of_a_local_run_though_a_worker_is_killed_mid_batch(
    local_cluster, batch, tmp_path
):
    local, client = local_cluster
    subs, cases, by_local = batch
    assert {s: g[:2] for s, g in by_local.items()} == _expected(cases)  # the local run itself is right
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_a_busy_worker, args=(client, killed, stop))
    killer.start()
    try:  # one task per submission: four tasks on two workers, so one is running when the first comes back
        opts = runner.Options(jobs=2, chunk=1, scheduler=local.scheduler_address)
        rows, _ = runner.grade(EX1, subs, tmp_path / "out", opts)
    finally:
        stop.set()
        killer.join()
    assert killed, "the test never found a worker busy grading: nothing was killed"
    # dask re-ran the dead worker's task elsewhere: every submission graded, with the local run's grades
    assert _grades(rows) == by_local, {r.student_id: r.problems for r in rows}
    assert all(r.feedback.is_file() for r in rows)
    # OUT/course is the same nbgrader course as locally: the tasks' sqlite gradebooks are merged into it
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'out' / 'course' / 'gradebook.db'}", "manyheads") as gb:
        in_db = {s.student_id: s.score for s in gb.assignment_submissions(EX1)}
    assert in_db == {s: g[1] for s, g in by_local.items()}


@pytest.mark.slow
def test_the_cluster_merges_into_the_shared_postgresql_gradebook(local_cluster, batch, postgres_url, tmp_path):
    """A MOOC's set-up: the chunks graded on the cluster's workers, which all write one PostgreSQL gradebook."""
    from nbgrader.api import Gradebook

    local, _ = local_cluster
    subs, _, by_local = batch
    opts = runner.Options(jobs=2, chunk=2, scheduler=local.scheduler_address, db=postgres_url)
    rows, facts = runner.grade(EX1, subs, tmp_path / "out", opts)
    assert facts.db == "postgresql"
    assert _grades(rows) == by_local, {r.student_id: r.problems for r in rows}
    with Gradebook(gradebook.normalise_db(postgres_url), "manyheads") as gb:
        in_db = {s.student_id: s.score for s in gb.assignment_submissions(EX1)}
    assert in_db == {s: g[1] for s, g in by_local.items()}


@pytest.mark.slow
def test_a_chunk_lost_beyond_the_allowed_failures_is_reported_not_dropped(batch, tmp_path):
    _, _, by_local = batch
    corpus.build_plain(tmp_path / "subs", 2)  # the batch's first two submissions, the same notebooks
    subs = tmp_path / "subs"
    import dask

    # no second chance: the first worker that dies under a task makes it fail (KilledWorker)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
            ) as local,
            distributed.Client(local) as client,
        ):
            killed: list[int] = []
            stop = threading.Event()
            killer = threading.Thread(target=_kill_a_busy_worker, args=(client, killed, stop, False))
            killer.start()
            try:
                opts = runner.Options(jobs=2, chunk=1, scheduler=local.scheduler_address)
                rows, _ = runner.grade(EX1, subs, tmp_path / "out", opts)
            finally:
                stop.set()
                killer.join()
    assert killed
    lost = [r for r in rows if r.status == "failed"]
    assert lost and len(rows) == 2, {r.student_id: r.problems for r in rows}  # both, if both ran on the killed one
    for row in lost:
        assert any("the dask cluster lost it" in p and "KilledWorker" in p for p in texts(row.problems)), row.problems
    for row in rows:
        if row.status != "failed":
            assert _grades([row])[row.student_id] == by_local[row.student_id]
