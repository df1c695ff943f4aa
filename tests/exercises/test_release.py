"""solutions/ → exercises/: the committed release against its source (fast), and real nbgrader regenerating and
validating it (slow). Parametrised over the exercise descriptions."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from helpers.nbgrader_course import (
    SOLUTION_DELIMITERS,
    cells_by_id,
    finish,
    forked_kernels,
    nbgrader_errors,
    read,
    start_nbgrader,
)

from manyheads.course import release
from manyheads.course.exercises import EXERCISES
from manyheads.course.hygiene import setup_cell_source
from manyheads.course.layout import REPO

STEMS = [e.stem for e in EXERCISES]


def test_every_exercise_has_a_committed_release():
    for stem in STEMS:
        assert REPO.release(stem).is_file(), f"run `make exercises`: {REPO.release(stem)} is missing"
    assert sorted(p.name for p in REPO.exercises_dir.iterdir() if p.is_dir()) == sorted(STEMS)


@pytest.mark.parametrize("stem", STEMS)
def test_release_follows_the_rules(stem):
    assert release.release_problems(REPO.release(stem)) == []
    nb = read(REPO.release(stem))
    assert nb.cells[0].source == setup_cell_source(REPO.root)
    assert "generated" in nb.metadata["manyheads"]["note"]
    assert nb.metadata["mystnb"]["execution_mode"] == "off", "the book must render the exercise without running it"


def test_release_problems_catch_leaks_and_missing_pieces(tmp_path):
    nb = read(REPO.release(STEMS[0]))
    nb.cells[1].source += "\n### BEGIN SOLUTION"
    nb.cells.pop(0)
    del nb.metadata["manyheads"]
    bad = tmp_path / "bad.ipynb"
    bad.write_text(nbformat.writes(nb), encoding="utf-8")  # no trailing newline: not canonical
    found = "\n".join(release.release_problems(bad))
    for expected in ("BEGIN SOLUTION", "set-up cell", "generated", "canonical"):
        assert expected in found


def test_generate_refuses_unknown_assignments():
    with pytest.raises(ValueError, match="no such assignment"):
        release.generate(REPO.root, ["99_no_such_exercise"])


@pytest.mark.parametrize("stem", STEMS)
def test_release_keeps_nbgrader_metadata_and_hides_answers(stem):
    source, released = cells_by_id(read(REPO.solution(stem))), cells_by_id(read(REPO.release(stem)))
    assert list(released) == list(source), "the release has the same graded and locked cells, in the same order"
    for grade_id, cell in source.items():
        for key in ("grade", "solution", "locked", "points"):
            assert released[grade_id].metadata["nbgrader"].get(key) == cell.metadata["nbgrader"].get(key), (
                grade_id,
                key,
            )
        assert released[grade_id].cell_type == cell.cell_type, grade_id
    text = REPO.release(stem).read_text(encoding="utf-8")
    # No solution line and no model written answer reaches the student.
    for grade_id, cell in source.items():
        if cell.metadata["nbgrader"].get("solution"):
            body = cell.source
            if cell.cell_type == "code":
                begin, end = SOLUTION_DELIMITERS
                body = body.split(begin, 1)[1].split(end, 1)[0]
            for line in (line.strip() for line in body.splitlines()):
                if len(line) > 25:
                    assert line not in text, f"{grade_id}: solution text in the release: {line!r}"


def test_nbgrader_errors_sees_nbgrader_records_but_not_kernel_shutdown_noise():
    log = "\n".join(
        [
            "[AutogradeApp | INFO] Autograding /tmp/course/autograded/ada/01/01.ipynb",
            "[AutogradeApp | WARNING] Attribute 'checksum' for cell test_head_dim has changed!",
            "ERROR:tornado.general:Uncaught exception in ZMQStream callback",
            "zmq.error.ZMQError: Socket operation on non-socket",
            "[AutogradeApp | ERROR] Timeout waiting for execute reply (60s).",
            "[AutogradeApp | CRITICAL] Kernel died",
        ]
    )
    assert nbgrader_errors(log) == [
        "[AutogradeApp | ERROR] Timeout waiting for execute reply (60s).",
        "[AutogradeApp | CRITICAL] Kernel died",
    ]


@pytest.mark.slow
def test_regenerating_the_release_reproduces_the_committed_files(tmp_path):
    written = release.generate_into(tmp_path, STEMS, source_root=REPO.root)
    assert [p.relative_to(tmp_path) for p in written] == [REPO.release(s).relative_to(REPO.root) for s in STEMS]
    for path in written:
        committed = REPO.root / path.relative_to(tmp_path)
        assert path.read_bytes() == committed.read_bytes(), f"{committed} is stale: run `make exercises`"
    assert not (tmp_path / "gradebook.db").exists(), "--no-db must not create a gradebook"


@pytest.fixture(scope="module")
def validated(tmp_path_factory) -> dict[tuple[str, str], tuple[int, str]]:
    """``nbgrader validate`` over every source notebook (one command) and every release (another, ``--invert``), as in
    nbgrader's course example: {(stem, "source" | "release"): (the command's exit status, what it said of that
    notebook)}. One command per kind starts nbgrader once instead of once a notebook (2 s each here); the kernels are
    forked from a template with torch imported, as the autograde tests' are (helpers.nbgrader_course)."""
    base = tmp_path_factory.mktemp("validate")
    found = {}
    with forked_kernels(base / "kernels", 1) as [(kernel_args, env)]:
        for which in ("source", "release"):
            folder = base / which
            folder.mkdir()
            (folder / REPO.CONFIG_FILE).write_bytes(REPO.config_file.read_bytes())
            copies = []
            for stem in STEMS:
                path = REPO.solution(stem) if which == "source" else REPO.release(stem)
                copies.append(folder / path.name)
                copies[-1].write_bytes(path.read_bytes())
            args = ["validate", *map(str, copies), *kernel_args] + (["--invert"] if which == "release" else [])
            status, output = finish(start_nbgrader(folder, *args, env=env), timeout=1200)
            sections = re.split(r"^\[ValidateApp \| INFO\] Validating '(.+)'$", output, flags=re.MULTILINE)
            said = {Path(name).stem: text for name, text in zip(sections[1::2], sections[2::2])}
            for stem in STEMS:
                found[stem, which] = (status, said.get(stem, output))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("which", ["source", "release"])
@pytest.mark.parametrize("stem", STEMS)
def test_nbgrader_validate(validated, stem, which):
    """As in nbgrader's course example: the source passes every test, the release (inverted) passes none."""
    status, output = validated[stem, which]
    expected = (
        "Success! Your notebook passes all the tests."
        if which == "source"
        else ("Success! The notebook does not pass any tests.")
    )
    assert status == 0 and expected in output, output
