"""A tiny course repository with a release history, for the tests of what a student gets (delivery, the replay).

Commit 1 is the release 0.1.0: a package ``manyheads`` with ``greet`` and a chapter that calls ``mh.greet()``, its
links and set-up cell naming ``v0.1.0``. Commit 2 is development, like this repository's ``main`` before release
0.3.0: the chapter also calls ``mh.shiny()``, which the package gains in the same commit, the set-up cell still
installs ``v0.1.0``, and with ``links="main"`` the links open the chapter from ``main`` (the skew a student met).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat

from manyheads.course import hygiene

URL = "https://github.com/fixture-org/fixture-course"
PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "manyheads"
version = "{version}"
requires-python = ">=3.10"
dependencies = []

[project.optional-dependencies]
colab = []

[tool.setuptools.packages.find]
where = ["src"]
"""


def _git(root: Path, *args: str) -> str:
    author = ["-c", "user.name=fixture", "-c", "user.email=fixture@localhost", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *author, "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def _write(root: Path, version: str, links: str, functions: list[str], calls: list[str]) -> None:
    (root / "pyproject.toml").write_text(PYPROJECT.format(version=version), encoding="utf-8")
    package = root / "src" / "manyheads"
    package.mkdir(parents=True, exist_ok=True)
    body = "".join(f"\n\ndef {name}():\n    return {name!r}\n" for name in functions)
    (package / "__init__.py").write_text(f'__version__ = "{version}"\n{body}', encoding="utf-8")
    (root / "_config.yml").write_text(f"repository:\n  url: {URL}\n  branch: {links}\n", encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(hygiene.setup_cell_source(root)),
        nbformat.v4.new_code_cell("import manyheads as mh\n\n" + "\n".join(f"print(mh.{c}())" for c in calls)),
    ]
    (root / "chapters").mkdir(exist_ok=True)
    nbformat.write(nb, root / "chapters" / "01_demo.ipynb")


def make_course_repository(root: Path, links: str = "main") -> dict[str, str]:
    """Write the two commits into a new repository at ``root`` (branch ``main``); {"release": sha, "main": sha}."""
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "-b", "main")
    _write(root, "0.1.0", "v0.1.0", ["greet"], ["greet"])
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "release 0.1.0")
    release = _git(root, "rev-parse", "HEAD").strip()
    _write(root, "0.1.0", links, ["greet", "shiny"], ["greet", "shiny"])
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "development: a new name the chapter already calls")
    return {"release": release, "main": _git(root, "rev-parse", "HEAD").strip()}
