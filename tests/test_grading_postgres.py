"""``manyheads grade --db postgresql://…`` against a real PostgreSQL server started on loopback for these tests.

The fixture initdb's a throw-away cluster in a temporary folder (as ``nobody`` when the tests run as root: PostgreSQL
refuses to run as root), starts it on a free port with its socket in that folder, and stops it afterwards. The
server comes from Debian's ``postgresql`` package (``make test`` installs it) and the driver is psycopg2.
Two ``manyheads grade`` commands share the one gradebook at the same time, as two machines grading one class would.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

import grading_corpus as corpus
from manyheads.grading import report, sandbox
from manyheads.grading.runner import normalise_db
from grading_corpus import run_grade

EX1 = corpus.EX1


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    pg = _pg_bin()
    if pg is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql; `make test` does it)")
    pytest.importorskip("psycopg2")
    folder = Path(tempfile.mkdtemp(prefix="mh-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        os.chown(folder, 65534, 65534)
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    env = {"PATH": os.environ["PATH"], "HOME": str(folder), "LANG": "C.UTF-8"}
    port = _free_port()

    def pg_run(*args: str) -> None:
        done = subprocess.run(as_user + list(args), capture_output=True, text=True, env=env, cwd=folder, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    pg_run(str(pg / "initdb"), "-D", str(folder / "data"), "-U", "grader", "--auth=trust", "-E", "UTF8")
    pg_run(str(pg / "pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "server.log"), "-w", "start", "-o",
           f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=50")
    try:
        pg_run(str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "grader", "course")
        yield f"postgresql://grader@127.0.0.1:{port}/course"
    finally:
        subprocess.run(as_user + [str(pg / "pg_ctl"), "-D", str(folder / "data"), "-m", "fast", "-w", "stop"],
                       capture_output=True, env=env, cwd=folder, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_two_graders_share_one_postgresql_gradebook(postgres_url, tmp_path):
    if sandbox.available():
        pytest.skip(sandbox.available())
    good, partial = corpus.answered(), corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE})
    halves = {"a": {"pg_correct": good, "pg_partial": partial},
              "b": {"pg_blank": corpus.release(), "pg_stripped": corpus.strip_nbgrader(good)}}
    expected = {"pg_correct": ("graded", 8.0), "pg_partial": ("graded", 4.0), "pg_blank": ("graded", 0.0),
                "pg_stripped": ("repaired", 8.0)}
    for half, notebooks in halves.items():
        for student, nb in notebooks.items():
            (tmp_path / half / student).mkdir(parents=True)
            (tmp_path / half / student / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
    # the first grader releases the assignment into the shared gradebook; the second joins while it grades
    first = subprocess.Popen(
        [os.sys.executable, "-m", "manyheads.grading", "grade", EX1, str(tmp_path / "a"), "--out",
         str(tmp_path / "out-a"), "--jobs", "2", "--db", postgres_url],
        cwd=corpus.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PATH": f"{Path(os.sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    second = run_grade(EX1, str(tmp_path / "b"), "--out", str(tmp_path / "out-b"), "--jobs", "1",
                       "--db", postgres_url)
    first_out, _ = first.communicate(timeout=1200)
    assert first.returncode == 0, first_out
    assert second.returncode == 0, second.stdout + second.stderr
    rows = {**report.read_csv(tmp_path / "out-a" / "grades.csv"), **report.read_csv(tmp_path / "out-b" / "grades.csv")}
    got = {s: (r["status"], float(r["score"] or "nan")) for s, r in rows.items()}
    assert got == expected, rows
    assert not (tmp_path / "out-a" / "course" / "gradebook.db").exists(), "no sqlite gradebook with --db"
    assert normalise_db(postgres_url) in (tmp_path / "out-a" / "course" / "nbgrader_config.py").read_text()

    from nbgrader.api import Gradebook

    with Gradebook(normalise_db(postgres_url), "manyheads") as gb:
        in_db = {s.student_id: s.score for s in gb.assignment_submissions(EX1)}
    assert in_db == {s: score for s, (_, score) in expected.items()}
