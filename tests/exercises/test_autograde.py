"""Real nbgrader (slow): each exercise released with a gradebook, then the solution, the blank release and the
submissions of cases.py autograded in one run per exercise (the ``autograded`` fixture of conftest.py)."""

from __future__ import annotations

import re

import cases
import pytest
from helpers.nbgrader_course import (
    assert_autograde_ran_cleanly,
    assert_blank_gets_zero_with_only_not_implemented_errors,
    assert_solution_gets_full_marks_and_written_answers_wait,
    auto_scores,
    full_marks,
    part_by_function,
)

from manyheads.course.exercises import EXERCISES

BY_STEM = {e.stem: e for e in EXERCISES}
SUBMISSIONS = [(stem, student) for stem in BY_STEM for student in cases.submissions(stem)]
BUGS = [(stem, name) for stem, case in cases.CASES.items() for name in case["bugs"]]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_autograde_ran_cleanly(autograded, exercise):
    assert_autograde_ran_cleanly(autograded(exercise), cases.submissions(exercise.stem))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_description_points_are_nbgrader_s_max_score(autograded, exercise):
    assert autograded(exercise)["max_score"] == exercise.points


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_solution_gets_full_marks_and_written_answers_wait_for_a_person(autograded, exercise):
    assert_solution_gets_full_marks_and_written_answers_wait(autograded(exercise), exercise)


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_blank_release_gets_zero_and_fails_only_with_not_implemented_error(autograded, exercise):
    assert_blank_gets_zero_with_only_not_implemented_errors(autograded(exercise), exercise)


@pytest.mark.parametrize("stem, student", SUBMISSIONS)
def test_submissions_get_the_points_they_deserve(autograded, stem, student):
    exercise, submission = BY_STEM[stem], cases.submissions(stem)[student]
    lost = {part_by_function(exercise, f).test_id for f in submission.zero}
    expected = {test_id: 0.0 if test_id in lost else points for test_id, points in full_marks(exercise).items()}
    assert auto_scores(autograded(exercise), exercise, student) == expected, submission


@pytest.mark.parametrize("stem, name", BUGS)
def test_graded_cell_fails_the_way_the_bug_is_caught(autograded, stem, name):
    """In the autograded notebook, the bug's test cell raised what the visible check (which the cell runs first) or,
    when that passes, the hidden tests raise."""
    exercise, bug = BY_STEM[stem], cases.CASES[stem]["bugs"][name]
    [student] = [s for s, sub in cases.submissions(stem).items() if name in sub.bugs and not sub.rights]
    test_id = part_by_function(exercise, bug.part).test_id
    found = [(ename, evalue) for cell, ename, evalue in autograded(exercise)["errors"][student] if cell == test_id]
    ename, pattern = bug.graded_failure
    assert len(found) == 1 and found[0][0] == ename and re.search(pattern, found[0][1]), found
