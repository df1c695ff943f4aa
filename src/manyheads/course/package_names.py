"""Which names of the course package a notebook takes, and whether a given copy of the package has them.

A notebook takes names from the package in any of these forms: ``mh.X`` and ``mh.sub.X`` (after ``import manyheads
as mh``), ``from manyheads import X``, ``from manyheads.sub import X``, and ``alias.X`` after ``import
manyheads.sub as alias``. :func:`names_used` finds them all in a notebook's code, as dotted paths
(``manyheads.viz.annotate_cells``). :func:`missing_names` imports a copy of the package (for example the one a
release's ``git archive`` holds, the one a student's set-up cell installs) in a fresh interpreter and returns the
paths that do not resolve there: the check that a notebook on the linked ref runs against the release it installs.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

__all__ = ["missing_names", "names_used"]

PACKAGE = "manyheads"


def _code(nb: nbformat.NotebookNode) -> str:
    """The notebook's Python, with IPython's magics and shell lines left out (ast cannot read them)."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines += [line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))]
            lines.append("")
    return "\n".join(lines)


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"], or None if the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def names_used(nb: nbformat.NotebookNode) -> set[str]:
    """Every dotted path into the package that the notebook's code takes (``manyheads.viz.annotate_cells``)."""
    tree = ast.parse(_code(nb))
    aliases: dict[str, str] = {}  # local name -> dotted path in the package
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for item in node.names:
                if item.name == PACKAGE or item.name.startswith(PACKAGE + "."):
                    used.add(item.name)
                    if item.asname:
                        aliases[item.asname] = item.name
                    else:  # `import manyheads.models` binds `manyheads`
                        aliases[item.name.split(".")[0]] = PACKAGE
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == PACKAGE or node.module.startswith(PACKAGE + "."):
                for item in node.names:
                    path = f"{node.module}.{item.name}"
                    used.add(path)
                    aliases[item.asname or item.name] = path
    for node in ast.walk(tree):
        # The longest chain only: `mh.viz.annotate_cells` gives that path, not also `mh.viz`'s own node.
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            chain = _dotted(node)
            if chain and chain[0] in aliases:
                used.add(".".join([aliases[chain[0]], *chain[1:]]))
        for child in ast.iter_child_nodes(node):
            child._parent = node  # type: ignore[attr-defined]
    return used


_RESOLVE = r"""
import importlib, json, os, sys
root = os.path.realpath(sys.path[0])
package = importlib.import_module("manyheads")
if not os.path.realpath(package.__file__).startswith(root + os.sep):
    sys.exit(f"imported manyheads from {package.__file__}, not from {root}")
missing = {}
for path in json.loads(sys.argv[1]):
    parts = path.split(".")
    try:
        obj = importlib.import_module(parts[0])
        for i, part in enumerate(parts[1:], start=1):
            try:
                obj = getattr(obj, part)
            except AttributeError as missing_attribute:
                try:  # a submodule not yet imported
                    obj = importlib.import_module(".".join(parts[: i + 1]))
                except ModuleNotFoundError:
                    raise missing_attribute from None
    except Exception as exc:
        missing[path] = f"{type(exc).__name__}: {exc}"
print(json.dumps(missing))
"""


def missing_names(paths: set[str] | list[str], package_root: Path, python: str = sys.executable) -> dict[str, str]:
    """{dotted path: why it does not resolve} when the package under ``package_root`` (the folder holding
    ``manyheads/``, e.g. ``<archive>/src``) is imported in a fresh ``python``; empty when every path resolves."""
    package_root = Path(package_root).resolve()
    if not (package_root / PACKAGE / "__init__.py").is_file():
        raise FileNotFoundError(f"{package_root} holds no {PACKAGE}/__init__.py")
    env = {**os.environ, "PYTHONPATH": str(package_root), "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg"}
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); " + _RESOLVE
    done = subprocess.run(
        [python, "-c", code, str(package_root), json.dumps(sorted(paths))],
        capture_output=True,
        text=True,
        env=env,
        cwd=package_root,
        timeout=600,
    )
    if done.returncode != 0:  # also when another copy of the package (e.g. an editable install) came first
        raise RuntimeError(f"importing {PACKAGE} from {package_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
