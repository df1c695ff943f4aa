"""Values quoted in the text of every chapter (1-7): ``glue(name, value)`` hands a computed value to the book.

In the built book, myst-nb's ``glue`` stores the value so that the prose can quote it ({glue:text}`name`): no number
is typed by hand. Colab does not have myst-nb (and installing it would pull Sphinx packages into a runtime that has
its own), so there the same call simply shows the value (or nothing, with ``display=False``) and the chapter runs
the same way.
"""

from __future__ import annotations

__all__ = ["glue"]


def glue(name: str, value, display: bool = True) -> None:
    """myst-nb's ``glue(name, value, display)`` where myst-nb is installed; elsewhere only shows ``value``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"glue needs a non-empty name (str) for the value, got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # Colab, or a plain Jupyter: nothing to store the value for
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
