"""Shared test set-up. The tests mirror the package: package/ (the manyheads modules), exercises/ (one description
of every exercise, real nbgrader), course/ (hygiene, release, grading), book/ (chapters executed once, the built book).
Helper modules live in helpers/ (tests/ is on sys.path through pyproject's pytest ``pythonpath``)."""

import pytest

# pytest's detailed assertion messages also inside the helper modules the tests import.
pytest.register_assert_rewrite("helpers.nbgrader_course", "helpers.grading_corpus")


def pytest_configure(config):
    """One training cache for the whole run (manyheads.training): a notebook that trains the same model as an
    earlier one (the exercise's read-only cells, in every graded submission) loads it. The pytest-xdist workers
    inherit the controller's environment, so they share the folder; a new run starts empty, so every model is
    still trained for real once per run. The package's own training tests turn it off (tests/package/conftest.py)."""
    import os
    import tempfile
    import uuid

    from manyheads.training import CACHE_ENV

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    os.environ.setdefault(CACHE_ENV, os.path.join(tempfile.gettempdir(), f"manyheads-train-cache-{run}"))
