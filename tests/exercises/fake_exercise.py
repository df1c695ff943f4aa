"""A fake exercise, added the way a contributor adds one: a description entry, a notebook and its checks module.

:func:`write_course` lays out a course folder holding the real assignments (linked) and this one's notebook (and
its release) and checks module. Loaded as a pytest plugin (``-p fake_exercise``, with ``FAKE_COURSE`` naming that
folder) it makes the description hold the entry, this checkout's layout point at that folder and ``mh.checks`` find
the new module, as if they had been there all along: nothing else is told about the exercise.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat

from manyheads.course.exercises import CodePart, Exercise, WrittenPart
from manyheads.course.layout import REPO

FAKE = Exercise(
    "09_fake_doubling",
    (CodePart("double", "check_double", "test_double", 1, signature="x", forms=("float32 x (3,)",)),),
    (WrittenPart("why_double", 1),),
)

CHECKS_MODULE = '''"""Visible checks of the fake exercise 9 (doubling), reached as ``mh.checks.<name>``."""

from __future__ import annotations

import torch

from manyheads.checks.core import call_student, close_to, fixed_randn, report_passed, require_tensor

__all__ = ["check_double"]


def check_double(double) -> None:
    """Visible test for exercise 9, part 1: ``double(x)`` is 2 x, in x's dtype."""
    x = fixed_randn(2, 3, seed=0)
    got = require_tensor("double's result", call_student(double, "x of shape (2, 3)", x))
    if not close_to(got, 2 * x):
        raise AssertionError("double(x) should be 2 * x for x of shape (2, 3)")
    x32 = fixed_randn(3, seed=1).float()
    got = require_tensor("double's result", call_student(double, "float32 x (3,)", x32))
    if got.dtype != torch.float32 or not close_to(got, 2 * x32):
        raise AssertionError("wrong result for float32 x (3,): keep the input's dtype")
    report_passed("check_double")
'''

_HEADER = "# Exercise 9: doubling\n\nA fake exercise for the tests."
_PART = (
    "## Part 1: doubling\n\n**1 point · difficulty ★☆☆ · about 2 minutes**\n\nReturn twice `x`, in `x`'s dtype.\n\n"
    "<details><summary>Hint</summary>Multiply by 2.</details>"
)
_IMPORTS = "# Imports for the whole exercise (read-only).\nimport math\n\nimport torch\n\nimport manyheads as mh"
_ANSWER = 'def double(x):\n    """2 x."""\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION'
_CHECK = "# Visible check for Part 1 (runs anywhere, no grader needed).\nmh.checks.check_double(double)"
_TEST = (
    '"""Part 1 (1 point): double on hidden inputs."""\n'
    "mh.checks.check_double(double)\n"
    "### BEGIN HIDDEN TESTS\n"
    "_x = torch.randn(4, 5, dtype=torch.float64)\n"
    'assert torch.allclose(double(_x), 2 * _x), "double(x) is not 2 x"\n'
    "### END HIDDEN TESTS"
)
_PROMPT = "## Part 2: why double?\n\n**1 point · about 2 minutes**\n\nSay why in one sentence."
_WRITTEN = "Because it is the simplest exercise there is.\n\n*Grading (1 point):* 1 for any sentence."


def _cell(kind: str, source: str, grade_id: str | None = None, **flags) -> nbformat.NotebookNode:
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    if grade_id is not None:
        grading = {"grade": False, "locked": False, "solution": False, "schema_version": 3, **flags}
        cell.metadata["nbgrader"] = {**grading, "grade_id": grade_id}
    return cell


def notebook() -> nbformat.NotebookNode:
    """The fake exercise's nbgrader source: an imports cell, one code part, one written part."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("markdown", _HEADER),
        _cell("code", _IMPORTS, "imports", locked=True),
        _cell("markdown", _PART),
        _cell("code", _ANSWER, "double", solution=True),
        _cell("code", _CHECK, "check_double", locked=True),
        _cell("code", _TEST, "test_double", grade=True, locked=True, points=1),
        _cell("markdown", _PROMPT),
        _cell("markdown", _WRITTEN, "why_double", grade=True, solution=True, points=1),
    ]
    return nb


def released(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """What nbgrader's release makes of it: stubs for solutions, no hidden tests, blank written answers."""
    out = nbformat.from_dict(nbformat.v4.new_notebook())
    out.cells = []
    for cell in nb.cells:
        cell = nbformat.from_dict(dict(cell))
        grading = cell.metadata.get("nbgrader", {})
        if grading.get("solution") and cell.cell_type == "code":
            cell.source = re.sub(
                r"( *)### BEGIN SOLUTION.*?### END SOLUTION",
                r"\1# YOUR CODE HERE\n\1raise NotImplementedError()",
                cell.source,
                flags=re.S,
            )
        elif grading.get("solution"):
            cell.source = "YOUR ANSWER HERE"
        cell.source = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", "", cell.source, flags=re.S)
        out.cells.append(cell)
    return out


def write_course(root: Path) -> Path:
    """A course folder: this checkout's assignments (linked), the fake's notebooks and its checks module."""
    for folder in (REPO.SOURCE, REPO.RELEASE):
        (root / folder).mkdir(parents=True)
        for stem in REPO.assignments():
            (root / folder / stem).symlink_to(REPO.root / folder / stem)
    (root / REPO.CONFIG_FILE).symlink_to(REPO.config_file)
    source = notebook()
    for folder, nb in ((REPO.SOURCE, source), (REPO.RELEASE, released(source))):
        path = root / folder / FAKE.stem / f"{FAKE.stem}.ipynb"
        path.parent.mkdir()
        nbformat.write(nb, path)
    (root / "checks").mkdir()
    (root / "checks" / f"{FAKE.checks_module}.py").write_text(CHECKS_MODULE)
    return root


def _install(root: Path) -> None:
    """The description holds FAKE, the layout is ``root``, and ``mh.checks`` also looks in ``root/checks``."""
    import manyheads.course.exercises as exercises

    original = exercises.EXERCISES
    for module in list(sys.modules.values()):  # every module that took the description's tuple by name
        if isinstance(vars(module).get("EXERCISES"), tuple) and vars(module)["EXERCISES"] is original:
            module.EXERCISES = (*original, FAKE)
    object.__setattr__(REPO, "root", root)

    import importlib

    import manyheads.checks as checks

    importlib.reload(checks)  # its names are read from the description when it loads
    checks.__path__.append(str(root / "checks"))


if os.environ.get("FAKE_COURSE"):
    _install(Path(os.environ["FAKE_COURSE"]))
