"""The released student notebooks (exercises/NN/NN.ipynb, what students download) run top to bottom against the
package, with nbclient, as a student runs them (slow): answered with the solution, every visible check passes and
nothing fails; left blank, the only error is the stubs' NotImplementedError, in every check and test cell. This
catches a release that calls a check or package name that no longer exists, which no nbgrader run of the source
would see. The kernels are ipykernels forked from a template that imported torch (as the autograde tests')."""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from pathlib import Path

import nbformat
import pytest
from helpers.nbgrader_course import answered_release, forked_kernels, grade_id, read, student_namespace
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import manyheads as mh
from manyheads.course.exercises import EXERCISES, Exercise
from manyheads.course.layout import REPO
from manyheads_grader.execution.sandbox import PLAIN_KERNEL_NAME

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> dict[str, str]:
    """The environment of an ipykernel forked from a template with torch imported (the kernels of the autograde
    tests, helpers.nbgrader_course.forked_kernels), so that each notebook does not spend seconds importing torch."""
    with forked_kernels(tmp_path_factory.mktemp("kernels"), 1) as [(_, env)]:
        yield env


def _execute(
    exercise: Exercise, nb: nbformat.NotebookNode, allow_errors: bool, kernel: dict[str, str]
) -> nbformat.NotebookNode:
    path = REPO.release(exercise.stem)
    specs = KernelSpecManager(kernel_dirs=[str(Path(kernel["JUPYTER_PATH"]) / "kernels")])
    # the connection file in the template's runtime folder: the kernel's launcher looks for the template there
    connection = Path(kernel["JUPYTER_RUNTIME_DIR"]) / f"kernel-{uuid.uuid4()}.json"
    km = KernelManager(kernel_name=PLAIN_KERNEL_NAME, kernel_spec_manager=specs, connection_file=str(connection))
    try:
        NotebookClient(
            nb, km=km, timeout=300, allow_errors=allow_errors, resources={"metadata": {"path": str(path.parent)}}
        ).execute(env={**os.environ, **kernel})
    finally:  # nbclient leaves running a kernel whose manager it was given
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb


def _printed(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")


def _errors(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [
        (grade_id(cell) or str(i), out.ename)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_answered_release_passes_every_visible_check(exercise, kernel):
    nb = _execute(exercise, answered_release(exercise), allow_errors=False, kernel=kernel)  # raises on the first error
    assert _errors(nb) == []
    cells = {grade_id(c): c for c in nb.cells}
    solution = student_namespace(exercise)
    for part in exercise.code_parts:
        with contextlib.redirect_stdout(io.StringIO()) as passed:  # what the check prints for a right answer
            getattr(mh.checks, part.check)(solution[part.function])
        assert passed.getvalue().strip()
        for cell_id in (part.check_id, part.test_id):
            assert passed.getvalue() in _printed(cells[cell_id]), (cell_id, _printed(cells[cell_id]))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_blank_release_fails_only_with_not_implemented_error(exercise, kernel):
    nb = _execute(exercise, read(REPO.release(exercise.stem)), allow_errors=True, kernel=kernel)
    found = _errors(nb)
    # (an assignment graded only by hand, the capstone, has no answer that raises: it runs to the end)
    assert {name for _, name in found} == ({"NotImplementedError"} if exercise.code_parts else set()), found
    # every check and test cell; cells that use the answers afterwards (none graded) raise it too
    assert {i for p in exercise.code_parts for i in (p.check_id, p.test_id)} <= {cell for cell, _ in found}, found
