"""Forked kernels for a grader who is not root (issue 26, item 5): the guarantees test_kernel_fork.py checks as root,
checked for an ordinary user, whose template and kernels share one uid (``execution.kernel_fork``,
``--userns``).

One class of two, graded by an ordinary user with one job: one template forks the preflight's two kernels, then the
students'. Each student first looks at what an earlier kernel left (home, /tmp, the runtime folder, processes), reads
its own limits and capabilities, then leaves things behind (files, a background ``sleep`` in a session of its own),
tries to run more threads than the process limit and to allocate more than the memory limit, and tries to stop, read
or replace the template: signals to every process it can see, reads of their memory and environment, removing the
template's socket. As root the tests run the grader as an unused high uid (no account needed); otherwise as whoever
runs them. As root, the clone is seen from a folder only root can read (unprivileged.run_as_user), so these tests
pass wherever the clone sits. The same properties as root: test_kernel_fork.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers import unprivileged
from helpers.grading_corpus import EX1

from manyheads_grader.execution import sandbox
from manyheads_grader.output import report
from manyheads_grader.records import RunFacts

pytestmark = pytest.mark.slow

# Printed words are assembled from pieces so that the source (which nbgrader echoes on errors) cannot match the checks.
SNOOP = r"""
import glob, os, resource, signal, subprocess, threading
print("home:", sorted(os.listdir("/home/student")))
print("tmp:", sorted(p for p in os.listdir("/tmp") if p.endswith(".txt")))
points = {line.split()[4] for line in open("/proc/self/mountinfo")}
runtime = sorted(p for p in points if "/mh-rt-" in p and os.path.isdir(p))
print("runtime:", sorted(p for rt in runtime for p in os.listdir(rt) if p.endswith(".txt")))
mine = {os.getpid()}
seen = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine)
print("seen:", seen)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("caps:", status["CapEff"].strip(), status["CapBnd"].strip(), "nnp", status["NoNewPrivs"].strip())
print("limits:", {n: resource.getrlimit(getattr(resource, n))[0] for n in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU")})
for place in ["/home/student", "/tmp", *runtime]:
    open(os.path.join(place, "left-behind.txt"), "w").write("my answers")
subprocess.Popen(["sleep", "600"], start_new_session=True)
hold, started = threading.Event(), 0
try:
    for _ in range(400):
        threading.Thread(target=hold.wait, daemon=True).start()
        started += 1
except RuntimeError:
    print("threads", "stopped", "at", started)
hold.set()
try:
    memory = bytearray(6_000_000_000)
    print("ALLOC" + "ATED")
except MemoryError:
    print("blocked", "memory")
for pid in seen:
    for what in ("environ", "mem"):
        try:
            open(f"/proc/{pid}/{what}", "rb").read(16)
            print("READ" + " " + what, pid)
        except OSError as exc:
            print("blocked", "read", what, type(exc).__name__)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:
        print("blocked", "kill", type(exc).__name__)
print("init alive after kill:", os.path.exists("/proc/1/stat"))
for rt in runtime:
    try:
        os.unlink(os.path.join(rt, "template.sock"))
        print("REMOVED" + " the socket")
    except OSError as exc:
        print("blocked", "unlink", type(exc).__name__)
    try:
        os.chmod(os.path.join(rt, "template.sock"), 0)
        print("CHMOD" + " the socket")
    except OSError as exc:
        print("blocked", "chmod", type(exc).__name__)
"""
STUDENTS = ["first", "second"]


@pytest.fixture(scope="module")
def graded_by_an_ordinary_user():
    if sandbox.available():
        pytest.fail(sandbox.available())
    base = Path(tempfile.mkdtemp(prefix="mh-userns-"))  # not under pytest's tmp_path: root-only there
    base.chmod(0o755)
    uid = sandbox.worker_uid(902)
    try:
        subs, out = base / "submissions", base / "out"
        for student in STUDENTS:
            (subs / student).mkdir(parents=True)
            nb = corpus.with_extra(corpus.answered(), SNOOP)
            (subs / student / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
        if os.geteuid() == 0:
            for path in [base, *base.rglob("*")]:
                os.chown(path, uid, uid)
        command = [sys.executable, "-m", "manyheads_grader", "grade", EX1, str(subs), "--out", str(out)]
        command += ["--jobs", "1", "--timeout", "30", "--quiet"]
        # the grader finds the course in its working folder, the clone: as root, seen from a 0700 folder
        done = unprivileged.run_as_user(
            command, uid, env=unprivileged.user_env(base), cwd=corpus.ROOT, timeout=600, course=True
        )
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        outputs = {}
        for student in STUDENTS:
            nb = nbformat.read(out / "course" / "autograded" / student / EX1 / f"{EX1}.ipynb", as_version=4)
            outputs[student] = "".join(
                o.get("text", "") for c in nb.cells if "left-behind" in c.source for o in c.get("outputs", [])
            )
        yield {
            "report": (out / "report.md").read_text(),
            "outputs": outputs,
            "rows": report.read_csv(out / "grades.csv"),
            "still_running": subprocess.run(
                ["pgrep", "-u", str(uid if os.geteuid() == 0 else os.getuid()), "sleep"], capture_output=True, text=True
            ).stdout.split(),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_every_kernel_was_forked_and_graded_as_usual(graded_by_an_ordinary_user):
    text = graded_by_an_ordinary_user["report"]
    assert re.search(r"\b2 kernel\(s\) forked from a template process", text), text
    for student, row in graded_by_an_ordinary_user["rows"].items():
        assert float(row["score"]) == corpus.FULL, (student, row)


def test_fresh_home_tmp_and_runtime_folder_and_no_process_left_between_students(graded_by_an_ordinary_user):
    for student, text in graded_by_an_ordinary_user["outputs"].items():
        assert "home: ['.connection.json'" in text, (student, text)
        assert "left-behind.txt" not in text.split("seen:")[0], (student, text)  # neither home, /tmp nor runtime
        assert "tmp: []" in text and "runtime: []" in text, (student, text)
        assert "seen: [1]" in text, (student, text)  # only its namespace's init: no earlier sleep, no template
    assert graded_by_an_ordinary_user["still_running"] == [], "no student process outlives grading"


def test_the_sandbox_s_limits_and_no_capabilities(graded_by_an_ordinary_user):
    limits = sandbox.Limits()
    for student, text in graded_by_an_ordinary_user["outputs"].items():
        assert "caps: 0000000000000000 0000000000000000 nnp 1" in text, (student, text)
        assert f"'RLIMIT_AS': {limits.memory_bytes}" in text and f"'RLIMIT_NPROC': {limits.processes}" in text, text
        assert f"'RLIMIT_CPU': {limits.cpu_seconds}" in text, (student, text)
        assert "blocked memory" in text and "ALLOCATED" not in text, (student, text)
        stopped = re.search(r"threads stopped at (\d+)", text)
        assert stopped and int(stopped.group(1)) < limits.processes, (student, text)


def test_the_template_cannot_be_killed_read_or_replaced(graded_by_an_ordinary_user):
    for student, text in graded_by_an_ordinary_user["outputs"].items():
        assert "READ " not in text, (student, text)  # the init's environment and memory: not even that
        assert "blocked read environ PermissionError" in text and "blocked read mem PermissionError" in text, text
        assert "init alive after kill: True" in text, (student, text)
        assert "blocked unlink" in text and "REMOVED" not in text, (student, text)
        assert "blocked chmod" in text and "CHMOD" not in text, (student, text)
    # and the template served the next student each time: both were forked (first test)


def test_when_no_kernel_could_be_forked_the_report_says_why_in_one_line(tmp_path):
    """Fast: a template that dies at start-up (here: user namespaces refused) gives the worker a one-line reason, and
    report.md prints it beside the count."""
    from manyheads_grader.execution.worker import Worker
    from manyheads_grader.records import Row

    worker = Worker.__new__(Worker)
    worker.template_failure = ""
    assert worker.why_not_forked() == ""
    worker.template_failure = "bwrap: setting up uid map: Permission denied"
    why = worker.why_not_forked()
    assert "\n" not in why and "setting up uid map" in why
    facts = RunFacts(EX1, {"t": 1.0}, jobs=2, sandbox=True, db="sqlite", seconds=1.0, forked_kernels=0, not_forked=why)
    row = Row("ada", status="graded", tests={"t": 1.0})
    row.score, row.max_score = 1.0, 1.0
    report.write_report(tmp_path / "report.md", [row], facts)
    line = next(x for x in (tmp_path / "report.md").read_text().splitlines() if "kernel(s) forked" in x)
    assert f"0 kernel(s) forked from a template process ({why})" in line
