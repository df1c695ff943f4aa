"""Grading works wherever the instructor's clone and environment sit (issue 26, item 2): under ``/tmp`` (a ``mktemp``
checkout, CI runners), in a home folder closed to other users (mode 0700), under ``/opt`` and in a path with spaces.

For each location, this clone (with its virtual environment) is bound there in a private mount namespace
(``unshare -m`` as root, nothing reinstalled; helpers/relocated.py): the grader runs that location's interpreter,
the editable installs point at that location's ``src/`` and ``grader/src`` (their ``.pth`` files are bound over
too), and the course, the output and nbgrader's runtime folder (``TMPDIR``) lie there as well. A class of four graded
with two jobs (chunks of two, so every kernel is forked from a worker's template process) must get the expected
scores, with every kernel forked. On the code before the fix, the ``/tmp`` class failed whole: the forked kernel's
fresh ``/tmp`` hid the environment. The grader run as an ordinary user from a clone in a 0700 folder: the tests that
use helpers/unprivileged.py (test_kernel_fork_unprivileged.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import grading_corpus as corpus
from helpers.relocated import Relocated

from manyheads_grader.execution import sandbox
from manyheads_grader.output import report

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="binds the clone in a private mount namespace (root)")

# name -> (parent folder, folder name prefix, mode of the location folder)
LOCATIONS = {
    "tmp": (Path(tempfile.gettempdir()), "mh-loc-", 0o755),
    "home_0700": (Path.home(), "mh-loc-", 0o700),
    "opt": (Path("/opt"), "mh-loc-", 0o755),
    "spaces": (Path("/srv"), "mh course ", 0o755),
}
CLASS = {
    "correct_a": (corpus.answered, corpus.FULL),
    "partial": (lambda: corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE}), 4.0),
    "blank": (corpus.release, 0.0),
    "correct_b": (corpus.answered, corpus.FULL),
}


def grade_at(location: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``manyheads grade ARGS`` from the clone as it is bound at ``location/clone``, in a mount namespace."""
    where = Relocated(location)
    prefix, moved = where.prefix()
    (location / "tmp").mkdir()
    env = {**os.environ, **moved, "TMPDIR": str(location / "tmp")}
    env["PATH"] = f"{where.python.parent}{os.pathsep}{os.environ['PATH']}"
    env.pop("VIRTUAL_ENV", None)
    command = [*prefix, str(where.python), "-m", "manyheads_grader", "grade", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def location(request):
    parent, prefix, mode = LOCATIONS[request.param]
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    folder.chmod(mode)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@AS_ROOT
@pytest.mark.parametrize("location", list(LOCATIONS), indirect=True)
def test_a_class_is_graded_with_forked_kernels_wherever_the_clone_sits(location):
    if sandbox.available():
        pytest.fail(sandbox.available())
    subs, out = location / "subs", location / "out"
    for student, (make, _) in CLASS.items():
        (subs / student).mkdir(parents=True)
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(make()))
    done = grade_at(location, corpus.EX1, str(subs), "--out", str(out), "--jobs", "2", "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rows = report.read_csv(out / "grades.csv")
    got = {s: (r["status"], r["score"]) for s, r in rows.items()}
    assert got == {s: ("graded", f"{score:g}") for s, (_, score) in CLASS.items()}, {
        s: r["problems"] for s, r in rows.items()
    }
    report_md = (out / "report.md").read_text()
    forked = int(re.search(r"(\d+) kernel\(s\) forked from a template process", report_md).group(1))
    assert forked >= len(CLASS), report_md


def test_the_forked_kernel_puts_back_what_the_sandbox_bound_under_tmp():
    """kernel_template.mounts_under: the outermost mounts inside /tmp, read-only or not, spaces unescaped."""
    from manyheads_grader.execution.kernel_fork import mounts_under

    info = "\n".join(
        [
            "20 1 0:30 / / rw,nosuid - tmpfs tmpfs rw",
            "21 20 0:31 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw",
            "22 21 8:1 /work/main/.venv /tmp/mh\\040loc/clone/.venv ro,nosuid,nodev - ext4 /dev/sda1 rw",
            "23 22 8:1 /work/main/.venv/lib /tmp/mh\\040loc/clone/.venv/lib ro,nosuid,nodev - ext4 /dev/sda1 rw",
            "24 21 0:32 / /tmp/mh-rt-abc rw,nosuid,nodev - tmpfs tmpfs rw",
            "25 20 8:1 /usr /usr ro,nosuid,nodev - ext4 /dev/sda1 rw",
            "26 21 0:33 / /tmpfoo rw - tmpfs tmpfs rw",
        ]
    )
    assert mounts_under("/tmp", info) == [("/tmp/mh loc/clone/.venv", True), ("/tmp/mh-rt-abc", False)]
