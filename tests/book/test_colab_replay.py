"""The Colab replay in ``make test`` (tools/colab_replay.py, issue 16): a fresh virtual environment with Colab's
versions (ipywidgets 7.7.1, numpy 2.1.3, matplotlib 3.10.0, ...; Python 3.11 and the local torch 2.13.0 CPU build,
the closest installable here), where the notebooks' own set-up cell installs the course (from a snapshot of this
working tree, through git's ``insteadOf``) in a kernel that has ``google.colab``, as Colab's does.

Here: every solution notebook (exercises 1-7) top to bottom, the set-up cell of one chapter per form of the cell
(with ``NEEDS = ["data"]`` and ``["decoder", "data"]``; the solutions' cell has none), and every widget of the
package built, redrawn and embedded under ipywidgets 7.7.1 (there) and 8 (here). None of Colab's versions may have
moved. Measured on 2 cores with other test runs beside it (load average 4-5): 175 s once the environment exists;
making it adds about 130 s, once (it is reused while tools/colab_replay.py's COLAB table does not change).
``make colab-replay`` (the publishing workflow) adds every chapter top to bottom and the student versions in
exercises/ up to their first answer cell.
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

from manyheads.course import hygiene
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
        [sys.executable, str(ROOT / "tools" / "colab_replay.py"), "--what", "solutions", "setup-cells", "widgets"]
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
def test_every_solution_and_every_form_of_the_set_up_cell_runs_in_colabs_versions(replay):
    ran = {r["notebook"]: r for r in replay["results"]}
    failed = {name: r["error"] for name, r in ran.items() if not r["ok"]}
    assert failed == {}, replay["log"]
    solutions = {p.relative_to(ROOT).as_posix() for p in REPO.solutions_dir.glob("*/*.ipynb")}
    assert solutions and solutions <= set(ran) and all(ran[s]["cells"] == "all" for s in solutions)
    forms = {tuple(hygiene.colab_needs(nbformat.read(p, as_version=4))) for p in REPO.chapters()}
    setup_cells = [r for r in replay["results"] if r["cells"] == "1-1"]
    assert len(setup_cells) == len(forms) and len(forms) >= 2, forms  # one chapter per form of the cell


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
    """pip records the address it installed from: GitHub's, at the release tag, at the snapshot's commit."""
    python = replay_tool.venv_python()
    code = "import importlib.metadata as m; print(m.distribution('manyheads').read_text('direct_url.json'))"
    direct = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)
    url, _ = hygiene.repository_settings()
    assert direct["url"] == url and direct["vcs_info"]["vcs"] == "git"
    assert direct["vcs_info"]["requested_revision"] == hygiene.release_tag()
    origin = replay_tool.WORK / "origin"
    head = subprocess.run(["git", "-C", str(origin), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert direct["vcs_info"]["commit_id"] == head.stdout.strip()


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
    env = replay_tool.replay_env(python, replay_tool.WORK / "origin")
    result = replay_tool.run_notebook(path, python, env)
    assert not result.ok and "ValueError: a cell that fails" in result.error, result.error
    assert replay_tool.run_notebook(path, python, env, upto=1).ok


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
