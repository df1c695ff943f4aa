"""The exercises' tests: every test is parametrised over the exercise descriptions (EXERCISES), with the cases of
cases.py. ``autograded`` runs real nbgrader once per pytest run over every exercise, whichever worker asks first."""

from __future__ import annotations

import cases
import pytest
from helpers.nbgrader_course import autograde_submissions, once_per_run

from manyheads.course.exercises import EXERCISES, Exercise


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    """``autograded(exercise)``: what nbgrader decided for the exercise's solution, blank release and every
    submission of :func:`cases.submissions` (see :func:`helpers.nbgrader_course.autograde_submissions`, which grades
    every exercise in one nbgrader course)."""
    found: dict[str, dict] = {}

    def get(exercise: Exercise) -> dict:
        if not found:
            answers = {e: {student: s.answers for student, s in cases.submissions(e.stem).items()} for e in EXERCISES}
            found.update(
                once_per_run(
                    tmp_path_factory,
                    worker_id,
                    "autograde-exercises",
                    lambda: autograde_submissions(tmp_path_factory.mktemp("course"), answers),
                )
            )
        return found[exercise.stem]

    return get
