"""Answers in this process (fast): the solution, the correct alternatives and the package's own computation pass
each part's visible check and hidden tests; every known bug fails both, the way cases.py says; a stub's
NotImplementedError goes through the visible checks. Answers run in a student's namespace (the notebook's imports,
then every answer cell, the solution's where the case gives none)."""

from __future__ import annotations

import contextlib
import io

import cases
import pytest
import torch
from helpers.nbgrader_course import part_by_function, run_hidden_tests, student_namespace
from misses import missing

import manyheads as mh
from manyheads.checks.own_work import suspended
from manyheads.course.exercises import EXERCISES

BY_STEM = {e.stem: e for e in EXERCISES}

# (stem, function, variant): the solution and every correct alternative of every part.
RIGHT = [
    (e.stem, p.function, variant)
    for e in EXERCISES
    for p in e.code_parts
    for variant in ["solution", *(n for n, a in cases.CASES[e.stem]["right"].items() if p.function in a)]
]
BUGS = [(stem, name) for stem, case in cases.CASES.items() for name in case["bugs"]]
PACKAGE = [(stem, what) for stem, table in cases.PACKAGE.items() for what in table]
PARTS = [(e.stem, p.function) for e in EXERCISES for p in e.code_parts]


def _check(stem: str, function: str):
    return getattr(mh.checks, part_by_function(BY_STEM[stem], function).check)


def _run_check(stem: str, function: str, answer) -> str:
    """Run the part's visible check on ``answer``; what it printed."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        _check(stem, function)(answer)
    return printed.getvalue()


def _namespace(stem: str, variant: str) -> dict:
    return student_namespace(BY_STEM[stem], None if variant == "solution" else cases.CASES[stem]["right"][variant])


@pytest.fixture(scope="module")
def passed_line():
    """What each visible check prints when it passes: what it prints for the solution, in this process."""
    found = {}
    for stem, function in PARTS:
        found[stem, function] = _run_check(stem, function, student_namespace(BY_STEM[stem])[function])
        assert found[stem, function].strip(), f"{stem} {function}: the visible check printed nothing"
    return found


@pytest.mark.parametrize("stem, function, variant", RIGHT)
def test_right_answers_pass_the_visible_check(stem, function, variant, passed_line):
    assert _run_check(stem, function, _namespace(stem, variant)[function]) == passed_line[stem, function]


@pytest.mark.parametrize("stem, function, variant", RIGHT)
def test_right_answers_pass_the_hidden_tests(stem, function, variant):
    exercise = BY_STEM[stem]
    run_hidden_tests(exercise, part_by_function(exercise, function), _namespace(stem, variant))


@pytest.mark.parametrize("stem, name", BUGS)
def test_visible_check_names_the_bug(stem, name):
    bug = cases.CASES[stem]["bugs"][name]
    answer = student_namespace(BY_STEM[stem], {bug.part: bug.source})[bug.part]
    if bug.check is None:  # a bug that only the hidden tests catch
        _run_check(stem, bug.part, answer)
    else:
        with pytest.raises(AssertionError, match=bug.check):
            _run_check(stem, bug.part, answer)


@pytest.mark.parametrize("stem, name", BUGS)
def test_hidden_tests_catch_the_bug_on_their_own(stem, name):
    exercise, bug = BY_STEM[stem], cases.CASES[stem]["bugs"][name]
    namespace = student_namespace(exercise, {bug.part: bug.source})
    with pytest.raises(bug.hidden_error, match=bug.hidden):
        run_hidden_tests(exercise, part_by_function(exercise, bug.part), namespace)


@pytest.mark.parametrize("stem, name", BUGS)
def test_a_bug_costs_its_part_and_only_the_parts_that_call_it(stem, name):
    exercise, bug = BY_STEM[stem], cases.CASES[stem]["bugs"][name]
    namespace = student_namespace(exercise, {bug.part: bug.source})
    failed = set()
    for part in exercise.code_parts:
        if part.function == bug.part:
            continue
        try:
            _run_check(stem, part.function, namespace[part.function])
            run_hidden_tests(exercise, part, namespace)
        except Exception:  # noqa: BLE001 -- which parts fail, not how: the part's own tests say how
            failed.add(part.function)
    assert failed == set(bug.also_fails)


@pytest.mark.parametrize("stem, what", PACKAGE)
def test_the_package_computes_what_the_solution_computes(stem, what, passed_line):
    """The package's own computation of a part (adapted to the student's signature) passes that part's visible check
    and hidden tests, as the solution does: the exercise and the chapters that use the package agree."""
    function, computed = cases.PACKAGE[stem][what]
    exercise = BY_STEM[stem]
    with suspended():  # the visible check would refuse the package's computation (the own-work rule), rightly
        assert _run_check(stem, function, computed) == passed_line[stem, function]
    namespace = {**student_namespace(exercise), function: computed}
    run_hidden_tests(exercise, part_by_function(exercise, function), namespace)


@pytest.mark.parametrize("stem, function", PARTS)
def test_hidden_tests_catch_an_answer_made_wrong_from_the_solution(stem, function):
    """Whatever hand-written bugs an exercise has (none, for a new one), its hidden tests fail an answer that returns
    wrong numbers (a value where the spec asks for a ValueError) on every input: the template of misses.py."""
    exercise = BY_STEM[stem]
    namespace = student_namespace(exercise)
    namespace[function] = missing(namespace[function], None, "wrong")
    with pytest.raises(AssertionError):
        run_hidden_tests(exercise, part_by_function(exercise, function), namespace)


def _stub(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("stem, function", PARTS)
def test_visible_checks_let_the_stub_s_not_implemented_error_through(stem, function):
    with pytest.raises(NotImplementedError):
        _run_check(stem, function, _stub)


@pytest.mark.parametrize("stem, function", PARTS)
def test_visible_checks_leave_the_global_random_state_alone(stem, function):
    answer = student_namespace(BY_STEM[stem])[function]
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    _run_check(stem, function, answer)
    assert torch.equal(torch.rand(3), expected)
