"""A bubblewrap sandbox for the kernels that run student code (tooling-notes §3.4, made per-course and tested).

:func:`prepare` writes a Jupyter kernel spec ``manyheads-sandbox`` whose launcher script runs ipykernel inside
``bwrap`` under ``prlimit``:

* no network (own network namespace: only ``lo``), own PID/IPC/UTS namespaces, killed with its grader;
* a read-only view of ``/usr``, ``/etc``, the Python installation, the virtual environment and the ``manyheads``
  package only: the course folder, the solutions, the gradebook, the submissions and the other students' files do
  not exist inside; ``/tmp`` is a private tmpfs; the working directory is an empty scratch folder of its own;
* as root, the kernel runs as an unprivileged user of its own (one per grading worker, see :func:`worker_uid`) with
  no capabilities (``setpriv``), so the process limit of one student's kernel is not shared with another's;
* limits: address space (memory), CPU seconds, processes, file size, open files, no core dumps; every output stream
  of the kernel is cut after ``output_limit`` bytes (``launcher.py``), and nbgrader's per-cell timeout interrupts
  with a message (``interrupt_mode: message``: a signal would not cross the PID namespace);
* before any student cell the launcher applies the own-work rule of the assignment being graded
  (:mod:`manyheads.checks.own_work`); :func:`prepare_plain` is the same launcher without the sandbox.

The kernel and nbgrader talk over Unix sockets (``KernelManager.transport=ipc``) in a per-worker runtime folder,
which works across network namespaces. See :func:`nbgrader_args` and :func:`environment`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import manyheads
from manyheads_grader.execution import kernel_fork as kernel_template
from manyheads_grader.records import Limits  # the sandbox applies them; defined with the other records

KERNEL_NAME = "manyheads-sandbox"
INSTALL_HINT = (
    "the sandbox needs bubblewrap (`bwrap`): install it with `sudo apt-get install bubblewrap` "
    "(Debian/Ubuntu) or `sudo dnf install bubblewrap` (Fedora), or pass --no-sandbox to grade without "
    "it (only for submissions you trust)"
)
# Sandbox users (as root): no account needed, far above the ranges that systems and containers allocate
# (systemd hands out up to 1878982656), so no real user's processes count against a kernel's process limit.
SANDBOX_UID_BASE = 2_000_000_000


def worker_uid(worker: int) -> int:
    """The user that grading worker ``worker``'s kernels run as when grading as root."""
    return SANDBOX_UID_BASE + worker


LAUNCHER = '''\
"""Start ipykernel with every output stream cut after a fixed number of bytes (written by manyheads_grader)."""
from manyheads_grader.execution.kernel_fork import cap_output
cap_output({limit})
del cap_output
{guard}from ipykernel import kernelapp
kernelapp.launch_new_instance()
'''
# Before any student cell: the own-work rule for the assignment being graded (manyheads.checks.own_work).
GUARD = """from manyheads.checks.own_work import require_own_work
require_own_work({assignment!r})
del require_own_work
"""
PLAIN_KERNEL_NAME = "manyheads-grading"


def launcher(limits: Limits = Limits(), assignment: str | None = None) -> str:
    """The kernel launcher's source: output limits, then the own-work rule for ``assignment`` (if given)."""
    guard = GUARD.format(assignment=assignment) if assignment else ""
    return LAUNCHER.format(limit=limits.output_limit, guard=guard)


def available() -> str | None:
    """None if bubblewrap is installed and works here, else why not (with how to install it)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap is not installed: {INSTALL_HINT}"
    probe = subprocess.run(
        [bwrap, "--unshare-net", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return (
            f"bubblewrap is installed but cannot create a sandbox here ({probe.stderr.strip()[:200]}); "
            "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1), or pass --no-sandbox"
        )
    return None


def _ro_binds() -> list[str]:
    """Paths the kernel may read: system files, the Python installation, the venv, the course package and the grader."""
    paths = {
        "/usr",
        "/etc",
        sys.base_prefix,
        sys.prefix,
        sysconfig.get_paths()["purelib"],
        str(Path(manyheads.__file__).resolve().parent),
        str(Path(__file__).resolve().parents[1]),  # the whole grader package: the kernel's launcher imports it
    }
    real = {str(Path(sys.executable).resolve().parent.parent)}
    return sorted(p for p in paths | real if p and Path(p).exists())


def _outermost(paths: list[str]) -> list[str]:
    """The paths not inside another one of them, sorted."""
    paths = sorted(set(paths))
    return [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]


def _sandbox_args(spec_dir: Path) -> list[str]:
    """bwrap's arguments shared by every sandboxed process (kernel or template): namespaces, the read-only view of
    the system, Python and the package, the environment. The caller adds its own binds and the command."""
    as_root = os.geteuid() == 0
    ro = _outermost(_ro_binds() + [str(spec_dir)])
    # bwrap creates missing parents of mount points with mode 0700, which the sandbox user cannot cross: make them 0755.
    parents = sorted(
        {
            str(p)
            for path in ro
            for p in Path(path).parents
            if str(p) != "/" and not any(str(p) == r or str(p).startswith(r + "/") for r in ro)
        },
        key=len,
    )
    dirs = [
        arg
        for p in parents
        if not p.startswith(("/usr", "/tmp")) or p.startswith("/tmp/")
        for arg in ("--perms", "0755", "--dir", p)
    ]
    # As root: bwrap without a user namespace (then setpriv, or the template's child, drops to the sandbox user).
    # Not root: bwrap makes a user namespace itself and the kernel keeps the instructor's uid, without capabilities.
    unshare = (
        ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if as_root
        else ["--unshare-all", "--cap-drop", "ALL"]
    )
    env = [arg for name, value in kernel_template.SANDBOX_ENV.items() for arg in ("--setenv", name, value)]
    return [
        *unshare,
        "--die-with-parent",
        "--new-session",
        *("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
        *("--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", "/home"),
        *dirs,
        *(arg for p in ro for arg in ("--ro-bind", p, p)),
        *("--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"),
        *("--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin"),
        "--clearenv",
        *env,
    ]


def prepare(
    folder: Path, limits: Limits = Limits(), uid: int = SANDBOX_UID_BASE, assignment: str | None = None
) -> Path:
    """Write the kernel spec (under ``folder/share/jupyter/kernels``) and its launchers; return the share folder.

    As root the kernels run as ``uid``; otherwise as the user who grades. With ``assignment``, every kernel applies
    the own-work rule of that exercise before the notebook's first cell. The spec's launcher asks the worker's
    template process for a kernel (:func:`start_template`) and, without one, starts a kernel in a sandbox of its
    own (``run-kernel.sh``).
    """
    folder = Path(folder).resolve()
    spec_dir = folder / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "launcher.py").write_text(launcher(limits, assignment), encoding="utf-8")
    drop = (
        f"setpriv --reuid={uid} --regid={uid} --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --"
        if os.geteuid() == 0
        else ""
    )
    # The process limit (RLIMIT_NPROC) counts every process and thread of the kernel's user, also outside the
    # sandbox. As root the sandbox user has nothing else running; otherwise the grader's own processes (a desktop
    # has hundreds of threads) count too, so the kernel may start `processes` more than the user runs now.
    nproc = (
        f"NPROC={limits.processes}"
        if os.geteuid() == 0
        else 'NPROC=$(( $(find /proc/[0-9]*/task -mindepth 1 -maxdepth 1 -user "$(id -u)" 2>/dev/null | wc -l)'
        f" + {limits.processes} ))"
    )
    script = f"""#!/bin/sh
# Runs one sandboxed kernel (written by manyheads_grader.execution.sandbox). $1 = the connection file.
set -e
CONN="$1"
RT="$(dirname "$CONN")"
# bwrap's arguments that create the runtime folder's parents, outermost first (paths may hold spaces)
set --
d="$RT"
while d="$(dirname "$d")"; [ "$d" != / ]; do set -- --perms 0755 --dir "$d" "$@"; done
# Kernels of one worker run one after the other: whatever an earlier student's kernel left in the socket folder
# (files owned by the sandbox user) is removed, so it cannot pass anything to the next student.
[ "$(id -u)" = 0 ] && find "$RT" -mindepth 1 -maxdepth 1 -user {uid} -exec rm -rf {{}} + || true
SCRATCH="$(mktemp -d "$MANYHEADS_SCRATCH/kernel-XXXXXXXX")"
chmod 0777 "$SCRATCH"
cp "$CONN" "$SCRATCH/.connection.json" && chmod 0644 "$SCRATCH/.connection.json"
{nproc}
exec 2>>"$MANYHEADS_SCRATCH/../kernel.log" \\
  prlimit --as={limits.memory_bytes} --cpu={limits.cpu_seconds} --nproc="$NPROC" \\
  --fsize={limits.file_bytes} --nofile={limits.open_files} --core=0 -- \\
  bwrap {shlex.join(_sandbox_args(spec_dir))} \\
  "$@" \\
  --bind "$RT" "$RT" --bind "$SCRATCH" /home/student --chdir /home/student \\
  {drop} {shlex.quote(sys.executable)} {shlex.quote(str(spec_dir / "launcher.py"))} -f /home/student/.connection.json
"""
    run = spec_dir / "run-kernel.sh"
    run.write_text(script, encoding="utf-8")
    run.chmod(0o755)
    _write_spec(spec_dir, "Python 3 (manyheads sandbox)", [str(run)], interrupt_mode="message")
    return folder / "share" / "jupyter"


def prepare_plain(folder: Path, limits: Limits = Limits(), assignment: str | None = None) -> Path:
    """Without the sandbox (``--no-sandbox``): a kernel spec that only runs the launcher (output limits and the
    own-work rule), so that grades do not depend on the sandbox; it too asks the worker's template process first.
    Returns the share folder."""
    folder = Path(folder).resolve()
    spec_dir = folder / "share" / "jupyter" / "kernels" / PLAIN_KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "launcher.py").write_text(launcher(limits, assignment), encoding="utf-8")
    _write_spec(spec_dir, "Python 3 (manyheads grading)", [sys.executable, str(spec_dir / "launcher.py"), "-f"])
    return folder / "share" / "jupyter"


def _write_spec(spec_dir: Path, display_name: str, fallback: list[str], **extra: str) -> None:
    """kernel.json: the thin client (kernel_template.CLIENT), which runs ``fallback`` + the connection file when the
    worker has no template process."""
    client = spec_dir / "client.py"
    client.write_text(kernel_template.client_source(fallback), encoding="utf-8")
    spec = {
        "argv": [sys.executable, "-I", "-S", str(client), "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        **extra,
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")


@dataclass(frozen=True)
class TemplateSettings:
    """How a worker's template process forks kernels: the limits each kernel gets, the sandbox user (as root), the
    assignment whose imports it does ahead, and whether the kernels are sandboxed at all."""

    limits: Limits = Limits()
    uid: int = SANDBOX_UID_BASE
    assignment: str | None = None
    sandboxed: bool = True


def start_template(
    share: Path, rt: Path, settings: TemplateSettings = TemplateSettings(), log: Path | None = None
) -> subprocess.Popen | None:
    """Start the worker's template process (:mod:`kernel_template`) for the kernel spec in ``share``; its socket
    goes in the runtime folder ``rt``. As root each forked kernel becomes the sandbox user ``settings.uid``;
    otherwise (``--userns``) each gets a user namespace of its own inside the template's (see
    :func:`userns_unavailable`)."""
    limits, uid, assignment, sandboxed = settings.limits, settings.uid, settings.assignment, settings.sandboxed
    userns = sandboxed and os.geteuid() != 0
    spec_dir = Path(share) / "kernels" / (KERNEL_NAME if sandboxed else PLAIN_KERNEL_NAME)
    command = [
        sys.executable,
        "-m",
        "manyheads_grader.execution.kernel_fork",
        f"--socket={rt / kernel_template.SOCKET_NAME}",
        f"--limits={json.dumps(dataclasses.asdict(limits))}",
        *([f"--assignment={assignment}"] if assignment else []),
    ]
    if sandboxed:
        rt_parents = [str(p) for p in reversed(Path(rt).parents) if str(p) != "/"]
        command = [
            "bwrap",
            *_sandbox_args(spec_dir),
            *(arg for p in rt_parents for arg in ("--perms", "0755", "--dir", p)),
            *("--bind", str(rt), str(rt), "--perms", "0755", "--dir", "/home/student", "--chdir", "/home/student"),
            *command,
            "--sandboxed",
            *(["--userns"] if userns else [f"--uid={uid}"]),
        ]
    stderr = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
    finally:
        if log:
            stderr.close()


def template_ready(rt: Path, process: subprocess.Popen | None, timeout: float = 120) -> bool:
    """Wait until the template in ``process`` listens in ``rt`` (its imports take seconds); False if it died."""
    sock = Path(rt) / kernel_template.SOCKET_NAME
    deadline = time.monotonic() + timeout
    while process is not None and process.poll() is None and time.monotonic() < deadline:
        if sock.exists():
            return True
        time.sleep(0.05)
    return False


def runtime_folder(worker: Path) -> tuple[Path, Path]:
    """(runtime folder for connection files and sockets, scratch root for kernels' working folders) of a worker."""
    # Unix socket paths are limited to 107 bytes, so the runtime folder is a short temporary one, not under OUT;
    # the caller removes it (see ``runner``).
    rt = Path(tempfile.mkdtemp(prefix="mh-rt-"))
    scratch = Path(worker) / "kernels"
    scratch.mkdir(parents=True, exist_ok=True)
    rt.chmod(0o1777)
    scratch.chmod(0o700)
    return rt.resolve(), scratch.resolve()


# nbclient gives a kernel named "python3" an in-memory IPython history; a kernel spec with another name must ask for
# it (else every kernel writes a history database into its fresh home).
IN_MEMORY_HISTORY = '--Execute.extra_arguments=["--HistoryManager.hist_file=:memory:"]'


def nbgrader_args(rt: Path) -> list[str]:
    return [
        f"--Execute.kernel_name={KERNEL_NAME}",
        IN_MEMORY_HISTORY,
        "--KernelManager.transport=ipc",
        f"--KernelManager.ip={rt / 'kernel'}",
    ]


def environment(share: Path, rt: Path, scratch: Path | None = None) -> dict[str, str]:
    """Variables for the nbgrader process: where the kernel spec lives and where connection files go (the runtime
    folder ``rt``, where the kernel's client looks for the template's socket); ``scratch``: the sandbox's."""
    return {
        "JUPYTER_PATH": str(share),
        "TMPDIR": str(rt),
        "JUPYTER_RUNTIME_DIR": str(rt),
        **({"MANYHEADS_SCRATCH": str(scratch)} if scratch else {}),
    }
