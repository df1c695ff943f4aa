"""The grader's stages as functions between frozen records (issue 36, item 1): checked -> executed (with each cell
that hit a limit as a field) -> scored -> reviewed -> the class result, each stage's records kept under OUT/records
and read back as they were; a record of another format or stage is refused with what to do."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import nbformat
import pytest

from manyheads_grader import notebooks, scoring, store
from manyheads_grader.execution import executing
from manyheads_grader.records import (
    CellOutcome,
    Checked,
    Executed,
    Outcome,
    Problem,
    ProblemKind,
    Reviewed,
    Scored,
    class_result,
    not_graded,
)
from manyheads_grader.review import checking, reviewing

EX1 = "01_single_head_bottleneck"


def _notebook(*outputs) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nb.cells += [nbformat.v4.new_code_cell("f()", outputs=[out]) for out in outputs]
    return nb


def _stages(out: Path):
    ran = _notebook(
        nbformat.v4.new_output("error", ename="TimeoutError", evalue="cell ran 60 s", traceback=[]),
        nbformat.v4.new_output("stream", name="stdout", text="xxx\n[output cut by the grader at 2000000 bytes]\n"),
    )
    graded_at = out / "course" / "autograded" / "ann" / EX1 / f"{EX1}.ipynb"
    graded_at.parent.mkdir(parents=True)
    nbformat.write(ran, graded_at)
    page = out / "feedback" / "ann" / f"{EX1}.html"
    page.parent.mkdir(parents=True)
    page.write_text("<p>feedback</p>")
    checked = [
        Checked("ann", "Ann Lee", _notebook(), _notebook(), "0.7.0", True, (Problem(ProblemKind.REPAIRED, "fixed"),)),
        Checked("bob", problems=(Problem(ProblemKind.UNREADABLE, "a.ipynb: not JSON"),)),
        Checked("cy", notebook=_notebook()),
    ]
    executed = {
        "ann": Executed("ann", ran, tuple(notebooks.cell_outcomes(ran))),
        "cy": Executed("cy", problems=(not_graded("the kernel died"),)),
    }
    scored = {
        "ann": Scored(
            "ann",
            "repaired",
            3.0,
            5.0,
            {"test_softmax": 3.0, "test_attention": 0.0},
            {"test_attention": "OwnWorkError: x"},
            {"test_attention": "OwnWorkError: x"},
            page,
            (Problem(ProblemKind.RUN, notebooks.RUN_NOTES[Outcome.TIME]),),
        ),
        "bob": Scored("bob"),
        "cy": Scored("cy"),
    }
    reviewed = {"ann": Reviewed("ann", ("out of order: cell 3",)), "bob": Reviewed("bob"), "cy": Reviewed("cy")}
    return checked, executed, scored, reviewed


def test_each_stage_record_is_frozen():
    for record in (Checked("a"), Executed("a"), Scored("a"), Reviewed("a"), CellOutcome(1, Outcome.TIME, "x")):
        field = dataclasses.fields(record)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, "changed")


def test_the_stages_are_functions_from_records_to_records():
    def hints(function):
        return typing.get_type_hints(function)  # the annotations, resolved in the function's own module

    assert hints(checking.check_submissions)["return"] == tuple[list[Checked], list[str]]
    assert hints(executing.execute)["todo"] == list[Checked]
    assert hints(executing.Execution)["students"] == dict[str, Executed]
    assert hints(scoring.score_class)["checked"] == list[Checked]
    assert hints(scoring.score_class)["return"] == dict[str, Scored]
    assert hints(reviewing.review_class)["return"] == tuple[dict[str, Reviewed], list]


def test_a_cells_run_is_a_field_not_a_message():
    nb = _notebook(
        nbformat.v4.new_output("error", ename="MemoryError", evalue="", traceback=[]),
        nbformat.v4.new_output("error", ename="ValueError", evalue="wrong shape", traceback=[]),  # no limit: none
        nbformat.v4.new_output("error", ename="CellTimeoutError", evalue="", traceback=[]),
    )
    found = notebooks.cell_outcomes(nb)
    assert [(c.cell, c.kind) for c in found] == [(1, Outcome.MEMORY), (3, Outcome.TIME)]
    # the report's notes come from the kinds, once each, in a fixed order
    assert notebooks.run_notes(found) == [notebooks.RUN_NOTES[Outcome.TIME], notebooks.RUN_NOTES[Outcome.MEMORY]]


def test_the_class_result_joins_the_stages_in_their_order(tmp_path):
    checked, executed, scored, reviewed = _stages(tmp_path)
    rows = {r.student_id: r for r in class_result(checked, executed, scored, reviewed)}
    assert list(rows) == ["ann", "bob", "cy"]  # the checked order: every student, graded or not
    ann = rows["ann"]
    assert (ann.status, ann.score, ann.max_score, ann.repaired, ann.name, ann.version) == (
        "repaired",
        3.0,
        5.0,
        True,
        "Ann Lee",
        "0.7.0",
    )
    assert [p.kind for p in ann.problems] == [ProblemKind.REPAIRED, ProblemKind.RUN]  # checked's, then scored's
    assert ann.flags == ["out of order: cell 3"] and ann.zeroed == {"test_attention": "OwnWorkError: x"}
    assert [p.kind for p in rows["cy"].problems] == [ProblemKind.NOT_GRADED]  # the executed stage's reason
    assert rows["bob"].status == "failed" and rows["bob"].notebook is None


def test_every_stage_is_kept_and_read_back_as_it_was(tmp_path):
    checked, executed, scored, reviewed = _stages(tmp_path)
    store.write_stages(tmp_path, EX1, checked, executed, scored, reviewed)
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == [f"{s}.json" for s in sorted(store.STAGES)]
    back = store.read_stage(tmp_path, "checked")
    assert [c.student_id for c in back] == ["ann", "bob", "cy"]
    assert back[0].notebook == checked[0].notebook and back[0].submitted == checked[0].submitted
    assert (back[0].name, back[0].version, back[0].repaired, back[0].problems) == (
        "Ann Lee",
        "0.7.0",
        True,
        checked[0].problems,
    )
    assert back[1].notebook is None and back[1].problems == checked[1].problems
    ran = {e.student_id: e for e in store.read_stage(tmp_path, "executed")}
    assert ran["ann"].cells == executed["ann"].cells and ran["ann"].graded == executed["ann"].graded
    assert ran["cy"].graded is None and ran["cy"].problems == executed["cy"].problems
    assert {s.student_id: s for s in store.read_stage(tmp_path, "scored")} == scored
    assert {r.student_id: r for r in store.read_stage(tmp_path, "reviewed")} == reviewed
    # the class result made from what was read is the one made from the stages themselves
    again = class_result(back, ran, {s.student_id: s for s in store.read_stage(tmp_path, "scored")}, reviewed)
    first = class_result(checked, executed, scored, reviewed)
    assert [dataclasses.astuple(r) for r in again] == [dataclasses.astuple(r) for r in first]


def test_a_stage_record_of_another_format_or_stage_is_refused_with_what_to_do(tmp_path):
    checked, executed, scored, reviewed = _stages(tmp_path)
    with pytest.raises(store.RecordsError, match="does not exist: grade the class into"):
        store.read_stage(tmp_path, "scored")
    store.write_stages(tmp_path, EX1, checked, executed, scored, reviewed)
    with pytest.raises(store.RecordsError, match="no stage 'graded'"):
        store.read_stage(tmp_path, "graded")
    path = tmp_path / "records" / "scored.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "format": store.FORMAT + 1}))
    with pytest.raises(store.RecordsError, match=f"record format {store.FORMAT + 1}.*Use the manyheads-grader release"):
        store.read_stage(tmp_path, "scored")
    path.write_text(json.dumps({**data, "stage": "reviewed"}))  # a file renamed into another stage's place
    with pytest.raises(store.RecordsError, match="holds the records of stage 'reviewed', not 'scored'"):
        store.read_stage(tmp_path, "scored")
    path.write_text(json.dumps({**data, "students": [{"student_id": "ann"}]}))
    with pytest.raises(store.RecordsError, match="is damaged"):
        store.read_stage(tmp_path, "scored")


@pytest.mark.slow
def test_a_submission_walks_through_each_stage_once_in_order():
    """tools/grading_walk.py grades one student in process and lists each stage as it starts: every stage once, in
    the pipeline's order (a stage called twice, skipped or run out of order shows here)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "grading_walk.py")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stages = [line.removeprefix("stage ") for line in done.stdout.splitlines() if line.startswith("stage ")]
    assert stages == [
        "release",
        "found",
        "checked",
        "preflight",
        "executed",
        "scored",
        "reviewed",
        "class result",
        "published",
        "kept",
        "outputs",
    ]
    after = done.stdout.split("stage kept\n", 1)[1]
    assert "manyheads_grader.execution" not in after  # the outputs execute nothing
