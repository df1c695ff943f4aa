"""One nbgrader process per grading worker, kept for all its commands (its chunks, the preflight, the feedback).

Every ``nbgrader`` command run as a process of its own first imports nbgrader, nbconvert, nbclient and SQLAlchemy:
about a second of CPU, eleven times for a class of 60 on 3 jobs, on a machine that grading keeps busy. A session
imports them once; each command then runs exactly as ``nbgrader ARGS`` would (the same application class, its
config files, its command line), in a fresh application object and event loop, with its output in a log file of its
own. :meth:`Session.run` keeps the contract of :func:`~manyheads_grader.nbgrader.command.nbgrader`: (exit status,
output), never raises on nbgrader's failures, calls ``watch`` about twice a second, and past ``timeout`` kills the
process (the next command starts a new one) and says so in the output.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from manyheads_grader.nbgrader.command import WITHOUT_IRI_PARSERS, child_env

# The child: reads one request a line ({"argv": [...], "log": path}) and answers {"status": N} on its own stdout,
# which the commands never see (their stdout and stderr go to the request's log file).
_SERVE = WITHOUT_IRI_PARSERS + "; from manyheads_grader.nbgrader.session import serve; serve()"


class Session:
    """nbgrader commands in ``course`` (the worker's copy), with gradebook ``db`` and ``env`` added to the grader's."""

    def __init__(self, course: Path, db: str, env: dict | None = None):
        self.course, self.db, self.env = Path(course), db, env
        self.proc: subprocess.Popen | None = None
        self.started = 0  # processes started so far (a kill costs one more)

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _SERVE],
                cwd=self.course,
                env=child_env(self.env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # everything a command prints goes to its log file
            )
            self.started += 1
        return self.proc

    def run(self, *args: str, timeout: float | None = None, watch=None) -> tuple[int, str]:
        """Run ``nbgrader ARGS`` in the session: (exit status, output)."""
        argv = [*args, f"--CourseDirectory.root={self.course}", f"--CourseDirectory.db_url={self.db}"]
        deadline = None if timeout is None else time.monotonic() + timeout
        fd, name = tempfile.mkstemp(prefix="nbgrader-", suffix=".log")
        os.close(fd)
        log = Path(name)
        try:
            proc = self._start()
            try:
                proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
                proc.stdin.flush()
            except OSError:  # it died between commands: a new one for this command
                self.close()
                proc = self._start()
                proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
                proc.stdin.flush()
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                wait = 0.5 if left is None else min(0.5, left)
                ready, _, _ = select.select([proc.stdout], [], [], wait)
                if ready:
                    line = proc.stdout.readline()
                    if not line:  # the process died during the command (killed, out of memory)
                        code = proc.wait()
                        self.proc = None
                        return code or -1, f"{_read(log)}\nnbgrader's process ended (status {code})"
                    try:
                        return int(json.loads(line)["status"]), _read(log)
                    except (ValueError, KeyError, TypeError):
                        continue
                if watch is not None:
                    watch()
                if deadline is not None and time.monotonic() >= deadline:
                    self.close()
                    return -9, f"{_read(log)}\nnbgrader stopped after {timeout:.0f} s"
        finally:
            log.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop the process (a command running in it is lost)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.proc = None


def _read(log: Path) -> str:
    try:
        return log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# --- the child ---------------------------------------------------------------------------------------------------


def serve() -> None:
    """Answer requests from stdin until it closes. Each runs ``nbgrader ARGV`` as the command line would."""
    from manyheads_grader.nbgrader.inprocess import speed_up

    speed_up()
    sys.argv[0] = "nbgrader"
    answer = os.fdopen(os.dup(1), "w")  # the protocol; fds 1 and 2 become each command's log
    for line in sys.stdin:
        try:
            request = json.loads(line)
            argv, log = list(request["argv"]), request["log"]
        except (ValueError, KeyError, TypeError):
            continue
        status = _run_logged(argv, log)
        answer.write(json.dumps({"status": status}) + "\n")
        answer.flush()


def _run_logged(argv: list[str], log: str) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        return _run(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _run(argv: list[str]) -> int:
    """``nbgrader ARGV`` in this process: new application objects (nbgrader's apps are singletons, so the last
    command's are cleared) and a new event loop, as jupyter_core's ``launch_instance`` would have in a new process."""
    import asyncio
    import traceback

    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from traitlets.config import SingletonConfigurable

    _clear_singletons(SingletonConfigurable)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        app = NbGraderApp.instance()
        app.initialize(argv)
        app.start()
        return 0
    except NoStart:
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # nbgrader's own failure: in the log, as the command line would print it
        traceback.print_exc()
        return 1
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def _clear_singletons(cls: type) -> None:
    for sub in cls.__subclasses__():
        if getattr(sub, "_instance", None) is not None:
            sub.clear_instance()
        _clear_singletons(sub)
