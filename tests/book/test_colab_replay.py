"""The Colab replay in ``make test`` (tools/colab_replay.py): what a student gets from the links, replayed from this
clone's git objects. The notebooks are those of the commit the links name (_config.yml's repository.branch, the
release tag, resolved through the history) and the package is the one their set-up cell names, installed by that
cell itself (through git's ``insteadOf``, from a bare clone holding the release tag) in a fresh virtual environment
with Colab's versions (ipywidgets 7.7.1, numpy 2.1.3, matplotlib 3.10.0, ...; Python 3.11 and the local torch 2.13.0
CPU build, the closest installable here), in a kernel that has ``google.colab``, as Colab's does.

Here: every solution notebook top to bottom, each chapter up to its imports (its set-up cell, in each of the cell's
forms, and the imports, where a name the installed release lacks fails), and every widget of the package built, redrawn
and embedded under ipywidgets 7.7.1 (there) and 8 (here). None of Colab's versions may have moved. A fixture
repository whose chapter calls a name its release lacks must fail the same replay. ``make colab-replay`` (the
publishing workflow) replays every chapter top to bottom and the student versions up to their first answer cell.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import ipywidgets
import nbformat
import pytest
from helpers.kernel_cells import CELLS, assert_short, run_cells
from helpers.release_fixture import make_course_repository

from manyheads.course import delivery, hygiene
from manyheads.course.layout import REPO

ROOT = REPO.root
_spec = importlib.util.spec_from_file_location("colab_replay", ROOT / "tools" / "colab_replay.py")
replay_tool = sys.modules.setdefault("colab_replay", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(replay_tool)  # registered first: its dataclass looks itself up in sys.modules


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> dict:
    """The replay's report (tools/colab_replay.py writes it), after running it once for this file."""
    report = tmp_path_factory.mktemp("colab-replay") / "report.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "colab_replay.py"), "--what", "solutions", "openings", "widgets"]
        + ["--report", str(report)],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    if not report.exists():
        pytest.fail(
            f"the replay wrote no report (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    return {**json.loads(report.read_text()), "log": done.stdout[-6000:] + done.stderr[-3000:]}


@pytest.mark.slow
def test_every_solution_and_each_chapter_s_set_up_and_imports_run_in_colabs_versions(replay):
    ran = {(r["notebook"], r["cells"]): r for r in replay["results"]}
    failed = {name: r["error"] for name, r in ran.items() if not r["ok"]}
    assert failed == {}, replay["log"]
    notebooks = delivery.notebooks_at(replay["commit"])
    solutions = {p for p in notebooks if p.startswith("solutions/")}
    chapters = {p for p in notebooks if p.startswith("chapters/")}
    assert solutions and all((s, "all") in ran for s in solutions)
    openings = {name for name, cells in ran if name in chapters and cells not in ("all", "1-1")}
    assert openings == chapters  # each chapter up to its imports, so every form of the set-up cell runs
    forms = {tuple(hygiene.colab_needs(nbformat.read(p, as_version=4))) for p in REPO.chapters()}
    assert len(forms) >= 2, forms  # (), ("data",), ("decoder", "data")


@pytest.mark.slow
def test_the_replay_ran_the_notebooks_of_the_release_the_links_name(replay):
    ref = delivery.linked_ref()
    assert replay["ref"] == ref == hygiene.release_tag()
    assert replay["commit"] == delivery.resolve_ref(ref)
    assert replay["installs"] == {ref: replay["commit"]}, "the set-up cells install the release the links name"


@pytest.mark.slow
def test_the_set_up_cells_moved_none_of_colabs_versions(replay):
    assert replay["problems"] == [], replay["problems"]
    versions = replay["versions"]
    for name, version in replay_tool.COLAB.items():
        assert versions[name].split("+")[0] == version, name
    assert versions["manyheads"] == hygiene.project_version()
    assert replay["python"].startswith("3.11")


@pytest.mark.slow
def test_the_course_came_through_the_set_up_cells_address_from_the_snapshot(replay):
    """pip records the address it installed from: GitHub's, at the release tag, at the release's own commit."""
    python = replay_tool.venv_python()
    code = "import importlib.metadata as m; print(m.distribution('manyheads').read_text('direct_url.json'))"
    direct = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)
    url, _ = hygiene.repository_settings()
    assert direct["url"] == url and direct["vcs_info"]["vcs"] == "git"
    assert direct["vcs_info"]["requested_revision"] == hygiene.release_tag()
    assert direct["vcs_info"]["commit_id"] == delivery.release_commit(hygiene.project_version())


@pytest.mark.slow
def test_widgets_construct_redraw_and_embed_under_ipywidgets_7_and_8(replay):
    colab = replay["widgets"]
    assert replay["versions"]["ipywidgets"] == "7.7.1"
    assert len(colab) == 4 and all("built, redrew, embedded" in line for line in colab), replay["log"]
    assert "1.5.0" in " ".join(colab)  # ipywidgets 7's model versions: the state really came from 7.7.1
    assert ipywidgets.__version__.startswith("8.")
    here = replay_tool.check_widgets()
    assert [line.split(":")[0] for line in here] == [line.split(":")[0] for line in colab]
    assert "2.0.0" in " ".join(here)  # ipywidgets 8's


@pytest.mark.slow
def test_a_failing_cell_fails_the_replay_and_the_kernel_has_google_colab(replay, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('import sys\nassert "google.colab" in sys.modules'),
        nbformat.v4.new_code_cell('raise ValueError("a cell that fails")'),
    ]
    path = tmp_path / "fails.ipynb"
    nbformat.write(nb, path)
    python = replay_tool.venv_python()
    env = replay_tool.replay_env(python, replay_tool.WORK / "origin.git")
    result = replay_tool.run_notebook(path, python, env)
    assert not result.ok and "ValueError: a cell that fails" in result.error, result.error
    assert replay_tool.run_notebook(path, python, env, upto=1).ok


@pytest.mark.slow
def test_the_replay_fails_when_a_notebook_uses_a_name_its_installed_release_lacks(tmp_path):
    """A fixture course like this repository's main before release 0.3.0: the links open the chapter from main,
    which calls mh.shiny(); its set-up cell installs v0.1.0, which lacks it. Replayed from its own history, the
    chapter must fail on that name; the same chapter at the release (links naming v0.1.0) must pass."""
    course = tmp_path / "course"
    commits = make_course_repository(course, links="main")
    tool = [sys.executable, str(ROOT / "tools" / "colab_replay.py"), "--root", str(course), "--what", "chapters"]
    work = ["--work", str(replay_tool.WORK)]  # the same environment, started afresh by the replay
    done = subprocess.run([*tool, *work, "--report", str(tmp_path / "main.json")], capture_output=True, text=True)
    report = json.loads((tmp_path / "main.json").read_text())
    assert done.returncode == 1 and report["installs"] == {"v0.1.0": commits["release"]}, done.stdout + done.stderr
    [result] = report["results"]
    assert not result["ok"] and "has no attribute 'shiny'" in result["error"], result["error"]
    done = subprocess.run(
        [*tool, *work, "--ref", "v0.1.0", "--report", str(tmp_path / "release.json")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "release.json").read_text())["commit"] == commits["release"]


def test_the_version_check_catches_a_version_other_than_colabs():
    # The main environment has ipywidgets 8 and another numpy: the check must say so.
    found = replay_tool.moved(Path(sys.executable))
    assert f"ipywidgets: 7.7.1 -> {ipywidgets.__version__}" in found
    assert any(line.startswith("numpy: 2.1.3 -> ") for line in found)


@pytest.mark.parametrize("exercise", sorted(REPO.exercises_dir.glob("*/*.ipynb")), ids=lambda p: p.stem)
def test_student_versions_stop_before_their_first_answer_cell(exercise):
    nb = nbformat.read(exercise, as_version=4)
    first = replay_tool.first_answer_cell(nb)
    assert 1 < first < len(nb.cells), "the replay would run no cell after the set-up cell, or every cell"
    before = [c.source for c in nb.cells[:first] if c.cell_type == "code"]
    assert before[0].startswith(hygiene.SETUP_CELL_MARKER) and not any("NotImplementedError" in s for s in before)


@pytest.mark.slow
def test_a_failed_check_shows_one_message_and_the_students_line_under_colabs_ipython(replay):
    """Issue 38, item 3, in Colab's kernel (IPython 7.34, ipykernel 6.17.1), with this clone's package: the same
    short message and the student's line as in a local JupyterLab (tests/package/test_check_messages.py)."""
    python = replay_tool.venv_python()
    env = {**replay_tool.replay_env(python, replay_tool.WORK / "origin.git"), "PYTHONPATH": str(ROOT / "src")}
    argv = [str(python), "-c", replay_tool.KERNEL_LAUNCH, "-f", "{connection_file}"]
    assert replay["versions"]["ipython"] == "7.34.0"
    assert_short(run_cells(CELLS, argv=argv, env=env))
