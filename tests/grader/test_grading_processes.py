"""No process a student starts outlives grading (issue 26 item 6): background processes, double forks and setsid,
in the sandbox (kernels forked from the template, or started alone) and without it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers import grading_corpus as corpus

from manyheads_grader.execution import sandbox
from manyheads_grader.output import report

# Each student starts three sleepers that try to outlive the kernel: a plain background child, one in a session of
# its own, and one double-forked into a new session (its parent exits at once, so it is nobody's child).
ESCAPE = """
import os, subprocess
subprocess.Popen(["sleep", "{base}1"])
subprocess.Popen(["sleep", "{base}2"], start_new_session=True)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "{base}3"])
    os._exit(0)
print("started")
"""


def sleepers(base: int) -> dict[int, str]:
    """{pid: command line} of the processes still running whose first argument is ``sleep {base}N``."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.isdigit() and len(argv) > 1 and argv[0].endswith(b"sleep") and argv[1].startswith(str(base).encode()):
            found[int(entry)] = b" ".join(argv).decode().strip()
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no_sandbox"])
def test_no_student_process_outlives_grading(tmp_path, sandboxed):
    if sandboxed and sandbox.available():
        pytest.fail(sandbox.available())
    base = 7000 + os.getpid() % 1000 * 3 + (0 if sandboxed else 1)  # unique to this run
    subs, out = tmp_path / "subs", tmp_path / "out"
    students = ["ann", "ben", "cy"]
    for student in students:
        (subs / student).mkdir(parents=True)
        nb = corpus.with_extra(corpus.answered(), ESCAPE.format(base=base))
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(nb))
    args = ["--jobs", "2"] + ([] if sandboxed else ["--no-sandbox"])
    done = corpus.run_grade(corpus.EX1, str(subs), "--out", str(out), *args)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        rows = report.read_csv(out / "grades.csv")
        assert {s: r["score"] for s, r in rows.items()} == {s: "8" for s in students}
        time.sleep(0.5)
        assert sleepers(base) == {}
    finally:
        for pid in sleepers(base):  # never leave them to the rest of the test run
            os.kill(pid, signal.SIGKILL)
