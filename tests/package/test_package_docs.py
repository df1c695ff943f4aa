"""Docs that cannot drift (issue 36, item 6): every package's docstring names each of its modules and subpackages,
and nothing that is not there. The lists are written by hand, so a module added, split or renamed must be added to
its package's list in the same change, or this fails naming it."""

from __future__ import annotations

import ast
import re

import pytest

from manyheads._public_names import submodules
from manyheads.course.layout import REPO

SRC = REPO.root / "src"
PACKAGES = sorted(init.parent for init in (SRC / "manyheads").rglob("__init__.py"))


def _listed(folder) -> set[str]:
    """The modules a package's docstring names: ``:mod:`~pkg.name``` in subpackages, ````name```` or ````name/````
    bullets at the top."""
    package = ".".join(folder.relative_to(SRC).parts)
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    named = set(re.findall(r":mod:`~?" + re.escape(package) + r"\.([a-z_0-9]+)`", doc))
    named |= set(re.findall(r"^\* ``([a-z_0-9]+)/?``", doc, re.MULTILINE))
    return {name for name in named if not name.startswith("_")}


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda f: ".".join(f.relative_to(SRC).parts))
def test_the_package_docstring_lists_exactly_its_modules(folder):
    modules, packages = submodules(folder)
    present = set(modules) | set(packages)
    listed = _listed(folder)
    assert not present - listed, f"{folder.name}/__init__.py does not name {sorted(present - listed)}"
    assert not listed - present, f"{folder.name}/__init__.py names {sorted(listed - present)}, which are not there"
