"""The exercises' visible checks: ``mh.checks.check_<part>(student_function)``, one module per exercise on one core.

This flat namespace is the one path the exercises' check cells use, and it stays stable (instructors' gradebooks
keep those cells): an exercise module may move, its check functions stay reachable here. Each check runs the
student's function on small fixed inputs and prints a one-line success message, or raises ``AssertionError``
naming the likely bug; an unanswered stub's ``NotImplementedError`` passes through unchanged. The checks are hints,
not grades: the hidden tests that grade an exercise use other, random inputs.

Modules: :mod:`~manyheads.checks.core` (shared building blocks), :mod:`~manyheads.checks.single_head_bottleneck`
(exercise 1), :mod:`~manyheads.checks.subspaces` (2), :mod:`~manyheads.checks.head_size` (3),
:mod:`~manyheads.checks.specialization` (4), :mod:`~manyheads.checks.pruning` (5),
:mod:`~manyheads.checks.layer_hierarchy` (6), :mod:`~manyheads.checks.grouped_query_attention` (7);
:mod:`~manyheads.checks.display` (how a failed check shows in a notebook: one message and the student's line); and
:mod:`~manyheads.checks.own_work` (the own-work rule's guard, which the checks and the grader's kernels install).

The names come from the exercises' descriptions (:data:`manyheads.course.exercises.EXERCISES`: a new exercise's checks
module is found there) and load on first use (``__getattr__`` below): importing this package imports no exercise
module, so ``manyheads.checks.own_work`` (the own-work guard) stays light for the grader, which never imports torch.
"""

from __future__ import annotations

import importlib

from manyheads.course.exercises import EXERCISES as _EXERCISES

# check name -> the exercise's module (manyheads.checks.<stem without its number>), read from the exercises'
# descriptions; each module's __all__ lists its checks, and a test keeps the two in step
_CHECKS = {part.check: exercise.checks_module for exercise in _EXERCISES for part in exercise.code_parts}
__all__ = list(_CHECKS)


_MODULES = {*_CHECKS.values(), "core", "display", "own_work"}  # mh.checks.<module> works too, as after an eager import


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"manyheads.checks.{name}")  # the import sets the attribute
    module = _CHECKS.get(name)
    if module is None:
        raise AttributeError(f"module 'manyheads.checks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"manyheads.checks.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CHECKS))
