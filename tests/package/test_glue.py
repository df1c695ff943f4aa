"""manyheads.glue (every chapter): myst-nb's glue in the book, a plain display where myst-nb is missing (Colab)."""

from __future__ import annotations

import builtins
import sys

import pytest

from manyheads import glue


def test_in_the_book_the_value_is_stored_for_the_text(capsys):
    # myst-nb records a glued value as a display output whose metadata names it (read by the book's {glue:} roles).
    shown = []
    ipython_display = pytest.importorskip("IPython.display")
    original = ipython_display.display
    ipython_display.display = lambda *a, **k: shown.append((a, k))
    try:
        glue("answer", 42, display=False)
    finally:
        ipython_display.display = original
    assert shown and shown[0][1]["metadata"]["scrapbook"]["name"] == "answer"


def test_without_myst_nb_it_shows_the_value_or_nothing(monkeypatch, capsys):
    real_import = builtins.__import__

    def no_myst_nb(name, *args, **kwargs):
        if name == "myst_nb" or name.startswith("myst_nb."):
            raise ImportError("No module named 'myst_nb'")  # as in Colab
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst_nb)
    monkeypatch.delitem(sys.modules, "myst_nb", raising=False)
    glue("hidden", 41, display=False)
    assert capsys.readouterr().out == ""
    glue("shown", 43)
    assert capsys.readouterr().out.strip() == "43"


def test_a_missing_name_is_refused():
    with pytest.raises(TypeError, match="non-empty name"):
        glue("", 1)
