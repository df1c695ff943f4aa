"""The order in which pytest-xdist hands out test files (``--dist loadfile --no-loadscope-reorder``): the ``first``
files of tests/budget.toml's ``[schedule]`` at the front, in its order, its ``last`` files at the end, the rest as
collected. tests/conftest.py applies it to every run's collection."""

from __future__ import annotations

from pathlib import Path

BUDGET = Path(__file__).resolve().parents[1] / "budget.toml"


def schedule(budget: Path = BUDGET) -> dict[str, list[str]]:
    import tomllib  # Python 3.11+, as the development environment

    with open(budget, "rb") as f:
        found = tomllib.load(f).get("schedule", {})
    return {"first": found.get("first", []), "last": found.get("last", [])}


def order(items: list, budget: Path = BUDGET) -> None:
    """Sort pytest items (anything with a ``nodeid``) in place; a stable sort keeps the order within each file."""
    first, last = schedule(budget).values()

    def rank(item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        if path in first:
            return (0, first.index(path))
        if path in last:
            return (2, last.index(path))
        return (1, 0)

    items.sort(key=rank)
