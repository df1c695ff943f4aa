"""The hints of every autograded part (issue 38, item 1): folded, in tiers, so that a student tries before being
told. At least two per part, numbered in the order to open them: first a nudge (what to think about, which property
the answer needs) with no piece of the reference solution's code, then the method in words, and only last something
close to code; no hint holds a line of the reference solution. Each exercise tells the student to try first and to
open the hints one at a time. Read from the solution notebooks (the exercises are made from them), fast.
"""

from __future__ import annotations

import re

import pytest
from helpers.nbgrader_course import read

from manyheads.course.exercises import EXERCISES, CodePart, Exercise
from manyheads.course.layout import REPO

PARTS = [(e, p) for e in EXERCISES for p in e.code_parts]
HINT = re.compile(r"<details>\s*<summary>(.*?)</summary>(.*?)</details>", re.S)
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
TRY_FIRST = "open the hints one at a time"


def _ids(value) -> str:
    return value.stem if isinstance(value, Exercise) else value.function if isinstance(value, CodePart) else str(value)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _part_text(exercise: Exercise, part: CodePart) -> str:
    """The markdown between the cell before the part (the previous part's test, or the set-up) and its answer."""
    cells = read(REPO.solution(exercise.stem)).cells
    answer = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == part.answer_id)
    start = answer
    while start > 0 and cells[start - 1].cell_type == "markdown":
        start -= 1
    return "\n\n".join(c.source for c in cells[start:answer])


def _solution_code(exercise: Exercise, part: CodePart) -> str:
    cells = read(REPO.solution(exercise.stem)).cells
    return next(c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == part.answer_id)


def _solution_lines(exercise: Exercise, part: CodePart) -> list[str]:
    """The reference solution's lines a hint must not hold: code (not comments, docstrings or the def line) with at
    least ten characters besides spaces, whitespace removed."""
    lines, in_doc = [], False
    for line in _solution_code(exercise, part).splitlines():
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if in_doc or stripped.startswith(('"""', "'''")):
            in_doc = in_doc != (quotes % 2 == 1)  # a docstring opens or closes on a line with an odd count
            continue
        if not stripped or stripped.startswith(("#", "def ")):
            continue
        code = _squash(stripped.split("  #")[0])
        if len(code) >= 10:
            lines.append(code)
    return lines


def hints(exercise: Exercise, part: CodePart) -> list[tuple[str, str]]:
    return [(title.strip(), body.strip()) for title, body in HINT.findall(_part_text(exercise, part))]


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_every_part_has_at_least_two_hints_numbered_in_the_order_to_open_them(exercise, part):
    found = hints(exercise, part)
    assert len(found) >= 2, f"{exercise.stem} {part.function}: {len(found)} hint(s)"
    for n, (title, _) in enumerate(found, start=1):
        assert title.startswith(f"Hint {n}: "), title


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_no_hint_holds_a_line_of_the_reference_solution(exercise, part):
    lines = _solution_lines(exercise, part)
    assert lines, "the solution has lines to compare"
    for title, body in hints(exercise, part):
        squashed = _squash(body)
        held = [line for line in lines if line in squashed]
        assert not held, f"{title!r} holds the solution's line(s) {held}"


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_the_first_hint_holds_no_piece_of_the_solution_code(exercise, part):
    """Its code spans may name what the part's own text names (the arguments, a shape), nothing of the solution's
    code beyond that."""
    title, body = hints(exercise, part)[0]
    statement = _squash(HINT.sub("", _part_text(exercise, part)))
    solution = _squash(_solution_code(exercise, part))
    pieces = [_squash(span.strip("`")) for span in CODE.findall(body)]
    given = [p for p in pieces if p and p in solution and p not in statement]
    assert not given, f"{title!r} gives away {given}"


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if e.code_parts], ids=_ids)
def test_each_exercise_says_try_first_then_one_hint_at_a_time(exercise):
    intro = "\n".join(c.source for c in read(REPO.solution(exercise.stem)).cells if c.cell_type == "markdown")
    assert TRY_FIRST in " ".join(intro.split()), f"{exercise.stem} does not say to {TRY_FIRST}"
