"""A template process per grading worker: the heavy imports done once, one forked kernel per student.

Starting a kernel for every notebook costs seconds (a new interpreter imports torch, numpy, IPython and the course
package) while a student's code usually runs in well under one; that start-up was most of the time a class took to
grade. So each worker runs one template process, started as a kernel would be (the same sandbox, see
:mod:`~manyheads_grader.execution.sandbox`), that imports all that once and then, for every kernel nbgrader asks
for, forks a child that becomes the kernel. No interpreter ever runs two students' code: the template runs none,
and each child serves one notebook and exits.

In the sandbox (run as root) each child, before any student code:

* gets a mount namespace of its own with a fresh, size-limited ``/home/student`` and ``/tmp`` (tmpfs; ``/tmp`` not
  writable by the kernel, as in the plain sandbox): nothing one student writes is seen by the next;
* gets the sandbox's resource limits (memory, CPU seconds, processes, file size, open files, no core dumps);
* becomes the worker's unprivileged sandbox user (no capabilities, no new privileges, not dumpable), so it cannot
  signal, trace or read the template, which stays root;
* applies the kernel's output limit and the assignment's own-work rule, as the plain launcher does.

In the sandbox of a grader who is not root (``--userns``: the template runs in bubblewrap's user namespace under the
grader's own uid, and so does the kernel) each child instead makes a user namespace of its own, nested in the
template's, with its own mount, PID, IPC and UTS namespaces (:func:`_user_namespace_kernel`): the same fresh home and
``/tmp``, the same limits, no capabilities (bounding set included), no new privileges, not dumpable. The uid cannot
keep the template out of reach here, so the PID namespace does: the template is not in the kernel's namespace, so
the kernel cannot name it to signal or trace it, and its ``/proc`` (mounted afresh) shows only the kernel's own
processes; the template's socket is bound read-only over itself, so the kernel cannot replace or remove it; what a
kernel leaves in the runtime folder is removed before the next one starts.

When the kernel exits, or nbgrader drops it, the template kills every process left in its sandbox (the template's
PID namespace) before it serves the next kernel. The kernel spec's launcher (:data:`CLIENT`) is a thin client that
asks the template for a kernel and lives as long as it does; when the template is not there (not started, or it
died), the client runs the plain launcher instead, so grading never depends on it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

SOCKET_NAME = "template.sock"  # in the worker's runtime folder (bound into the sandbox at the same path)
# Imported once in the template: what every exercise notebook and the grading kernel need. Not matplotlib.pyplot:
# importing it picks a backend, which ipykernel sets only when the kernel starts.
PRELOAD = (
    "numpy",
    "torch",
    "torch.nn.functional",
    "matplotlib",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.debugger",  # debugpy: each kernel imported it at start, 0.07 s of CPU (it starts no thread)
    "IPython.core.interactiveshell",
    "manyheads.attention",
    "manyheads.checks.own_work",
)
# The environment of every kernel in the sandbox (as bwrap's --clearenv/--setenv give the plain launcher).
SANDBOX_ENV = {
    "HOME": "/home/student",
    "MPLCONFIGDIR": "/tmp",
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
TMPFS_BYTES = 256 * 1024 * 1024  # each of the child's /tmp and /home/student
SERVED = "[manyheads template] kernel"  # starts the template's log line for each kernel it forks
TIMING = "[manyheads template] timing:"  # starts its log lines of phase times (worker.phase_times reads them)

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID = 0x10000000, 0x20000000
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 47, 4
_MS_NOEXEC = 0x8
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 0x1, 0x2, 0x4, 0x20
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 4, 38


def cap_output(limit: int) -> None:
    """Cut every output stream of this kernel after ``limit`` characters (with a note saying so)."""
    from ipykernel import iostream

    write = iostream.OutStream.write

    def capped(self, text):
        used = getattr(self, "_mh_used", 0)
        if used >= limit:
            return len(text)
        self._mh_used = used + len(text)
        if self._mh_used > limit:
            text = text[: limit - used] + f"\n[output cut by the grader after {limit} characters]\n"
        return write(self, text)

    iostream.OutStream.write = capped


# --- the client: the kernel spec's launcher --------------------------------------------------------------------

# Written next to the kernel spec (sandbox.prepare): the process nbgrader starts and stops as "the kernel". Standard
# library only, started with -I -S, so it costs milliseconds.
CLIENT = '''\
"""Ask the worker's template process for a kernel; run the plain launcher if there is none (manyheads grading)."""
import json, os, socket, sys
CONN, EXTRA = sys.argv[1], sys.argv[2:]  # EXTRA: what nbclient adds, e.g. --HistoryManager.hist_file=:memory:
SOCK = os.path.join(os.path.dirname(CONN), {socket_name!r})
FALLBACK = {fallback!r}
def plain():
    os.execv(FALLBACK[0], FALLBACK + [CONN] + EXTRA)
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    s.sendall(json.dumps({{"connection": CONN, "cwd": os.getcwd(), "extra": EXTRA}}).encode() + b"\\n")
    f = s.makefile("r")
    started = json.loads(f.readline() or "{{}}")
except (OSError, ValueError):
    plain()
if "pid" not in started:
    plain()
# The kernel runs; this process stands for it until the template says it ended (or nbgrader kills this one,
# which closes the socket: the template then kills the kernel).
line = f.readline()
try:
    sys.exit(int(json.loads(line).get("exit", 1)) if line else 1)
except ValueError:
    sys.exit(1)
'''


def client_source(fallback: list[str]) -> str:
    """The client script; ``fallback`` is the plain launcher's command (the connection file is appended)."""
    return CLIENT.format(socket_name=SOCKET_NAME, fallback=list(fallback))


# --- the template ------------------------------------------------------------------------------------------------


class _Settings(argparse.Namespace):
    socket: str
    sandboxed: bool
    userns: bool
    uid: int
    limits: str
    assignment: str | None
    server_fd: int = -1  # the template's listening socket, which a kernel must not keep


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount_tmpfs(libc, target: str, mode: str, uid: int) -> None:
    options = f"size={TMPFS_BYTES},mode={mode},uid={uid},gid={uid}".encode()
    _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", 0, options), f"mount tmpfs on {target}")


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline and backslash as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(folder: str, mountinfo: str) -> list[tuple[str, bool]]:
    """(mount point, read-only) of the outermost mounts strictly inside ``folder``, from ``mountinfo``'s text, in
    the order they were mounted. With the environment, the course or nbgrader's runtime folder under /tmp, these are
    the sandbox's binds of them (see sandbox._sandbox_args), which a fresh /tmp would hide."""
    found: list[tuple[str, bool]] = []
    prefix = folder.rstrip("/") + "/"
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = _unescape(fields[4])
        if point.startswith(prefix):
            found = [(p, ro) for p, ro in found if not p.startswith(point.rstrip("/") + "/")]  # over-mounted
            if not any(point.startswith(p.rstrip("/") + "/") or point == p for p, _ in found):
                found.append((point, "ro" in fields[5].split(",")))
    return found


def _fresh_tmp(libc, owner: int = 0) -> None:
    """Mount a fresh /tmp (mode 0755, not writable by the kernel, as bwrap --tmpfs gives the plain launcher) and put
    back, at the same paths and read-only as before, what the sandbox had bound under the old one: the interpreter,
    the environment, the course package and nbgrader's runtime folder may all live under /tmp (a mktemp clone)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        keep = mounts_under("/tmp", f.read())
    handles = [(point, ro, os.open(point, os.O_PATH)) for point, ro in keep]  # reachable once /tmp is covered
    _mount_tmpfs(libc, "/tmp", "0755", owner)
    for point, ro, handle in handles:
        source = f"/proc/self/fd/{handle}"
        parent = os.path.dirname(point)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        if os.path.isdir(source):
            os.makedirs(point, mode=0o755, exist_ok=True)
        elif not os.path.exists(point):
            os.close(os.open(point, os.O_CREAT | os.O_WRONLY, 0o644))
        _check(libc.mount(source.encode(), point.encode(), None, _MS_BIND | _MS_REC, None), f"bind {point}")
        if ro:
            flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
            _check(libc.mount(None, point.encode(), None, flags, None), f"read-only {point}")
        os.close(handle)


_LIMITS = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")


def _set_limits(limits: dict) -> None:
    values = (
        limits["memory_bytes"],
        limits["cpu_seconds"],
        limits["processes"],
        limits["file_bytes"],
        limits["open_files"],
        0,
    )
    for name, value in zip(_LIMITS, values, strict=True):
        resource.setrlimit(getattr(resource, name), (value, value))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc) -> None:
    """Drop every capability: the bounding set, the ambient set, then effective, permitted and inheritable."""
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:  # EINVAL past the last capability the kernel knows
            break
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "drop capabilities")


def _user_namespace_kernel(libc, limits: dict, connection: str) -> str:
    """Not root: the kernel gets a user namespace of its own (mapping only the grader's uid, as the plain launcher's
    bwrap does) with its own mount, PID, IPC and UTS namespaces, a fresh /tmp and home (tmpfs), the sandbox's
    limits, and no capabilities at all. Its PID namespace holds only itself and what it starts: the template, which
    runs under the same uid, is not there to be signalled, traced or read. Three processes: this one waits for the
    namespace's init (and exits as it does); the init (pid 1) reaps orphans and ends with the kernel, which takes
    everything left in the namespace with it; the kernel (pid 2). Returns the kernel's connection file, in the
    kernel. Limits count in the kernel's own user namespace (RLIMIT_NPROC too, Linux 5.14 and later)."""
    uid, gid = os.getuid(), os.getgid()
    data = Path(connection).read_bytes()
    template_socket = os.path.join(os.path.dirname(connection), SOCKET_NAME)
    flags = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWUTS
    _check(libc.unshare(flags), "unshare a user namespace")
    _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")  # to write its own uid map (reset below)
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1\n")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1\n")
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
    if os.path.exists(template_socket):  # the kernel may use the runtime folder, not remove or change this socket
        sock = template_socket.encode()
        _check(libc.mount(sock, sock, None, _MS_BIND, None), "bind the template's socket")
        ro = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
        _check(libc.mount(None, sock, None, ro, None), "read-only template socket")
    _fresh_tmp(libc, owner=uid)
    _mount_tmpfs(libc, "/home/student", "0755", uid)
    connection = "/home/student/.connection.json"
    Path(connection).write_bytes(data)
    os.chdir("/home/student")
    _set_limits(limits)
    init = os.fork()  # the first child in the new PID namespace: its init
    if init:
        _, status = os.waitpid(init, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    _check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "die with the parent")
    _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None), "mount /proc")
    kernel = os.fork()
    if kernel:  # the init: reap whatever is orphaned here, end with the kernel (the namespace dies with it)
        for sig in range(1, signal.NSIG):
            if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
                try:
                    signal.signal(sig, signal.SIG_IGN)
                except (OSError, ValueError):
                    pass
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == kernel:
                code = os.waitstatus_to_exitcode(status)
                os._exit(code if code >= 0 else 128 - code)
    _drop_capabilities(libc)
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
    _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    os.environ.clear()
    os.environ.update(SANDBOX_ENV)
    return connection


def _become_kernel(settings: _Settings, request: dict) -> None:
    """In the forked child: isolate, limit and drop privileges (sandbox), then run ipykernel. Never returns."""
    forked = time.perf_counter()
    limits = json.loads(settings.limits)
    connection = request["connection"]
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    if settings.server_fd >= 0:
        os.close(settings.server_fd)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    if settings.sandboxed and settings.userns:
        connection = _user_namespace_kernel(_libc(), limits, connection)
    elif settings.sandboxed:
        libc = _libc()
        uid = settings.uid
        # The connection file belongs to nbgrader (root, 0600): the kernel reads its own copy.
        data = Path(connection).read_bytes()
        _check(libc.unshare(_CLONE_NEWNS), "unshare the mount namespace")
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
        _fresh_tmp(libc)
        _mount_tmpfs(libc, "/home/student", "0755", uid)
        connection = "/home/student/.connection.json"
        Path(connection).write_bytes(data)
        os.chown(connection, uid, uid)
        os.chdir("/home/student")
        os.environ.clear()
        os.environ.update(SANDBOX_ENV)
        _set_limits(limits)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to a user: every capability is dropped
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
        _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    else:
        os.chdir(request.get("cwd") or os.getcwd())
    cap_output(limits["output_limit"])
    if settings.assignment:
        from manyheads.checks.own_work import require_own_work

        require_own_work(settings.assignment)
    from ipykernel import kernelapp

    # Only the kernel's own settings that nbclient passes (e.g. an in-memory history), as its stock kernel gets them.
    extra = [a for a in request.get("extra", []) if isinstance(a, str) and a.startswith("--") and "=" in a]
    sys.argv = [sys.executable, "-f", connection, *extra]
    print(f"{TIMING} set-up {time.perf_counter() - forked:.4f}", file=sys.stderr, flush=True)
    try:
        kernelapp.launch_new_instance(argv=["-f", connection, *extra])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


def _zombie(pid: str) -> bool:
    """Whether the process has exited and waits to be reaped (or is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].split()[0] in (b"Z", b"X")


def _kill_leftovers(keep: set[int]) -> None:
    """Kill every process in this sandbox but ``keep`` (the template, bwrap's init): what a kernel left running.
    Looks again until none is left, since a process may fork (or double-fork) while the others are killed."""
    for _ in range(100):
        left = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in keep and not _zombie(e)]
        alive = False
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        while True:  # reap our own children among them
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not alive:
            break
        time.sleep(0.01)


def _clean_runtime(folder: Path, uid: int) -> None:
    """Remove what an earlier kernel (the sandbox user) left in the runtime folder: nothing passes to the next one."""
    for entry in folder.iterdir():
        try:
            if entry.lstat().st_uid == uid and entry.name != SOCKET_NAME:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        except OSError:
            pass


def _entries(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _clean_left_in_runtime(folder: Path, left: set[str], keep: str) -> None:
    """Not root (the kernel has the grader's uid, so ownership cannot tell): remove ``left``, what appeared in the
    runtime folder while the previous kernel lived, but the template's socket and this request's connection file."""
    for name in left - {SOCKET_NAME, keep}:
        entry = folder / name
        try:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        except OSError:
            pass


def _exit_fd(pid: int) -> list[int]:
    """A pidfd of the kernel (one item), which select() reports readable when it exits; none where the kernel has
    no pidfd (Linux before 5.3): the loop then looks every 50 ms."""
    try:
        return [os.pidfd_open(pid)]
    except (AttributeError, OSError):
        return []


def _serve_one(settings: _Settings, conn: socket.socket, keep: set[int], left: dict[str, set[str]]) -> None:
    reader = conn.makefile("r")
    try:
        request = json.loads(reader.readline() or "{}")
        connection = request["connection"]
    except (ValueError, KeyError):
        return
    runtime = Path(connection).parent
    if settings.sandboxed and settings.userns:
        _clean_left_in_runtime(runtime, left.pop(str(runtime), set()), Path(connection).name)
        before = _entries(runtime)
    elif settings.sandboxed:
        _clean_runtime(runtime, settings.uid)
    forked = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            _become_kernel(settings, request)
        except BaseException as exc:  # the child must never return into the server loop
            print(f"[manyheads template] kernel start failed: {exc!r}", file=sys.stderr, flush=True)
        os._exit(70)
    print(f"{SERVED} {pid}", file=sys.stderr, flush=True)  # the runner counts these (the report says how many)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    status = None
    exited = _exit_fd(pid)  # readable when the kernel exits: its end is seen at once, not at the next look
    while status is None:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(code)
            break
        readable, _, _ = select.select([conn, *exited], [], [], 0.05)
        if conn in readable and not conn.recv(1, socket.MSG_PEEK):  # nbgrader dropped the kernel (the client died)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -9
    for fd in exited:
        os.close(fd)
    ended = time.perf_counter()
    try:  # whatever the kernel started and left running: its process group, and in the sandbox everything else
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if settings.sandboxed:
        _kill_leftovers(keep)
    if settings.sandboxed and settings.userns:  # every process of the kernel is gone: what it made stays put now
        left[str(runtime)] = _entries(runtime) - before
    print(f"{TIMING} life {ended - forked:.4f} clean-up {time.perf_counter() - ended:.4f}", file=sys.stderr, flush=True)
    try:
        conn.sendall(json.dumps({"exit": status if status >= 0 else 128 - status}).encode() + b"\n")
    except OSError:
        pass


def user_namespaces_refused() -> str:
    """Why a forked kernel could not have a user namespace of its own here ("" if it can): tried in a child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            libc, uid, gid = _libc(), os.getuid(), os.getgid()
            _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare a user namespace")
            _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1\n")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1\n")
        except BaseException as exc:
            os.write(write, str(exc).encode()[:300] or b"refused")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        why = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return why


def serve(settings: _Settings) -> None:
    """Import :data:`PRELOAD`, then serve one kernel at a time on ``settings.socket`` until killed. Not root, it
    first checks that a kernel can have a user namespace of its own, and exits saying why not if it cannot (the
    kernels then start one by one, and the report gives that line)."""
    started = time.perf_counter()
    if settings.sandboxed and settings.userns and (why := user_namespaces_refused()):
        print(f"[manyheads template] no user namespace for a forked kernel here: {why}", file=sys.stderr, flush=True)
        sys.exit(1)
    for module in PRELOAD:
        __import__(module)
    path = Path(settings.socket)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    keep = {os.getpid(), 1}
    settings.server_fd = server.fileno()
    left: dict[str, set[str]] = {}
    print(f"[manyheads template] ready in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            _serve_one(settings, conn, keep, left)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--sandboxed", action="store_true")
    parser.add_argument("--userns", action="store_true", help="not root: each kernel in a user namespace of its own")
    parser.add_argument("--uid", type=int, default=0)
    parser.add_argument("--limits", required=True, help="the sandbox's Limits as JSON")
    parser.add_argument("--assignment")
    settings = parser.parse_args(argv, namespace=_Settings())
    if settings.sandboxed:
        _check(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    serve(settings)


if __name__ == "__main__":
    main()
