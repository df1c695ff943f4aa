"""Committed notebooks are clean, canonical and set up for Colab; the book's files agree with each other."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from manyheads.course import hygiene

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*/*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*/*.ipynb"))
ALL_NOTEBOOKS = CHAPTERS + SOLUTIONS + EXERCISES
STEM = re.compile(r"^\d\d_[a-z0-9_]+$")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_there_is_something_to_check():
    assert CHAPTERS and SOLUTIONS and EXERCISES


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_rel)
def test_notebook_is_clean_and_canonical(path):
    assert hygiene.problems(path) == []


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_rel)
def test_setup_cell_is_valid_python_and_inert_outside_colab(path):
    source = nbformat.read(path, as_version=4).cells[0].source
    ast.parse(source)
    # Outside Colab it must not install anything: run it here and watch subprocess.
    calls = []
    import subprocess

    namespace = {}
    original = subprocess.run
    subprocess.run = lambda *a, **k: calls.append(a)
    try:
        exec(compile(source, "setup-cell", "exec"), namespace)
    finally:
        subprocess.run = original
    assert calls == []


def test_setup_cell_follows_the_repository_in_config():
    url, branch = hygiene.repository_settings()
    assert url.startswith("https://github.com/")
    assert f"git+{url}@{branch}" in hygiene.setup_cell_source()


def test_cleaning_keeps_nbgrader_metadata_and_strips_outputs(tmp_path):
    source = SOLUTIONS[0]
    nb = nbformat.read(source, as_version=4)
    before = [c.metadata.get("nbgrader") for c in nb.cells]
    assert any(before), "the solution notebook should carry nbgrader metadata"
    # Simulate a maintainer who ran the notebook and saved it with outputs.
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = 3
            cell.outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    dirty = tmp_path / source.name
    nbformat.write(nb, dirty)
    assert hygiene.problems(dirty, ROOT)
    assert hygiene.clean(dirty, ROOT)
    assert hygiene.problems(dirty, ROOT) == []
    assert [c.metadata.get("nbgrader") for c in nbformat.read(dirty, as_version=4).cells] == before
    assert dirty.read_text() == source.read_text()


def test_clean_inserts_setup_cell_when_missing(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert any("set-up cell" in p for p in hygiene.problems(path, ROOT))
    hygiene.clean(path, ROOT)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].source == hygiene.setup_cell_source(ROOT) and cells[1].source == "# Title"


def test_problems_reports_unreadable_files(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [', encoding="utf-8")
    [problem] = hygiene.problems(path, ROOT)
    assert "not a readable notebook" in problem


def test_names_follow_the_stem_convention():
    for path in CHAPTERS:
        assert STEM.match(path.stem), path
    for path in SOLUTIONS + EXERCISES:
        assert STEM.match(path.stem) and path.parent.name == path.stem, path
    assert {p.stem for p in SOLUTIONS} == {p.stem for p in EXERCISES}
    assert {p.stem for p in SOLUTIONS} <= {p.stem for p in CHAPTERS}


def test_toc_lists_every_chapter_and_exercise_and_they_exist():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    files = re.findall(r"file:\s*(\S+)", toc)
    for f in files:
        assert any((ROOT / f).with_suffix(s).exists() for s in (".md", ".ipynb")), f"_toc.yml names missing {f}"
    for path in CHAPTERS + EXERCISES:
        assert _rel(path.with_suffix("")) in files, f"{_rel(path)} is not in _toc.yml"
    assert not any(f.startswith("solutions/") for f in files), "solutions must never be published in the book"


def test_book_never_executes_exercises_and_pins_book_version():
    config = (ROOT / "_config.yml").read_text(encoding="utf-8")
    assert re.search(r'exclude_patterns:\s*\["exercises/\*/\*\.ipynb"\]', config)
    assert "only_build_toc_files: true" in config
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert "jupyter-book>=1.0.4,<2" in requirements
    assert re.search(r"^torch==\d", requirements, re.MULTILINE)


def test_every_chapter_links_its_exercise():
    for path in CHAPTERS:
        exercise = ROOT / "exercises" / path.stem / f"{path.stem}.ipynb"
        if not exercise.exists():
            continue
        text = "".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        assert f"exercises/{path.stem}/{path.stem}.ipynb" in text, f"{_rel(path)} does not link its exercise"
