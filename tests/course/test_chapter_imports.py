"""Chapters import the package one way, ``import manyheads as mh``, and call ``mh.<name>`` (issue 25, item 2); so do
the exercises' solutions (issue 36, item 7), which may also call their visible checks as ``mh.checks.<check>``.

A reader meets one form on every page: no ``from manyheads... import``, no ``import manyheads.<sub>``, no
``mh.viz.<name>`` or ``mh.analysis.<module>.<name>`` beside ``mh.<name>``. Every public name of the teaching modules
is ``mh.<name>`` (``manyheads._public_names`` hands them on), so the short form always exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

import manyheads as mh

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def _cells(nb: nbformat.NotebookNode) -> list[tuple[int, ast.Module]]:
    """(cell number, parsed code) of each code cell, without IPython's magics and shell lines (ast cannot read them)."""
    cells = []
    for number, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines()]
            cells.append((number, ast.parse("\n".join(lines))))
    return cells


def _outermost_chains(tree: ast.Module) -> list[tuple[int, list[str]]]:
    """(line, ["mh", "viz", "attention_heatmap"]) for each attribute chain that starts at the name ``mh``."""
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    chains = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts, base = [], node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id == "mh":
                chains.append((node.lineno, ["mh", *reversed(parts)]))
    return chains


def import_style_problems(nb: nbformat.NotebookNode, namespaces: frozenset[str] = frozenset()) -> list[str]:
    """Every place the notebook takes the package in another form than ``import manyheads as mh`` + ``mh.<name>``
    (or ``mh.<namespace>.<name>`` for a namespace in ``namespaces``)."""
    problems: list[tuple[int, int, str]] = []
    for number, tree in _cells(nb):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "manyheads":
                problems.append((number, node.lineno, f"from {node.module} import ... (use mh.<name>)"))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "manyheads" and (alias.name, alias.asname) != ("manyheads", "mh"):
                        how = f"import {alias.name} as {alias.asname} (use import manyheads as mh)"
                        problems.append((number, node.lineno, how))
        for line, chain in _outermost_chains(tree):
            if chain[1] not in mh._NAMES and not (chain[1] in namespaces and len(chain) == 3):
                problems.append((number, line, f"{'.'.join(chain[:3])} (call mh.<name>)"))
    return [f"cell {number}, line {line}: {how}" for number, line, how in sorted(problems)]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_the_chapter_imports_manyheads_as_mh_and_calls_mh_name(path):
    assert import_style_problems(nbformat.read(path, as_version=4)) == []


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.parent.name)
def test_the_solution_imports_manyheads_as_mh_and_calls_mh_name_or_its_checks(path):
    assert import_style_problems(nbformat.read(path, as_version=4), frozenset({"checks"})) == []


def test_a_solution_may_call_a_check_but_not_reach_into_other_modules():
    cells = [nbformat.v4.new_code_cell("mh.checks.check_softmax(softmax)\nmh.interventions.gated(m, g)")]
    problems = import_style_problems(nbformat.v4.new_notebook(cells=cells), frozenset({"checks"}))
    assert problems == ["cell 0, line 2: mh.interventions.gated (call mh.<name>)"]


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from manyheads import glue", "cell 0, line 1: from manyheads import ..."),
        ("import manyheads as mh\nfrom manyheads.models import llama", "cell 0, line 2: from manyheads.models import"),
        ("import manyheads.viz as viz", "cell 0, line 1: import manyheads.viz as viz"),
        ("import manyheads", "cell 0, line 1: import manyheads as None"),
        ("import manyheads as mh\nmh.viz.attention_heatmap(w)", "cell 0, line 2: mh.viz.attention_heatmap"),
        ("mh.analysis.pruning.spearman(a, b)", "cell 0, line 1: mh.analysis.pruning"),
        ("mh.head_dimension(64, 8)", "cell 0, line 1: mh.head_dimension"),  # no such public name
    ],
)
def test_the_check_catches_every_other_form(source, caught):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    problems = import_style_problems(nb)
    assert len(problems) == 1 and problems[0].startswith(caught), problems


def test_the_one_form_passes():
    source = (
        "%matplotlib inline\nimport manyheads as mh\nmh.glue('d', mh.head_dim(64, 8))\nmh.TinyAttentionModel.for_task"
    )
    assert import_style_problems(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])) == []
