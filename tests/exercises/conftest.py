"""The exercises' tests: every test is parametrised over the exercise descriptions (EXERCISES), with the cases of
cases.py. ``autograded`` runs real nbgrader once per exercise and pytest run, whichever worker asks first."""

from __future__ import annotations

import cases
import pytest
from helpers.nbgrader_course import autograde_submissions, once_per_run

from manyheads.course.exercises import Exercise


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    """``autograded(exercise)``: what nbgrader decided for the exercise's solution, blank release and every
    submission of :func:`cases.submissions` (see :func:`helpers.nbgrader_course.autograde_submissions`)."""
    found: dict[str, dict] = {}

    def get(exercise: Exercise) -> dict:
        if exercise.stem not in found:
            answers = {student: s.answers for student, s in cases.submissions(exercise.stem).items()}
            found[exercise.stem] = once_per_run(
                tmp_path_factory,
                worker_id,
                f"autograde-{exercise.stem}",
                lambda: autograde_submissions(tmp_path_factory.mktemp(f"course-{exercise.stem}"), exercise, answers),
            )
        return found[exercise.stem]

    return get
