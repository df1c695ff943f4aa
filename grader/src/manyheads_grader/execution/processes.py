"""No student process outlives grading: the grader adopts orphans (a child subreaper) and kills what is left."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def _children() -> dict[int, list[int]]:
    """{parent pid: child pids} of every process this one can see."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(b")") + 2 :].split()[:2]  # the name in parentheses may hold spaces
        if state not in (b"Z", b"X"):  # exited, waiting to be reaped: nothing to kill
            tree.setdefault(int(ppid), []).append(int(entry))
    return tree


def _exited_children() -> set[int]:
    """This process's children that have exited and wait to be reaped (zombies)."""
    me, found = str(os.getpid()), set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == b"Z" and fields[1].decode() == me:
            found.add(int(entry))
    return found


def descendants(pid: int | None = None) -> set[int]:
    """Every process below ``pid`` (default: this one) in the process tree."""
    tree, found, todo = _children(), set(), [pid or os.getpid()]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@contextlib.contextmanager
def no_leftovers():
    """While grading, this process adopts every orphan that grading leaves (a child subreaper: a student's
    double-forked or ``setsid`` process lands here, not on init); at the end every process started meanwhile that
    still runs is killed, whichever sandbox or kernel it came from. Processes that were there before are kept."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = ctypes.c_int(0)
    libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
    existing = descendants()
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        for _ in range(100):  # a process may fork while it is being killed: look again until nothing is left
            left = descendants() - existing
            for pid in _exited_children() - existing:  # adopted orphans that have exited: reap them
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)
