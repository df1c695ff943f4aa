"""The template process a grading worker forks its kernels from (manyheads_grader.execution.kernel_fork): one
student's kernel leaves nothing to the next and cannot touch the template; without a template, kernels still start."""

from __future__ import annotations

import os
import re

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers.grading_corpus import EX1, run_grade

from manyheads_grader.execution import sandbox
from manyheads_grader.output import report

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the template serves sandboxed kernels only when grading as root"),
]

# Each student looks first (what an earlier student's kernel left), then leaves things behind and tries to stop the
# template and bubblewrap's init. Printed words are assembled from pieces so the source cannot match the checks.
SNOOP = """
import os, signal, subprocess
print("home:", sorted(os.listdir("/home/student")))
print("history:", get_ipython().history_manager.hist_file)
mine = {1, os.getpid(), os.getppid()}
left = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
print("lingering:", [open(f"/proc/{p}/cmdline", "rb").read().split(b"\\0")[0].decode() for p in left])
open("/home/student/left-behind.txt", "w").write("my answers")
subprocess.Popen(["sleep", "600"], start_new_session=True)
for pid in (1, os.getppid()):
    try:
        os.kill(pid, signal.SIGKILL)
        print("KILL" + "ED", pid)
    except OSError as exc:
        print("blocked", "kill", type(exc).__name__)
try:
    open(f"/proc/{os.getppid()}/environ", "rb").read()
    print("READ" + " the template")
except OSError as exc:
    print("blocked", "read", type(exc).__name__)
"""


@pytest.fixture(scope="module")
def graded_one_after_another(tmp_path_factory):
    if sandbox.available():
        pytest.fail(sandbox.available())
    base = tmp_path_factory.mktemp("template")
    subs, out = base / "submissions", base / "out"
    students = ["first", "second", "third"]
    for student in students:
        (subs / student).mkdir(parents=True)
        nb = corpus.with_extra(corpus.answered(), SNOOP)
        (subs / student / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
    done = run_grade(EX1, str(subs), "--out", str(out), "--jobs", "1", "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = {}
    for student in students:
        nb = nbformat.read(out / "course" / "autograded" / student / EX1 / f"{EX1}.ipynb", as_version=4)
        outputs[student] = "".join(
            o.get("text", "") for c in nb.cells if "lingering" in c.source for o in c.get("outputs", [])
        )
    return {"out": out, "outputs": outputs, "rows": report.read_csv(out / "grades.csv")}


def test_every_kernel_was_forked_from_the_template_and_graded_as_usual(graded_one_after_another):
    report_md = (graded_one_after_another["out"] / "report.md").read_text()
    assert re.search(r"\b3 kernel\(s\) forked from a template process", report_md), report_md
    for student, text in graded_one_after_another["outputs"].items():  # nbclient's settings reach the kernel
        assert "history: :memory:" in text, (student, text)
    for student, row in graded_one_after_another["rows"].items():
        assert float(row["score"]) == corpus.FULL, (student, row)


def test_a_kernel_sees_nothing_an_earlier_students_kernel_left(graded_one_after_another):
    for student, text in graded_one_after_another["outputs"].items():
        assert "home:" in text, (student, text)
        assert "left-behind.txt" not in text, (student, text)
        assert "lingering: []" in text, (student, text)


def test_a_kernel_cannot_kill_or_read_the_template(graded_one_after_another):
    for student, text in graded_one_after_another["outputs"].items():
        assert text.count("blocked kill PermissionError") == 2 and "KILLED" not in text, (student, text)
        assert "blocked read PermissionError" in text and "READ the template" not in text, (student, text)


def test_without_a_template_the_client_starts_the_kernel_in_a_sandbox_of_its_own(tmp_path):
    """The kernel spec's client falls back to the plain sandboxed launcher when no template listens."""
    from jupyter_client import KernelManager

    tmp_path.chmod(0o755)
    rt, scratch = sandbox.runtime_folder(tmp_path / "sandbox")
    share = sandbox.prepare(tmp_path / "sandbox", uid=sandbox.worker_uid(7))
    before = dict(os.environ)
    os.environ.update(sandbox.environment(share, rt, scratch))
    try:
        km = KernelManager(kernel_name=sandbox.KERNEL_NAME, transport="ipc", ip=str(rt / "kernel"))
        km.connection_file = str(rt / "kernel-fallback.json")
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        seen = []
        kc.execute_interactive("import os; print(os.getuid())", output_hook=seen.append, timeout=60)
        km.shutdown_kernel(now=True)
    finally:
        os.environ.clear()
        os.environ.update(before)
    printed = "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
    assert printed.strip() == str(sandbox.worker_uid(7))
    assert list(scratch.glob("kernel-*")), "the plain launcher made its scratch folder (so it, not a template, ran)"


def test_the_report_says_where_the_jobs_time_went(graded_one_after_another):
    """report.md's phase line (Worker.phase_times, from the template's timing lines): the kernels' set-up fits in
    their lives, which fit in nbgrader's time; the preflight's two kernels are counted too."""
    report_md = (graded_one_after_another["out"] / "report.md").read_text()
    found = re.search(
        r"nbgrader autograde ([\d.]+) s, of which (\d+) forked kernel\(s\) lived ([\d.]+) s \(their set-up "
        r"before ipykernel ([\d.]+) s\) and the template cleaned up after them for ([\d.]+) s",
        report_md,
    )
    assert found, report_md
    nbgrader_s, kernels, life, setup, cleanup = map(float, found.groups())
    assert kernels >= 3
    assert 0 < setup < life < nbgrader_s and cleanup >= 0
