"""Per-chapter evidence checks: what a chapter's summary, boxes and quizzes say, against what its experiments measured.

One module per chapter, named after its stem with a leading ``ch_`` (``ch_05_pruning.py``), holding
``check(glued: dict[str, float | str], nb) -> list[str]``: the problems found in the executed notebook ``nb`` whose
glued values are ``glued`` (name -> the value as a Python number when it parses as one, else its text). An empty
list means the chapter's words agree with its numbers. tests/book/test_book.py runs each module over the book it
built; each module's own planted cases (a contradiction that must be caught) live in tests/book/test_evidence.py.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def module_for(stem: str) -> ModuleType | None:
    """The evidence module of chapter ``stem``, or None when the chapter has none yet."""
    try:
        return importlib.import_module(f"helpers.evidence.ch_{stem}")
    except ModuleNotFoundError as error:
        if error.name != f"helpers.evidence.ch_{stem}":
            raise
        return None


def numbers(glued: dict[str, dict]) -> dict[str, float | str]:
    """Glued values (as helpers.claims.glued_values returns them) as numbers where their text parses as one."""
    out: dict[str, float | str] = {}
    for name, bundle in glued.items():
        text = str(bundle.get("text/plain", "")).strip().strip("'\"")
        try:
            out[name] = float(text.rstrip("%").replace(",", ""))
        except ValueError:
            out[name] = text
    return out
