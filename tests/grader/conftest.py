"""Fixtures shared by the grading tests: a throw-away PostgreSQL server (``postgres_url``)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest


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
        pytest.fail("PostgreSQL is not installed (Debian: apt-get install postgresql; `make test` does it)")
    try:
        import psycopg2  # noqa: F401  (the driver nbgrader's SQLAlchemy uses for postgresql:// URLs)
    except ImportError:
        pytest.fail("psycopg2 is missing: pip install -r requirements.txt")
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
    pg_run(
        str(pg / "pg_ctl"),
        "-D",
        str(folder / "data"),
        "-l",
        str(folder / "server.log"),
        "-w",
        "start",
        "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=50",
    )
    try:
        pg_run(str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "grader", "course")
        yield f"postgresql://grader@127.0.0.1:{port}/course"
    finally:
        subprocess.run(
            as_user + [str(pg / "pg_ctl"), "-D", str(folder / "data"), "-m", "fast", "-w", "stop"],
            capture_output=True,
            env=env,
            cwd=folder,
            timeout=120,
        )
        shutil.rmtree(folder, ignore_errors=True)
