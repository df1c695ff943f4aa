"""Values quoted in the text of every chapter (1-7): ``glue(name, value)`` hands a computed value to the book.

In the built book, myst-nb's ``glue`` stores the value so that the prose can quote it ({glue:text}`name`): no number
is typed by hand. Colab does not have myst-nb (and installing it would pull Sphinx packages into a runtime that has
its own), so there the same call simply shows the value (or nothing, with ``display=False``) and the chapter runs
the same way.
"""

from __future__ import annotations

__all__ = ["glue", "glue_with_floor"]


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


def glue_with_floor(name: str, value, floor, display: bool = False) -> None:
    """Glue an instrument's score under ``name`` and the same instrument's floor (its score when the effect is
    absent: every head or all attention removed, or a reference such as uniform guessing for a loss) under
    ``<name>_floor``. A sentence that quotes ``name`` must quote ``<name>_floor`` in the same paragraph
    (tests/helpers/claims.py, rule 5; CONTRIBUTING, "An instrument carries its floor wherever it is used")."""
    if value is None or floor is None:
        raise ValueError(f"{name}: a score and its floor are both needed, got {value!r} and {floor!r}")
    glue(name, value, display=display)
    glue(f"{name}_floor", floor, display=False)
