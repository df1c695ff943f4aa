"""The preflight of ``manyheads grade`` (preflight.py, issue 26 item 1): before the first student, the release's
reference answers and a blank release are graded in the sandbox the class will use; when they do not score as
expected, grading stops with the kernel's own words, what they mean and what to do, and nobody is graded."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import grading_corpus as corpus

from manyheads_grader.execution import preflight, sandbox

TORCH_MISSING = "ModuleNotFoundError: No module named 'torch'"


def test_the_reference_answers_are_the_release_with_the_solutions_typed_in():
    import nbformat

    ref = preflight.reference_answers(corpus.release(), nbformat.read(corpus.SOURCE, as_version=4))
    assert ref == corpus.answered()  # what the corpus's correct student hands in


def test_the_cause_is_read_from_the_kernel_s_own_stderr():
    log = "Traceback (most recent call last):\n  File ...\nModuleNotFoundError: No module named 'torch'\n"
    cause, meaning, todo = preflight.cause_of(["[manyheads template] ready", log])
    assert cause == TORCH_MISSING and "lacks a Python module" in meaning and "make env" in todo
    cause, meaning, _ = preflight.cause_of(["bwrap: Can't find source path /tmp/x/.venv: No such file or directory"])
    assert "No such file or directory" in cause and "path the sandbox needs" in meaning


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="hides a module in a private mount namespace (root)")
def test_an_environment_without_torch_stops_before_any_student_and_names_the_module(tmp_path):
    """torch is removed from the environment's site-packages for this command only (an overlay in a private mount
    namespace, nothing reinstalled); the grader itself does not import it, the kernels do."""
    if sandbox.available():
        pytest.fail(sandbox.available())
    subs, out = tmp_path / "subs", tmp_path / "out"
    for student in ("ada", "bob"):
        (subs / student).mkdir(parents=True)
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(corpus.answered()))
    site = sysconfig.get_paths()["purelib"]
    assert (Path(site) / "torch").is_dir()
    layer = tmp_path / "layer"
    script = (
        f'mount -t tmpfs tmpfs "{layer}" && mkdir "{layer}/u" "{layer}/w" && '
        f'mount -t overlay overlay -o "lowerdir={site},upperdir={layer}/u,workdir={layer}/w" "{site}" && '
        f'rm -rf "{site}/torch" && exec "$@"'
    )
    layer.mkdir()
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]
    command += [sys.executable, "-m", "manyheads_grader", "grade", corpus.EX1, str(subs), "--out", str(out)]
    command += ["--jobs", "2"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=corpus.ROOT, timeout=600)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "preflight failed, so no student was graded" in done.stderr
    assert f"cause: {TORCH_MISSING}" in done.stderr, done.stderr
    assert "lacks a Python module" in done.stderr and "make env" in done.stderr
    assert not (out / "grades.csv").exists() and not (out / "course").exists() and not (out / "feedback").exists()
    assert not (out / ".work").exists()


@pytest.mark.slow
def test_check_runs_only_the_preflight_and_says_grading_works(tmp_path):
    if sandbox.available():
        pytest.fail(sandbox.available())
    done = corpus.run_grade(corpus.EX1, "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preflight passed" in done.stdout and "the reference answers scored 8/8" in done.stdout
    assert "blank release 0/8" in done.stdout
