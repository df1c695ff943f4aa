"""The one registry of public names: what a chapter reaches as ``mh.<name>`` is what its module lists in ``__all__``.

A module's ``__all__`` is the only list of its public names. Each package's ``__init__`` hands them on with
:func:`hand_on` instead of re-listing them: ``manyheads.viz.glue`` (the function) because ``viz/glue.py`` lists
``glue``, and ``manyheads.glue`` because the top package hands on its subpackages' names too. The names are read from
the modules' source (a literal ``__all__ = [...]``), not by importing them, and a module is imported on the first
use of one of its names, so ``import manyheads`` imports neither torch nor matplotlib. A name listed by two modules,
or a name that hides a module of the same package, stops the import with an error that names both.
``tests/package/test_layout.py`` checks that the names read here are the modules' ``__all__`` once imported.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable
from pathlib import Path

__all__ = ["PublicNameError", "declared_names", "hand_on", "public_names", "submodules"]

ROOT = Path(__file__).parent  # the folder of the package `manyheads`

# `__all__ = [...]` or `(...)` at the start of a line; no public name holds a bracket, so the first closing one ends it
_ALL = re.compile(r"^__all__\s*=\s*(\[[^\]]*\]|\([^)]*\))", re.MULTILINE)


class PublicNameError(ImportError):
    """A module's public names cannot be read, or two modules claim one name."""


def declared_names(path: Path) -> list[str]:
    """The names a module's ``__all__`` lists, read from its source without importing it."""
    found = _ALL.findall(Path(path).read_text(encoding="utf-8"))
    if len(found) != 1:
        raise PublicNameError(f"{path} must assign __all__ once, as a literal list of names (found {len(found)})")
    try:
        names = ast.literal_eval(found[0])
    except (SyntaxError, ValueError) as exc:
        raise PublicNameError(f"{path}: __all__ is not a literal list of names ({exc})") from None
    if not all(isinstance(n, str) and n.isidentifier() for n in names) or len(set(names)) != len(names):
        raise PublicNameError(f"{path}: __all__ must list distinct names, each once: {names!r}")
    return list(names)


def submodules(folder: Path) -> tuple[list[str], list[str]]:
    """(modules, subpackages) of the package in ``folder``, by name; private ones (``_x``) left out."""
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    packages = sorted(p.name for p in folder.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))
    return modules, packages


def public_names(folder: Path, package: str, subpackages: tuple[str, ...] = ()) -> dict[str, str]:
    """{public name: the module that defines it} for the package ``package`` in ``folder``: every module's
    ``__all__``, and the names of the listed ``subpackages`` (each handed on the same way)."""
    names: dict[str, str] = {}
    sources = [(f"{package}.{m}", declared_names(folder / f"{m}.py")) for m in submodules(folder)[0]]
    for sub in subpackages:
        inner = public_names(folder / sub, f"{package}.{sub}")
        sources += [(module, [n for n, m in inner.items() if m == module]) for module in dict.fromkeys(inner.values())]
    for module, listed in sources:
        for name in listed:
            if name in names:
                raise PublicNameError(
                    f"{name!r} is public in both {names[name]} and {module}: one name, one contract; rename one "
                    f"(or drop it from one module's __all__)"
                )
            names[name] = module
    return names


def hand_on(namespace: dict, subpackages: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str], Callable, Callable]:
    """Make a package's ``__init__`` (its ``globals()``) hand on its modules' public names, each loaded on first use.

    Returns ``(names, __all__, __getattr__, __dir__)`` for the package to bind: ``names`` maps each public name to
    its module; ``__all__`` is every public name and every submodule; ``__getattr__`` imports a name's module (or a
    submodule) when it is first asked for; ``__dir__`` lists ``__all__``, so ``dir()`` and tab completion show them.
    """
    package = namespace["__name__"]
    folder = Path(namespace["__file__"]).parent
    names = public_names(folder, package, subpackages)
    modules, packages = submodules(folder)
    children = set(modules) | set(packages)
    for name in sorted(names.keys() & children):
        if names[name] != f"{package}.{name}":
            raise PublicNameError(f"{name!r} is both {package}.{name} and a public name of {names[name]}: rename one")
        # `viz.glue` the function, defined in `viz/glue.py`: bind it now, since importing the module later would
        # set the attribute to the module (the import system's rule) and hide the function.
        namespace[name] = getattr(importlib.import_module(names[name]), name)
    public = sorted(children | names.keys())

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        if name in children:
            return importlib.import_module(f"{package}.{name}")  # the import sets the attribute, too
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return public

    return names, public, __getattr__, __dir__
