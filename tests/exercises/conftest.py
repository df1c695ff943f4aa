"""The exercises' tests: every test is parametrised over the exercise descriptions (EXERCISES), with the cases of
cases.py. ``autograded`` runs real nbgrader once per pytest run over every exercise, whichever worker asks first."""

from __future__ import annotations

import os

import cases
import pytest
from helpers.nbgrader_course import autograde_submissions, once_per_run

from manyheads.course.exercises import EXERCISES, Exercise


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    """``autograded(exercise)``: what nbgrader decided for the exercise's solution, blank release and every
    submission of :func:`cases.submissions` (see :func:`helpers.nbgrader_course.autograde_submissions`, which grades
    every exercise in one nbgrader course). ``MANYHEADS_ONLY_EXERCISES=01_single_head_bottleneck,...`` grades only
    those (for working on one exercise with ``-k``; make test leaves it unset)."""
    found: dict[str, dict] = {}
    only = [s for s in os.environ.get("MANYHEADS_ONLY_EXERCISES", "").split(",") if s]

    def get(exercise: Exercise) -> dict:
        if not found:
            chosen = [e for e in EXERCISES if not only or e.stem in only]
            answers = {e: {student: s.answers for student, s in cases.submissions(e.stem).items()} for e in chosen}
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
