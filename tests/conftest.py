"""Shared test set-up. The tests mirror the package: package/ (the manyheads modules), exercises/ (one description
of every exercise, real nbgrader), course/ (hygiene, release, grading), book/ (chapters executed once, the built book).
Helper modules live in helpers/ (tests/ is on sys.path through pyproject's pytest ``pythonpath``)."""

import json
import os

import pytest

# pytest's detailed assertion messages also inside the helper modules the tests import.
pytest.register_assert_rewrite("helpers.nbgrader_course", "helpers.grading_corpus")


def pytest_configure(config):
    """One training cache for the whole run (manyheads.training): a notebook that trains the same model as an
    earlier one (the exercise's read-only cells, in every graded submission) loads it. The pytest-xdist workers
    inherit the controller's environment, so they share the folder; a new run starts empty, so every model is
    still trained for real once per run. The package's own training tests turn it off (tests/package/conftest.py)."""
    import tempfile
    import uuid

    from manyheads.training import CACHE_ENV

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    os.environ.setdefault(CACHE_ENV, os.path.join(tempfile.gettempdir(), f"manyheads-train-cache-{run}"))


# Each test phase's worker, start and stop, for tools/test_budget.py (which worker was busy when, and with what).
TIMELINE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_build", "test-timeline.jsonl")


def _controller() -> bool:
    return "PYTEST_XDIST_WORKER" not in os.environ  # the controller, or a run without pytest-xdist


def pytest_sessionstart(session):
    if _controller():
        os.makedirs(os.path.dirname(TIMELINE), exist_ok=True)
        open(TIMELINE, "w").close()


def pytest_runtest_logreport(report):
    if _controller() and getattr(report, "start", None):
        worker = getattr(getattr(report, "node", None), "gateway", None)
        row = {"test": report.nodeid, "when": report.when, "start": report.start, "stop": report.stop}
        row["worker"] = worker.id if worker else "main"
        with open(TIMELINE, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def pytest_collection_modifyitems(session, config, items):
    """Files that take minutes first, files that read the built book last (tests/helpers/schedule.py)."""
    from helpers.schedule import order

    order(items)
