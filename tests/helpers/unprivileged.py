"""Run a command as an ordinary user (not root), for the tests and the benchmark of grading without root.

When the caller is root, the command runs under ``setpriv`` as ``uid`` (an account such as ``grader-test``, or any
unused high uid: none is needed), inside a bubblewrap mount namespace where the folders the grader's Python needs are
readable although a folder above them is closed to other users (a clone or an interpreter under ``/root``, a 0700
temporary folder). When the caller is not root, the command runs as is. Nothing else changes.

The tests go through :func:`run_as_user`, which as root always runs the command from this clone seen inside a
folder only root can read (mode 0700, as ``mktemp -d`` and a home folder under Debian make it): so every run of the
tests proves that an ordinary user's grader reaches the course and both packages wherever the clone sits, not only
when CI happens to clone into a folder anyone can enter. ``python unprivileged.py --uid N [--path P] -- COMMAND``
is what it runs inside that namespace (there the paths are seen as they are, so :func:`as_user` is computed there).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a script in the namespace
from helpers.relocated import ROOT, Relocated  # noqa: E402


def grader_paths() -> list[Path]:
    """What a grader's Python needs to read: the base installation, the virtual environment, the installed packages,
    the course package and the grader (editable installs live in the clone)."""
    import manyheads
    import manyheads_grader

    return [
        Path(p).resolve()
        for p in {
            sys.base_prefix,
            sys.prefix,
            sysconfig.get_paths()["purelib"],
            str(Path(manyheads.__file__).parent),
            str(Path(manyheads_grader.__file__).parent),
        }
    ]


def visible_to_all(paths: list[Path]) -> list[str]:
    """A bwrap prefix (run as root) under which other users can read ``paths`` although a folder above them is
    closed to them (mode without o+x): each outermost closed folder is replaced by an empty one that holds only those
    paths, read-only. Empty when nothing is closed."""

    def closed(p: Path) -> bool:
        return p != Path("/") and not os.stat(p).st_mode & 0o001

    tops = sorted(
        {next(a for a in reversed(p.parents) if closed(a)) for p in paths if any(map(closed, p.parents))},
        key=lambda a: len(a.parts),
    )
    tops = [a for a in tops if not any(a != b and a.is_relative_to(b) for b in tops)]
    if not tops:
        return []
    args = ["bwrap", "--dev-bind", "/", "/"]
    for top in tops:
        inside = sorted({p for p in paths if p.is_relative_to(top)}, key=lambda p: len(p.parts))
        inside = [p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside)]
        between = sorted(
            {a for p in inside for a in p.parents if a.is_relative_to(top) and a != top}, key=lambda a: len(a.parts)
        )
        args += ["--perms", "0755", "--tmpfs", str(top)]
        args += [arg for a in between for arg in ("--perms", "0755", "--dir", str(a))]
        args += [arg for p in inside for arg in ("--ro-bind", str(p), str(p))]
    return [*args, "--"]


def as_user(command: list[str], uid: int, extra_paths: list[Path] = ()) -> list[str]:
    """``command`` run as ``uid`` (with its own group, no supplementary groups) when the caller is root; the user
    also reads ``extra_paths`` (the course, when the grader is to find it in its working folder)."""
    if os.geteuid() != 0:
        return list(command)
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    return [*visible_to_all([*grader_paths(), *map(Path, extra_paths)]), *drop, *command]


def user_env(home: Path) -> dict[str, str]:
    """The environment of the ordinary user's grader: its own home and temporary folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "TMPDIR", "XDG_RUNTIME_DIR")}
    return {**env, "HOME": str(home), "TMPDIR": str(home), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"}


def run_as_user(
    command: list[str], uid: int, env: dict[str, str], cwd: Path, timeout: float, course: bool = False
) -> subprocess.CompletedProcess:
    """Run ``command`` (Python from this clone's environment) as ``uid`` in ``cwd``; with ``course`` the user reads
    the course (this clone) too, for a grader that finds it in its working folder.

    As root, the clone is seen from inside a new 0700 folder (see the module's docstring); as anyone else the
    command runs as is, as that user."""
    if os.geteuid() != 0:
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        # no mount namespace (a container without CAP_SYS_ADMIN): the user can only read the clone where it is
        import pytest

        shut = next((p for p in reversed(ROOT.parents) if not os.stat(p).st_mode & 0o001), None)
        if shut is not None:
            mode = oct(os.stat(shut).st_mode & 0o777)[2:]
            pytest.skip(f"{shut} (mode {mode}) is closed to uid {uid} and no mount namespace can show it the clone")
        full = as_user(command, uid, [ROOT] if course else [])
        return subprocess.run(full, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    closed = Path(tempfile.mkdtemp(prefix="mh-0700-"))  # mode 0700: only root may enter it
    try:
        where = Relocated(closed)
        prefix, moved_env = where.prefix(cwd)
        inside = [str(where.python), str(where.path(__file__)), "--uid", str(uid)]
        inside += ["--path", str(where.clone)] if course else []
        path = os.pathsep.join(map(where.arg, env.get("PATH", "").split(os.pathsep)))
        return subprocess.run(
            [*prefix, *inside, "--", *map(where.arg, command)],
            capture_output=True,
            text=True,
            env={**env, **moved_env, "PATH": path},
            timeout=timeout,
        )
    finally:
        shutil.rmtree(closed, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="run COMMAND as an ordinary user (see the module's docstring)")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--path", type=Path, action="append", default=[], help="also readable by the user")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    full = as_user(command, args.uid, args.path)
    os.execvp(full[0], full)


if __name__ == "__main__":
    main()
