"""How a failed check of exercises 1-7 shows in a notebook (issue 38, item 3): one short message, then the student's
own line, once.

IPython's own traceback of a failed visible check shows the check's source around its ``raise``, and, where the
student's function raised inside the check, both tracebacks one after the other ("The above exception was the
direct cause of the following exception"). Neither helps a student. :func:`install_short_tracebacks` registers
:func:`short_traceback` with the running IPython shell (``InteractiveShell.set_custom_exc``) for ``AssertionError``,
which every check and hidden test raises; IPython then shows, and ipykernel stores in the notebook's error output
(what nbgrader grades and the feedback reads), three lines at most:

    AssertionError: each row should sum to 1, but the sums range from 0.0678 to 4.9322: divide by ...
      your softmax, line 3: return e / e.sum(dim=0, keepdim=True)
      (checked in this cell, line 1)

The student's line is the deepest line of the traceback (or of the error it was raised from) that lies in a cell
other than the one that ran the check: their function's code. Where the function did not raise (it returned a wrong
value) and a check raised, it is the last ``return`` of the function the check called last (:func:`remember`). The
cell that ran the check is the one executing; its line says whether the visible check or a hidden test failed (the
grader's feedback reads it). Outside IPython nothing changes. The handler is written for the IPython versions the
course meets (Colab's 7.34 and the 8 and 9 of a local JupyterLab) and imports nothing heavy.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types
from pathlib import Path

__all__ = ["install_short_tracebacks", "remember", "short_traceback", "student_line"]

_last: list = [None]  # the student's function a check called last (remember)
_CHECKS = str(Path(__file__).resolve().parent)  # a frame in this folder is a check's


def remember(fn) -> None:
    """The student's function a check is about to call: where a wrong value came from, if the check fails."""
    _last[0] = fn


def _is_cell(filename: str) -> bool:
    """Code IPython compiled from a cell, never a file on disk: IPython 8 and 9 keep it in linecache without a
    modification time, 7 (Colab's) in ``linecache._ipython_cache`` as well."""
    entry = linecache.cache.get(filename)
    if entry is None or len(entry) != 4:
        return False
    return entry[1] is None or filename in getattr(linecache, "_ipython_cache", {})


def _frames(tb: types.TracebackType | None) -> list[tuple[str, str, int]]:
    found = []
    while tb is not None:
        code = tb.tb_frame.f_code
        found.append((code.co_filename, code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    return found


def _line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


def _last_return(fn) -> tuple[int, str] | None:
    """(line within its cell, source) of the function's last ``return`` statement; None if it cannot be read."""
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    returns = [n for n in ast.walk(tree) if isinstance(n, ast.Return)]
    if not returns:
        return None
    node = max(returns, key=lambda n: n.lineno)
    return start + node.lineno - 1, lines[node.lineno - 1].strip()


def student_line(value: BaseException, tb: types.TracebackType | None) -> str | None:
    """``your NAME, line N: CODE`` for the student's line behind the failure, or None when there is none."""
    frames = _frames(tb)
    cells = [f for f in frames if _is_cell(f[0])]
    top = cells[0][0] if cells else None  # the cell that ran the check
    chain, error = [], value
    while error is not None and len(chain) < 5:  # the error and those it was raised from, innermost last
        chain.append(error)
        error = error.__cause__ or error.__context__
    for error in reversed(chain):
        theirs = [f for f in _frames(error.__traceback__) if _is_cell(f[0]) and f[0] != top]
        if theirs:
            filename, name, lineno = theirs[-1]
            where = "your code" if name == "<module>" else f"your {name}"
            return f"{where}, line {lineno}: {_line(filename, lineno)}"
    if not any(f[0].startswith(_CHECKS) for f in frames):
        return None  # not raised by a check: the function a check called last has nothing to do with it
    fn = _last[0]
    code = getattr(fn, "__code__", None)
    if code is not None and _is_cell(code.co_filename) and code.co_filename != top:
        found = _last_return(fn)
        if found is not None:
            return f"your {fn.__name__}, line {found[0]}: {found[1]}"
    return None


def short_traceback(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """Show, and return, the structured traceback for a failed check: the message, the student's line, and where in
    the checking cell it failed. The ``set_custom_exc`` handler's signature; such a handler shows what it returns
    itself (IPython 7 to 9 call it and drop the result)."""
    message = str(value).strip()
    lines = [f"{etype.__name__}: {message}" if message else etype.__name__]
    theirs = student_line(value, tb)
    if theirs:
        lines.append(f"  {theirs}")
    cells = [f for f in _frames(tb) if _is_cell(f[0])]
    if cells:
        lines.append(f"  (checked in this cell, line {cells[0][2]})")
    shell._showtraceback(etype, value, lines)  # what IPython would do with its own (printed, or the error output)
    return lines


def install_short_tracebacks() -> None:
    """Show failed checks this way in the running IPython shell, if there is one (idempotent, silent outside)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "_manyheads_short_traceback", False):
        return
    shell.set_custom_exc((AssertionError,), short_traceback)
    shell._manyheads_short_traceback = True
