"""Chapters 1-4 show the code that teaches (issue 24, item 5; CONTRIBUTING.md): no visible cell uses a name that only
a hidden cell defines, and no visible cell times itself (timers are plumbing; a timing read on a busy build machine
is not a property of the chapter)."""

from __future__ import annotations

import ast

import nbformat
import pytest

from manyheads.course.layout import REPO

HIDDEN = {"remove-cell", "remove-input"}
CHAPTERS = ["01_single_head_bottleneck", "02_subspaces", "03_head_size", "04_specialization"]


def _names(source: str, kind: type) -> set[str]:
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, kind):
            found.add(node.id)
        elif kind is ast.Store and isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif kind is ast.Store and isinstance(node, ast.arg):
            found.add(node.arg)
        elif kind is ast.Store and isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return found


def hidden_only_names(cells: list[tuple[str, bool]]) -> dict[int, list[str]]:
    """For (source, hidden) code cells in order: the names each visible cell uses that only hidden cells defined."""
    hidden_defs, visible_defs, problems = set(), set(), {}
    for i, (source, hidden) in enumerate(cells):
        stores = _names(source, ast.Store)
        if hidden:
            hidden_defs |= stores - visible_defs
            continue
        bad = (_names(source, ast.Load) & hidden_defs) - visible_defs - stores
        if bad:
            problems[i] = sorted(bad)
        visible_defs |= stores
    return problems


def _code_cells(stem: str) -> list[tuple[str, bool]]:
    nb = nbformat.read(REPO.chapters_dir / f"{stem}.ipynb", as_version=4)
    return [(c.source, bool(HIDDEN & set(c.metadata.get("tags", [])))) for c in nb.cells if c.cell_type == "code"]


def test_a_planted_visible_cell_using_a_hidden_name_is_found():
    cells = [("top = [1, 2]", True), ("print(top)", False), ("x = 1", False), ("y = [x for x in top]", False)]
    assert hidden_only_names(cells) == {1: ["top"], 3: ["top"]}
    assert hidden_only_names([("top = 1", True), ("top = 2\nprint(top)", False)]) == {}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_visible_cell_uses_a_name_only_a_hidden_cell_defines(stem):
    assert hidden_only_names(_code_cells(stem)) == {}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_visible_cell_times_itself(stem):
    timed = [s for s, hidden in _code_cells(stem) if not hidden and "perf_counter" in s]
    assert timed == []
