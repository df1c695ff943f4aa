"""A worker's nbgrader commands in one process (nbgrader_session), jupyter_client without its fixed waits
(kernel_client), and the gradebook's schema revision read without ``alembic heads`` (nbgrader_command).

The speed they buy is measured in benchmarks/grading.py; here: that each does what stock nbgrader and jupyter_client
do, and fails as they would."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from helpers import grading_corpus as corpus
from traitlets import Type

from manyheads.course.layout import REPO
from manyheads_grader.execution import kernel_client
from manyheads_grader.nbgrader import inprocess as nbgrader_inprocess
from manyheads_grader.nbgrader.command import child_env, nbgrader
from manyheads_grader.nbgrader.session import Session

EX1 = corpus.EX1


def _course(tmp: Path) -> Path:
    course = tmp / "course"
    course.mkdir(parents=True)
    shutil.copy2(REPO.root / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(REPO.root / "solutions" / EX1, course / "solutions" / EX1)
    return course


def _db(course: Path) -> str:
    return f"sqlite:///{course / 'gradebook.db'}"


def test_one_process_runs_several_commands_each_as_the_command_line_would(tmp_path):
    course = _course(tmp_path)
    session = Session(course, _db(course))
    try:
        status, log = session.run("generate_assignment", EX1, "--force")
        assert status == 0, log
        released = course / "exercises" / EX1 / f"{EX1}.ipynb"
        assert released.is_file()
        # what the command line makes of the same source: the same released notebook
        other = _course(tmp_path / "cli")
        assert nbgrader(other, "generate_assignment", EX1, "--force", db=_db(other))[0] == 0
        mine = nbformat.read(released, as_version=4)
        theirs = nbformat.read(other / "exercises" / EX1 / f"{EX1}.ipynb", as_version=4)
        assert [c.source for c in mine.cells] == [c.source for c in theirs.cells]
        # a second command (and a failing one) in the same process, each with its own output
        status, log = session.run("generate_assignment", "no_such_assignment")
        assert status != 0
        assert "no_such_assignment" in log and "Traceback" not in log.split("no_such_assignment")[0][-10:]
        status, log = session.run("db", "student", "add", "s1", "--last-name=Lovelace")
        assert status == 0, log
        assert "no_such_assignment" not in log  # the last command's output is not repeated
        assert session.started == 1
    finally:
        session.close()
    assert session.proc is None


def test_a_command_past_its_time_is_stopped_and_the_next_one_gets_a_new_process(tmp_path):
    course = _course(tmp_path)
    session = Session(course, _db(course))
    calls = []
    try:
        status, log = session.run("generate_assignment", EX1, "--force", timeout=0.05, watch=lambda: calls.append(1))
        assert status == -9
        assert log.rstrip().endswith("nbgrader stopped after 0 s")
        assert session.proc is None
        status, log = session.run("generate_assignment", EX1, "--force", timeout=300, watch=lambda: calls.append(1))
        assert status == 0, log
        assert session.started == 2
    finally:
        session.close()


def test_a_process_that_died_between_commands_is_replaced(tmp_path):
    course = _course(tmp_path)
    session = Session(course, _db(course))
    try:
        assert session.run("generate_assignment", EX1, "--force")[0] == 0
        session.proc.kill()
        session.proc.wait()
        status, log = session.run("db", "student", "list")
        assert status == 0, log
        assert session.started == 2
    finally:
        session.close()


def test_the_schema_revision_is_the_one_alembic_heads_prints():
    import nbgrader.api

    with nbgrader.api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        printed = subprocess.run(
            ["alembic", "-c", ini, "heads"], capture_output=True, text=True, env=child_env(), check=True
        ).stdout
    assert nbgrader_inprocess.alembic_head() == printed.split()[0]


def test_cell_metadata_is_validated_as_jsonschema_validate_does():
    """The same acceptance and the same best-match error as jsonschema.validate, for good and bad metadata, on
    the first call and on later ones (when the schema is no longer checked), and a bad schema is still refused."""
    import jsonschema
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    schema = MetadataValidatorV3().schema
    once = nbgrader_inprocess._SchemaCheckedOnce()
    good = {"grade": True, "grade_id": "t1", "locked": True, "points": 2, "schema_version": 3, "solution": False}
    bad = [
        {**good, "points": "two"},
        {**good, "grade_id": 5},
        {k: v for k, v in good.items() if k != "locked"},
        {**good, "schema_version": 2},
        {**good, "extra": 1},
        {**good, "locked": "yes", "points": -1},
    ]
    for _ in range(2):
        assert once.validate(good, schema) is None
        for meta in bad:
            with pytest.raises(jsonschema.ValidationError) as theirs:
                jsonschema.validate(meta, schema)
            with pytest.raises(jsonschema.ValidationError) as mine:
                once.validate(meta, schema)
            assert (mine.value.message, list(mine.value.path)) == (theirs.value.message, list(theirs.value.path))
    with pytest.raises(jsonschema.SchemaError):
        once.validate(good, {**schema, "type": 12})
    assert once.ValidationError is jsonschema.ValidationError  # the rest of the module is jsonschema's


def test_the_replacements_are_installed_in_nbgraders_process(tmp_path):
    """A session's process and the command line both run nbgrader with them (the stamp of a new gradebook)."""
    code = (
        "from manyheads_grader.nbgrader.inprocess import speed_up, alembic_head; speed_up(); "
        "import nbgrader.api, nbgrader.nbgraderformat.common as c; "
        "assert nbgrader.api.get_alembic_version is alembic_head; assert type(c.jsonschema).__name__ != 'module'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), timeout=120)
    course = _course(tmp_path)
    assert nbgrader(course, "generate_assignment", EX1, "--force", db=_db(course))[0] == 0
    import sqlite3

    with sqlite3.connect(course / "gradebook.db") as db:
        [(stamp,)] = db.execute("select version_num from alembic_version").fetchall()
    assert stamp == nbgrader_inprocess.alembic_head()


class _Recording(kernel_client.PromptKernelClient):
    """Remembers which kernel_info request was answered, and every IOPub message read while it waited."""

    async def _drain_iopub(self, request, msg):
        self.answered = request
        await super()._drain_iopub(request, msg)


class _RecordingManager(kernel_client.PromptKernelManager):
    client_factory = Type(_Recording, klass=kernel_client.PromptKernelClient)


def test_ready_means_the_answered_kernel_info_has_nothing_left_on_iopub():
    """jupyter_client reads IOPub until 0.2 s of silence so that nothing of the start-up request is left for the
    first cell; the prompt client reads up to that request's idle status: after it returns, no message of that
    request arrives (read for 0.5 s), and the kernel runs a cell and stops as usual."""

    async def life():
        km = _RecordingManager(kernel_name="python3")
        await km.start_kernel(extra_arguments=["--HistoryManager.hist_file=:memory:"])
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            late = []
            with contextlib.suppress(Empty):
                while True:
                    late.append(await kc.iopub_channel.get_msg(timeout=0.5))
            seen = []
            reply = await kc.execute_interactive("print(6 * 7)", timeout=60, output_hook=seen.append)
            return kc.answered, late, seen, reply
        finally:
            kc.stop_channels()
            await km.shutdown_kernel()
            assert not await km.is_alive()

    answered, late, seen, reply = asyncio.run(life())
    assert answered is not None
    assert [m for m in late if m["parent_header"].get("msg_id") == answered] == []
    assert reply["content"]["status"] == "ok"
    assert [m["content"]["text"] for m in seen if m["msg_type"] == "stream"] == ["42\n"]


def test_the_idle_that_ends_the_wait_is_the_answered_requests():
    idle = {"msg_type": "status", "content": {"execution_state": "idle"}, "parent_header": {"msg_id": "a"}}
    assert kernel_client._idle_for(idle, "a")
    assert not kernel_client._idle_for(idle, "b")  # another kernel_info's (the loop sends one per try)
    assert not kernel_client._idle_for(idle, None)
    busy = {**idle, "content": {"execution_state": "busy"}}
    assert not kernel_client._idle_for(busy, "a")


def test_the_workers_nbgrader_uses_the_prompt_kernel_manager(tmp_path):
    """Every nbgrader command of a worker names the class, and it is importable where nbgrader runs."""
    from manyheads_grader.execution.worker import Worker
    from manyheads_grader.records import Options

    worker = Worker(0, None, tmp_path, EX1, "sqlite:///unused.db", Options(sandbox=False))
    try:
        assert f"--Execute.kernel_manager_class={kernel_client.MANAGER}" in worker.args
    finally:
        worker.close()
    module, name = kernel_client.MANAGER.rsplit(".", 1)
    code = f"import importlib; assert issubclass(getattr(importlib.import_module({module!r}), {name!r}), object)"
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), timeout=120)
