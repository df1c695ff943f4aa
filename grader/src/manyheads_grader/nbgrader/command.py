"""One nbgrader command, run in a course folder as a child process, with the virtual environment's tools on PATH."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


@contextlib.contextmanager
def alembic_on_path():
    """nbgrader's Gradebook creates a new database's tables by running ``alembic`` from PATH: in this process too
    (a PostgreSQL gradebook is opened here), with the venv's bin/ first even when the venv is not activated."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), before])
    try:
        yield
    finally:
        os.environ["PATH"] = before


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """nbgrader runs ``alembic`` from PATH when it creates a gradebook: the venv's bin/ goes first."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("JUPYTER_PATH", None)
    return {**env, **(extra or {})}


# ``python -m nbgrader``, without one import: jsonschema loads rfc3987_syntax (when installed) to check the "iri"
# string format, which builds 39 parsers at import, about 2 s of CPU in every nbgrader process (7 per class) though no
# notebook schema uses that format. Without the module jsonschema simply has no "iri" check.
WITHOUT_IRI_PARSERS = "import sys; sys.modules['rfc3987_syntax'] = None"
_NBGRADER = (
    WITHOUT_IRI_PARSERS
    + "; from manyheads_grader.nbgrader.inprocess import speed_up; speed_up()"
    + "; sys.argv[0] = 'nbgrader'; from nbgrader.apps.nbgraderapp import main; main()"
)


def skip_iri_parsers() -> None:
    """The same in this process, before nbformat (and so jsonschema) is first imported."""
    sys.modules.setdefault("rfc3987_syntax", None)


def nbgrader(
    course: Path, *args: str, db: str, env: dict | None = None, timeout: float | None = None, watch=None
) -> tuple[int, str]:
    """Run one nbgrader command in ``course``: (exit status, output). Never raises on nbgrader's own failures.
    ``watch`` is called about twice a second while it runs (progress.Watch)."""
    cmd = [sys.executable, "-c", _NBGRADER, *args, f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url={db}"]
    deadline = None if timeout is None else time.monotonic() + timeout
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(cmd, cwd=course, env=child_env(env), stdout=log, stderr=subprocess.STDOUT, text=True)
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
