"""Each exercise's description (manyheads.course.exercises) against the package and its notebooks: the anatomy
and contract of every part, read from the notebooks rather than written here (fast, no nbgrader)."""

from __future__ import annotations

import inspect
import re

import cases
import pytest
from helpers.nbgrader_course import IMPORTS_CELL, cells_by_id, grade_id, read

import manyheads as mh
from manyheads.course.exercises import EXERCISES, CodePart, Exercise
from manyheads.course.layout import REPO

PARTS = [(e, p) for e in EXERCISES for p in e.code_parts]


def _ids(value) -> str:
    return value.stem if isinstance(value, Exercise) else value.function if isinstance(value, CodePart) else str(value)


def _description_cells(exercise: Exercise) -> dict[str, int | None]:
    """{grade_id: points} of every nbgrader cell the description names (None: cells that give no points)."""
    cells: dict[str, int | None] = {IMPORTS_CELL: None}
    for part in exercise.code_parts:
        cells.update({part.answer_id: None, part.check_id: None, part.test_id: part.points})
    cells.update({w.grade_id: w.points for w in exercise.written_parts})
    return cells


def test_the_descriptions_are_the_assignments_and_cases_belong_to_them():
    assert [e.stem for e in EXERCISES] == REPO.assignments()
    assert set(cases.KNOWN) <= {e.stem for e in EXERCISES}, "hand-written cases of an exercise that does not exist"


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_computed_by_names_real_package_functions_and_check_exists(exercise, part):
    for dotted in part.computed_by:
        assert dotted.startswith("manyheads."), dotted
        found = cases.resolve(dotted)
        assert inspect.isclass(found) or inspect.isfunction(found), f"{dotted} is a {type(found).__name__}"
    assert callable(getattr(mh.checks, part.check, None)), f"mh.checks.{part.check} does not exist"


@pytest.mark.parametrize("exercise", EXERCISES, ids=_ids)
def test_description_names_every_graded_cell_with_its_points(exercise):
    cells = cells_by_id(read(REPO.solution(exercise.stem)))
    described = _description_cells(exercise)
    assert set(cells) == set(described), "grade_ids in the notebook vs in the description"
    in_notebook = {g: c.metadata["nbgrader"].get("points") for g, c in cells.items()}
    assert {g: in_notebook[g] for g, p in described.items() if p is not None} == {
        g: p for g, p in described.items() if p is not None
    }
    graded = {g for g, c in cells.items() if c.metadata["nbgrader"].get("grade")}
    assert graded == {g for g, p in described.items() if p is not None}, "cells that give points"
    assert exercise.points == sum(in_notebook[g] for g in graded)


@pytest.mark.parametrize("exercise", EXERCISES, ids=_ids)
def test_cases_cover_every_part(exercise):
    """Once an exercise has hand-written bugs, every part has at least one; every case answers a part that exists.
    (Every part, with or without them, is also tested with wrong answers made from its solution: misses.py.)"""
    case, functions = cases.CASES[exercise.stem], {p.function for p in exercise.code_parts}
    if case["bugs"] or exercise.stem in cases.KNOWN and functions:
        assert {bug.part for bug in case["bugs"].values()} == functions
    for bug in case["bugs"].values():
        assert bug.also_fails == tuple(f for f in bug.also_fails if f in functions and f != bug.part)
    for answers in case["right"].values():
        assert set(answers) <= functions
    assert {part for part, _ in cases.PACKAGE[exercise.stem].values()} <= functions
    for names in case["mixed"].values():
        assert set(names) <= set(case["right"]) | set(case["bugs"])


@pytest.mark.parametrize("exercise, part", PARTS, ids=_ids)
def test_part_anatomy(exercise, part):
    """Answer cell (the contract's def line), its visible check through the stable path mh.checks, then the locked
    graded test cell: a docstring naming the part and its points, the visible check again, then hidden tests."""
    number = exercise.code_parts.index(part) + 1
    for path in (REPO.solution(exercise.stem), REPO.release(exercise.stem)):
        nb = read(path)
        order = [grade_id(c) for c in nb.cells]
        i = order.index(part.answer_id)
        answer, check, test = nb.cells[i : i + 3]
        assert order[i : i + 3] == [part.answer_id, part.check_id, part.test_id], order[i : i + 3]
        meta = answer.metadata["nbgrader"]
        assert meta["solution"] and not meta["grade"] and not meta["locked"]
        assert answer.source.startswith(part.def_line), f"{path.name}: {answer.source.splitlines()[0]!r}"
        call = f"mh.checks.{part.check}({part.function})"
        assert check.metadata["nbgrader"]["locked"] and call in check.source
        meta = test.metadata["nbgrader"]
        assert meta["grade"] and meta["locked"] and not meta["solution"] and meta["points"] == part.points
        points = f"{part.points} point{'s' if part.points != 1 else ''}"
        assert re.match(rf'"""Part {number} \({points}\): ', test.source), test.source.splitlines()[0]
        assert call in test.source
        header = nb.cells[i - 1].source
        assert "<details>" in header and "difficulty" in header and "minutes" in header
    assert "### BEGIN HIDDEN TESTS" in cells_by_id(read(REPO.solution(exercise.stem)))[part.test_id].source


@pytest.mark.parametrize("exercise", EXERCISES, ids=_ids)
def test_written_answers_and_imports(exercise):
    nb = read(REPO.solution(exercise.stem))
    cells = cells_by_id(nb)
    assert exercise.written_parts, "every assignment has a manually graded written answer"
    for written in exercise.written_parts:
        cell = cells[written.grade_id]
        meta = cell.metadata["nbgrader"]
        assert cell.cell_type == "markdown" and meta["grade"] and meta["solution"] and meta["points"] == written.points
        prompt = nb.cells[nb.cells.index(cell) - 1].source
        mentions = cases.CASES[exercise.stem].get("written_prompts", {}).get(written.grade_id, ())
        for text in (mentions,) if isinstance(mentions, str) else mentions:
            assert text in prompt, (written.grade_id, text)
    imports = cells[IMPORTS_CELL]
    assert imports.metadata["nbgrader"]["locked"] and not imports.metadata["nbgrader"]["grade"]
    for line in ("import math", "import torch", "import manyheads as mh"):
        assert line in imports.source.splitlines()


@pytest.mark.parametrize("exercise", EXERCISES, ids=_ids)
def test_mark_schemes_state_the_cells_points(exercise):
    """A written answer's mark scheme grades out of the points its cell gives."""
    cells = cells_by_id(read(REPO.solution(exercise.stem)))
    for written in exercise.written_parts:
        scheme = cells[written.grade_id].source
        stated = re.findall(r"\*Grading \((\d+) points?\)", scheme)
        assert stated == [str(written.points)], (written.grade_id, stated)


def _shares(row: str) -> list[float]:
    """The points a row of a "how each part's points are shared" table gives each criterion (": 1.5;" and the like)."""
    return [float(v) for v in re.findall(r":\s*(\d+(?:\.\d+)?)(?=[;.]|\s*$)", row)]


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if not e.code_parts], ids=_ids)
def test_hand_graded_header_states_each_parts_points_and_shares(exercise):
    """An assignment graded only by hand (the capstone) tells students what each part is worth and how its points are
    shared among its criteria, and the shares add up to the part's points (issue 24: it once said "equal shares")."""
    nb = read(REPO.solution(exercise.stem))
    header = next(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "shared equally" not in header
    table = header.split("**How each part's points are shared.**")[1]
    rows = [line for line in table.splitlines() if re.match(r"\| \d ", line)]
    assert len(rows) == len(exercise.written_parts)
    for number, (row, written) in enumerate(zip(rows, exercise.written_parts), 1):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0].startswith(f"{number} ") and cells[1] == str(written.points), row
        assert sum(_shares(cells[2])) == written.points, (written.grade_id, _shares(cells[2]))
