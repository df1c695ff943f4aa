"""A failed visible check, as a student sees it in the notebook (issue 38, item 3; manyheads.checks.display): one
short message, then the student's own line, once; no traceback printed twice, no line of the check's own source.
Run in a real kernel of this environment (IPython 8/9, as a local JupyterLab); the same cells under Colab's IPython
7.34 run in tests/book/test_colab_replay.py (``CELLS`` and ``assert_short``: helpers/kernel_cells.py)."""

from __future__ import annotations

from helpers.kernel_cells import CELLS, CHECK, assert_short, run_cells, traceback_of


def test_a_failed_check_shows_one_message_and_the_students_line():
    assert_short(run_cells(CELLS))


def test_other_errors_keep_ipythons_traceback():
    """Only assertions (what checks and hidden tests raise) are shortened; a student's own error keeps its frames."""
    outputs = run_cells([*CELLS[:2], CHECK, "def f():\n    return 1 / 0\nf()"])
    lines = traceback_of(outputs[3])
    assert any("ZeroDivisionError" in line for line in lines) and any("return 1 / 0" in line for line in lines)
