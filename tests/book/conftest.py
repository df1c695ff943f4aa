"""The book, built once per test run and shared by every file of tests/book that reads it.

test_book.py builds it: ``make test`` runs pytest-xdist with ``--dist loadfile`` and hands that file out first
(tests/budget.toml's ``[schedule]``), and the other files that read the book last, so that no worker waits long for
the build. The build goes into the run's temporary folder under a file lock, so a second reader in the same run waits
for it and reads the same build. With ``MANYHEADS_BOOK_BUILD=DIR``
(a ``_build`` folder that ``make book`` made, as the publishing workflow does) the tests read that build instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock
from helpers.claims import RECORD

from manyheads.course.layout import REPO


@dataclass(frozen=True)
class Build:
    log: str
    returncode: int
    build_dir: Path  # <output>/_build

    @property
    def html(self) -> Path:
        return self.build_dir / "html"

    def executed(self, chapter: Path) -> Path:
        """The chapter as the build executed it (myst-nb writes the notebook with its outputs here)."""
        return self.build_dir / "jupyter_execute" / REPO.CHAPTERS / chapter.name

    def executed_notebook(self, chapter: Path):
        """The executed chapter with its glued values: myst-nb keeps those in ``<stem>.glue.json`` beside the
        notebook, not in its outputs, so they are added back as one hidden cell of display=False records (what
        helpers.claims.glued_values reads; not counted as shown outputs)."""
        import nbformat

        nb = nbformat.read(self.executed(chapter), as_version=4)
        store = self.executed(chapter).with_suffix(".glue.json")
        if store.is_file():
            glue = json.loads(store.read_text(encoding="utf-8"))
            cell = nbformat.v4.new_code_cell("")
            cell.outputs = [
                nbformat.v4.new_output(
                    "display_data",
                    data={RECORD + key: value for key, value in out.get("data", {}).items()},
                    metadata={"scrapbook": {"name": name, "mime_prefix": RECORD}},
                )
                for name, out in glue.items()
            ]
            nb.cells.append(cell)
        return nb

    def log_about(self, chapter: Path) -> str:
        lines = [line for line in self.log.splitlines() if chapter.stem in line]
        return "\n".join(lines[-20:]) + "\n...\n" + self.log[-3000:]


@pytest.fixture(scope="session")
def book(tmp_path_factory) -> Build:
    """A fresh build of the book from the working tree (the chapters are executed here, and only here), once per run.

    With ``MANYHEADS_BOOK_BUILD=DIR`` (a ``_build`` folder that ``make book`` made, as the publishing workflow does)
    the tests read that build instead of building again."""
    if os.environ.get("MANYHEADS_BOOK_BUILD"):
        build_dir = Path(os.environ["MANYHEADS_BOOK_BUILD"]).resolve()
        if not (build_dir / "html" / "index.html").is_file():
            pytest.fail(f"MANYHEADS_BOOK_BUILD={build_dir} holds no built book (html/index.html): run `make book`")
        return Build("build succeeded (reused from MANYHEADS_BOOK_BUILD)", 0, build_dir)
    if not (REPO.root / "_vendor").is_dir():
        pytest.fail("_vendor/ is missing: run `make vendor` (part of `make book` and `make test`) first")
    # Under xdist, getbasetemp() is per worker and its parent is the run's; without xdist the base folder itself is
    # the run's (its parent holds earlier runs' folders, whose builds must not be read).
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "book"
    shared.mkdir(exist_ok=True)
    log, code = shared / "build.log", shared / "returncode"
    with FileLock(str(shared / "build.lock")):
        if not code.is_file():
            # jupyter-book's build, two chapters executed at a time (tools/build_book.py, as `make book` runs it)
            tool = REPO.root / "tools" / "build_book.py"
            result = subprocess.run(
                [sys.executable, str(tool), "--jobs", "2", str(REPO.root), "--path-output", str(shared), "-W", "-n"]
                + ["--keep-going"],
                capture_output=True,
                text=True,
                timeout=1500,
            )
            log.write_text(result.stdout + result.stderr, encoding="utf-8")
            code.write_text(str(result.returncode), encoding="utf-8")
    return Build(log.read_text(encoding="utf-8"), int(code.read_text(encoding="utf-8")), shared / "_build")
