"""A time budget per notebook as well as per cell (issue 26, item 3): nbgrader's ``Execute``, with a shorter limit for
every cell after a notebook's first timeout, and a message a student can read instead of ``KeyboardInterrupt``.

The choice: a cell still gets the full per-cell limit (``--timeout``, 60 s) until one cell of the notebook runs past
it; from then on each remaining cell gets at most :data:`AFTER_TIMEOUT` (5 s). An infinite loop in an answer is
met again by every test cell that calls the answer: with 60 s per cell, four such cells cost four minutes (issue 26's
Canvas class: 277 s for six notebooks against 32 s without the looping one); with this budget they cost
60 + 3 × 5 = 75 s. A cap on the notebook's total time (90 s) was the alternative; it was not chosen because it
would also cut a notebook whose cells are all slow but each within the limit (a student on a slow answer, or a
heavier exercise), which never looped and loses nothing here: only a notebook whose own code has already run past
the full limit gets the short one. The cells' budget is stated in the message, so the student knows why.

:func:`configure` puts :class:`BudgetedExecute` in place of nbgrader's ``Execute`` in an ``nbgrader_config.py``;
every ``--Execute.*`` option (timeout, kernel name, extra arguments) still applies to it.
"""

from __future__ import annotations

from pathlib import Path

from nbgrader.preprocessors import Execute
from traitlets import Integer

AFTER_TIMEOUT = 5  # seconds for each cell after a notebook's first timeout
ENAME = "TimeoutError"  # the error a timed-out cell shows (notebooks.cell_outcomes, report.py and feedback.py read it)
_INTERRUPTED = {"KeyboardInterrupt", "CellTimeoutError"}


def timeout_message(seconds: int, after_first: bool = False) -> str:
    """What the student and the report read for a cell stopped after ``seconds``."""
    text = f"this cell ran longer than {seconds} s (an infinite loop?) and was stopped"
    if after_first:
        text += f"; after a first cell of this notebook ran out of time, the others get {seconds} s each"
    return text


class BudgetedExecute(Execute):
    """nbgrader's Execute with :data:`AFTER_TIMEOUT` per cell after the notebook's first timeout."""

    after_timeout = Integer(AFTER_TIMEOUT, help="seconds per cell after the notebook's first timeout").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped: dict[int, int] = {}  # id(cell) -> the limit it ran past
        nb, resources = super().preprocess(nb, resources, km)
        first = True
        for cell in nb.cells:
            if id(cell) in self._stopped:
                _explain(cell, self._stopped[id(cell)], after_first=not first)
                first = False
        return nb, resources

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        if getattr(self, "_stopped", None) and timeout is not None and timeout > 0:
            return min(timeout, self.after_timeout)
        return timeout

    async def _async_handle_timeout(self, timeout, cell=None):
        if cell is not None:
            self._stopped[id(cell)] = int(timeout)
        return await super()._async_handle_timeout(timeout, cell)


def _explain(cell, seconds: int, after_first: bool) -> None:
    """Replace the interrupt's traceback (and nbgrader's CellTimeoutError) with one readable error output."""
    kept = [
        o for o in cell.get("outputs", []) if not (o.get("output_type") == "error" and o.get("ename") in _INTERRUPTED)
    ]
    message = timeout_message(seconds, after_first)
    from nbformat.v4 import new_output

    kept.append(new_output("error", ename=ENAME, evalue=message, traceback=[f"{ENAME}: {message}"]))
    cell.outputs = kept


_BEGIN = "# >>> manyheads: a time budget per notebook (manyheads grade)"
_END = "# <<< manyheads: time budget"


def use_budget(config: Path) -> None:
    """Make ``nbgrader autograde`` in the course of ``config`` (an nbgrader_config.py) run BudgetedExecute."""
    from nbgrader.converters.autograde import Autograde

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    names = [
        f"{__name__}.BudgetedExecute" if cls is Execute else f"{cls.__module__}.{cls.__qualname__}" for cls in default
    ]
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    if _BEGIN in text and _END in text:
        before, rest = text.split(_BEGIN, 1)
        text = before.rstrip("\n") + "\n" + rest.split(_END, 1)[1].lstrip("\n")
    text = text.rstrip("\n") + f"\n\n{_BEGIN}\nc.Autograde.autograde_preprocessors = {names!r}\n{_END}\n"
    config.write_text(text, encoding="utf-8")
