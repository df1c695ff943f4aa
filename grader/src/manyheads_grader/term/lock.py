"""One run at a time in an OUT: ``OUT/.lock`` holds the running command's process id and start time.

A second ``grade`` or ``rescore`` into the same OUT stops with an error naming the running one; a lock left by a
process that no longer exists (a run killed with SIGKILL, a machine that rebooted) is taken over, with a note.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from manyheads_grader.records import GradingError

LOCK = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _holder(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def held(out: Path, command: str, notes: list[str] | None = None):
    """Hold ``OUT/.lock`` for the block; :class:`GradingError` when another live run holds it. A stale lock's
    takeover is appended to ``notes``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _holder(path)
            same_host = holder is not None and holder.get("host") == me["host"]
            if holder is not None and (not same_host or _alive(int(holder.get("pid", 0)))):
                raise GradingError(
                    f"another run is writing to {out}: `{holder.get('command')}`, process {holder.get('pid')} on "
                    f"{holder.get('host')}, started {holder.get('started')}. Wait for it to end, or use another "
                    f"--out (if that process no longer exists, delete {path})"
                ) from None
            said = (
                "an unreadable lock"
                if holder is None
                else (
                    f"the lock of process {holder.get('pid')} (started {holder.get('started')}), which no longer exists"
                )
            )
            if notes is not None:
                notes.append(
                    f"took over {said}: that run was stopped before it ended; its outputs were never made "
                    "current, so the ones before it are kept"
                )
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(me, f)
        break
    try:
        yield
    finally:
        if (_holder(path) or {}).get("pid") == me["pid"]:
            path.unlink(missing_ok=True)
