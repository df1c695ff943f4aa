"""Shared test set-up. The tests mirror the package: package/ (the manyheads modules), exercises/ (one description
of every exercise, real nbgrader), course/ (hygiene, release, grading), book/ (chapters executed once, the built book).
Helper modules live in helpers/ (tests/ is on sys.path through pyproject's pytest ``pythonpath``)."""

import pytest

# pytest's detailed assertion messages also inside the helper modules the tests import.
pytest.register_assert_rewrite("helpers.nbgrader_course", "helpers.grading_corpus")
