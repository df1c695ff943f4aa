"""The visible checks try every input form an exercise's spec allows and its hidden tests use.

The forms are the description's (``CodePart.forms``); the wrong answers are made from the solution's answer by one
template (:mod:`misses`), not written by hand. For each form and each way of missing it that the description names,
an answer that handles every other input but misses this one must fail the visible check with an
``AssertionError`` whose message names the form, so a student who passes the visible check never loses hidden
points on a form the check never tried. And whatever input a check tries, an answer that crashes or returns wrong
numbers on that input alone fails it with an ``AssertionError`` (never another error, never a pass).
"""

from __future__ import annotations

import math
import textwrap

import pytest
import torch
from helpers.nbgrader_course import hidden_tests, student_namespace
from misses import count_calls, missing, names_form, run_check

import manyheads as mh
from manyheads.course.exercises import EXERCISES, CodePart, Exercise

EXERCISES_WITH_CHECKS = [e for e in EXERCISES if e.code_parts]
PARTS = [(e, p) for e in EXERCISES for p in e.code_parts]
FORMS = [(e, p, f) for e, p in PARTS for f in p.forms]
BY_STEM = {e.stem: e for e in EXERCISES}


def _ids(value) -> str:
    if isinstance(value, Exercise):
        return value.stem
    return value.function if isinstance(value, CodePart) else getattr(value, "names", str(value))


_NAMESPACES: dict[str, dict] = {}


def _solution(exercise: Exercise, part: CodePart):
    """The solution's answer to ``part``, run in a student's namespace (later answers may use earlier ones)."""
    if exercise.stem not in _NAMESPACES:
        _NAMESPACES[exercise.stem] = student_namespace(exercise)
    return _NAMESPACES[exercise.stem][part.function]


def _check(part: CodePart):
    return getattr(mh.checks, part.check)


def _define(source: str, name: str):
    """A student's answer, written as source text, as a function (with torch and math imported, as in the notebooks)."""
    namespace = {"torch": torch, "math": math}
    exec(textwrap.dedent(source), namespace)  # noqa: S102
    return namespace[name]


def _hidden_tests(stem: str, test_id: str) -> str:
    exercise = BY_STEM[stem]
    return hidden_tests(exercise, next(p for p in exercise.code_parts if p.test_id == test_id))


def _solution_namespace(stem: str) -> dict:
    return student_namespace(BY_STEM[stem])


@pytest.mark.parametrize("exercise", EXERCISES_WITH_CHECKS, ids=_ids)
def test_reference_answers_pass_every_visible_check(exercise, capsys):
    for part in exercise.code_parts:
        _check(part)(_solution(exercise, part))
    assert capsys.readouterr().out.count("all visible checks passed") == len(exercise.code_parts)


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_every_part_names_the_forms_its_check_must_try(exercise, part):
    assert part.forms, f"{part.function}: the description names no input form beyond the check's first input"


@pytest.mark.parametrize("exercise, part, form", FORMS, ids=_ids)
def test_an_answer_that_misses_one_form_fails_the_visible_check_with_a_message_naming_it(exercise, part, form):
    check, reference = _check(part), _solution(exercise, part)
    for miss in form.misses:
        named, found = names_form(check, reference, form.pieces, miss)
        assert named, f"no input of {part.check} names {form.names!r} when the answer {miss} there; it said: {found}"
        assert "NotImplementedError" not in run_check(check, missing(reference, found, miss))


def test_a_check_that_stops_trying_a_form_fails_the_form_test():
    """The template has teeth: a visible check that no longer hands 1-D scores to the answer (it answers them
    itself) lets an answer that misses them through, and the form test says so."""
    exercise = BY_STEM["01_single_head_bottleneck"]
    part = next(p for p in exercise.code_parts if p.function == "softmax")
    reference = _solution(exercise, part)

    def check_without_1d_scores(answer):
        mh.checks.check_softmax(lambda scores: reference(scores) if scores.dim() == 1 else answer(scores))

    form = next(f for f in part.forms if "1-D" in f.names)
    assert names_form(mh.checks.check_softmax, reference, form.pieces, "crashes")[0]
    assert not names_form(check_without_1d_scores, reference, form.pieces, "crashes")[0]


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_an_answer_that_misses_any_one_input_fails_the_visible_check(exercise, part):
    check, reference = _check(part), _solution(exercise, part)
    for call in range(count_calls(check, reference)):
        for miss in ("crashes", "wrong"):
            message = run_check(check, missing(reference, call, miss))
            assert message is not None, f"{part.check} passes an answer that {miss} on its input number {call}"


def test_a_float_returning_head_dim_fails_the_visible_check_and_the_hidden_tests():
    student = _define(
        """
        def head_dim(d_model, n_heads):
            if not isinstance(d_model, int) or not isinstance(n_heads, int) or isinstance(d_model, bool) \\
                    or isinstance(n_heads, bool) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                raise ValueError("invalid")
            return d_model / n_heads
        """,
        "head_dim",
    )
    with pytest.raises(AssertionError, match=r"returned 64\.0, a float"):
        mh.checks.check_head_dim(student)
    hidden = _hidden_tests("03_head_size", "test_head_dim")
    with pytest.raises(AssertionError, match=r"returned 64\.0, a float"):
        exec(hidden, {"torch": torch, "math": math, "mh": mh, "head_dim": student})  # noqa: S102


def test_the_hidden_head_dim_tests_refuse_non_int_arguments():
    hidden = _hidden_tests("03_head_size", "test_head_dim")
    for bad in ("isinstance(d_model, int)", "isinstance(d_model, int) and not isinstance(d_model, bool)"):
        # an answer that checks d_model's type but not n_heads' (or forgets bool) must lose the point
        student = _define(
            f"""
            def head_dim(d_model, n_heads):
                if not ({bad}) or d_model <= 0 or n_heads <= 0 or d_model % n_heads:
                    raise ValueError("invalid")
                return int(d_model // n_heads)
            """,
            "head_dim",
        )
        with pytest.raises(AssertionError, match=r"expected a ValueError"):
            exec(hidden, {"torch": torch, "math": math, "mh": mh, "head_dim": student})  # noqa: S102
    namespace = _solution_namespace("03_head_size")
    exec(hidden, {**namespace})  # noqa: S102 -- the reference passes
