"""Per-chapter evidence checks: what a chapter's summary, boxes and quizzes say, against what its experiments measured.

One module per chapter, named after its stem with a leading ``ch_`` (``ch_05_pruning.py``), holding
``check(glued: dict[str, float | str], nb) -> list[str]``: the problems found in the executed notebook ``nb`` whose
glued values are ``glued`` (name -> the value as a Python number when it parses as one, else its text). An empty
list means the chapter's words agree with its numbers. tests/book/test_book.py runs each module over the book it
built; each module's own planted cases (a contradiction that must be caught) live in tests/book/test_evidence.py.
"""

from __future__ import annotations

import importlib
import re
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


# The share each word allows (the chapters' words come from manyheads.analysis.claims.share_words).
SHARE = {"all": (1.0, 1.0), "none": (0.0, 0.0), "nearly all": (0.9, 1.0), "most": (0.5, 1.0), "a minority": (0.0, 0.5)}


def render_glue(text: str, glued: dict) -> str:
    """Markdown with each {glue:text}`name:fmt` role replaced by the glued value, as the page shows it."""

    def value(match: re.Match) -> str:
        name, _, fmt = match.group(1).partition(":")
        v = glued.get(name, f"<{name}?>")
        if fmt and isinstance(v, float):
            try:
                return format(v, fmt)
            except ValueError:
                return str(v)
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    return re.sub(r"\{glue:text\}`([^`]+)`", value, text)
