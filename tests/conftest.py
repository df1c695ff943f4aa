"""Shared test set-up: pytest's detailed assertion messages also inside the helper modules the tests import."""

import pytest

pytest.register_assert_rewrite("nbgrader_course", "grading_corpus")
