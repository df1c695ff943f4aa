"""Cells run in a real Jupyter kernel (nbclient), as a notebook front end runs them: what each cell's outputs are
(``argv`` starts another environment's kernel, the Colab replay's with IPython 7.34; by default this environment's).

With them, the cells of a failed visible check and what every front end must show for them (issue 38, item 3;
manyheads.checks.display): tests/package/test_check_messages.py here, tests/book/test_colab_replay.py under Colab's
IPython."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat


def run_cells(cells: list[str], argv: list[str] | None = None, env: dict | None = None) -> list[list[dict]]:
    """Each cell's outputs after running ``cells`` in order in one kernel (errors do not stop the run)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    argv = argv or [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with tempfile.TemporaryDirectory(prefix="mh-kernel-") as tmp:
        spec = Path(tmp) / "kernels" / "cells"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "cells", "language": "python"}))
        km = KernelManager(kernel_name="cells", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
        client = NotebookClient(nb, km=km, timeout=120, allow_errors=True, resources={"metadata": {"path": tmp}})
        try:
            client.execute(env=env if env is not None else dict(os.environ))  # None: nbclient waits for ever
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
    return [list(c.outputs) for c in nb.cells]


WRONG_AXIS = "def softmax(scores):\n    e = torch.exp(scores)\n    return e / e.sum(dim=0, keepdim=True)"
RAISES = "def softmax(scores):\n    e = torch.exp(scores)\n    total = e.sum(dim=-1)\n    return e / total"
CHECK = "mh.checks.check_softmax(softmax)"
CELLS = [
    "import torch\nimport manyheads as mh",
    WRONG_AXIS,
    CHECK,  # 2: a wrong value
    RAISES,
    CHECK,  # 4: the student's function raises inside the check
    "x = 1\nassert x == 2, 'x should be 2'",  # 5: a plain assertion (a hidden test's form), no check involved
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def traceback_of(outputs: list[dict]) -> list[str]:
    [error] = [o for o in outputs if o["output_type"] == "error"]
    return [ANSI.sub("", line) for line in error["traceback"]]


def assert_short(outputs: list[list[dict]]) -> None:
    """What every front end shows for the cells of ``CELLS``."""
    wrong = traceback_of(outputs[2])
    assert wrong == [
        "AssertionError: each row should sum to 1, but the sums range from 0.0678 to 4.9322: divide by the sum over "
        "the last axis (keepdim=True)",
        "  your softmax, line 3: return e / e.sum(dim=0, keepdim=True)",
        "  (checked in this cell, line 1)",
    ], wrong
    raised = traceback_of(outputs[4])
    assert len(raised) == 3 and raised[0].startswith("AssertionError: softmax raised RuntimeError on scores"), raised
    assert raised[1:] == ["  your softmax, line 4: return e / total", "  (checked in this cell, line 1)"], raised
    text = "\n".join(wrong + raised)
    for check_source in ("raise AssertionError", "manyheads/checks", "call_student", "direct cause", "Traceback"):
        assert check_source not in text, check_source
    assert traceback_of(outputs[5]) == ["AssertionError: x should be 2", "  (checked in this cell, line 2)"]
