"""This clone, with its virtual environment, as if it sat somewhere else: bound at ``LOCATION/clone`` in a private
mount namespace (``unshare -m``, root only), nothing copied or reinstalled.

The editable installs' ``.pth`` files (the course's ``src/`` and the grader's ``grader/src``) are bound over with
copies that name the new place, so the interpreter at ``LOCATION/clone/.venv/bin/python`` imports both packages
from there, exactly as a clone made at that place would. Used by the grading-location tests (a class graded from
``/tmp``, a 0700 home, ``/opt``, a path with spaces) and by the tests that grade as an ordinary user, which always
see the clone from a folder only its owner can read (tests/helpers/unprivileged.py).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def editable_pths() -> list[Path]:
    """The ``.pth`` files of this environment's editable installs that point into this clone."""
    found = []
    for pth in sorted(Path(sysconfig.get_paths()["purelib"]).glob("__editable__*.pth")):
        lines = pth.read_text().strip().splitlines()
        if lines and all(Path(line).is_relative_to(ROOT) for line in lines):
            found.append(pth)
    return found


class Relocated:
    """This clone seen at ``location / "clone"`` (``location`` exists; the mount point is made by :meth:`prefix`)."""

    def __init__(self, location: Path) -> None:
        self.location = Path(location)
        self.clone = self.location / "clone"

    def path(self, path: str | Path) -> Path:
        """Where ``path`` (inside this clone, or anywhere else) is seen in the namespace."""
        path = Path(path)
        return self.clone / path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def arg(self, arg: str) -> str:
        """A command-line argument with this clone's path moved (arguments that are not paths into it unchanged)."""
        return str(self.path(arg)) if os.path.isabs(arg) and Path(arg).is_relative_to(ROOT) else arg

    @property
    def python(self) -> Path:
        return self.path(sys.executable)

    def prefix(self, cwd: str | Path | None = None) -> tuple[list[str], dict[str, str]]:
        """``(command prefix, environment additions)``: what follows the prefix runs as root in a new mount
        namespace where the clone is bound at :attr:`clone`, in ``cwd`` as seen there (default: the clone)."""
        self.clone.mkdir(exist_ok=True)
        binds = ['mount --bind "$MH_ROOT" "$MH_CLONE"']
        env = {"MH_ROOT": str(ROOT), "MH_CLONE": str(self.clone), "MH_CWD": str(self.path(cwd or ROOT))}
        for i, pth in enumerate(editable_pths()):
            moved = self.location / f"editable-{i}.pth"
            moved.write_text("".join(f"{self.path(line)}\n" for line in pth.read_text().strip().splitlines()))
            env[f"MH_PTH_{i}"], env[f"MH_PTH_AT_{i}"] = str(moved), str(self.path(pth))
            binds.append(f'mount --bind "$MH_PTH_{i}" "$MH_PTH_AT_{i}"')
        script = " && ".join([*binds, 'cd "$MH_CWD"', 'exec "$@"'])
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"], env
