"""The wheel that Colab installs (pip install from the repository) carries everything the chapters load, and no
grading code: the grader (grader/, `manyheads grade`) is a distribution of its own that students never install."""

import ast
import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _build(source: Path, out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = out.glob("*.whl")
    return wheel


def _clean_copy(folder: Path, dest: Path) -> Path:
    # Build from a clean copy, as Colab's `pip install git+...` does: an editable install's egg-info in src/
    # would otherwise leak its file list into the build and hide missing package-data declarations.
    shutil.copytree(folder / "src", dest / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(folder / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def course_wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("course-wheel")
    return _build(_clean_copy(ROOT, tmp / "source"), tmp)


@pytest.mark.slow
def test_wheel_contains_package_data(course_wheel):
    names = set(zipfile.ZipFile(course_wheel).namelist())
    shipped_data = sorted(
        p.relative_to(ROOT / "src").as_posix()
        for p in (ROOT / "src/manyheads/data").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc")  # data, including the budget-check records
    )
    assert shipped_data, "src/manyheads/data should hold the probe data"
    missing = [p for p in shipped_data if p not in names]
    assert missing == [], f"the wheel lacks {missing}: add them to [tool.setuptools.package-data]"
    modules = sorted(p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src/manyheads").rglob("*.py"))
    assert [m for m in modules if m not in names] == []


def _metadata(wheel: Path) -> tuple[email.message.Message, str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        points = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
        return email.message_from_bytes(z.read(meta)), z.read(points[0]).decode() if points else ""


@pytest.mark.slow
def test_the_course_wheel_holds_no_grading_code(course_wheel):
    """What a student installs: the teaching library, the checks (with the own-work guard they run) and the
    maintainers' notebook tools; not the grader, its console command or its extras."""
    names = set(zipfile.ZipFile(course_wheel).namelist())
    assert not [n for n in names if "grader" in n or "/grading/" in n], sorted(names)
    grading = ("manyheads_grader", "nbclient", "distributed", "nbgrader.api", "nbgrader.apps")
    for name in sorted(n for n in names if n.endswith(".py")):
        tree = ast.parse(zipfile.ZipFile(course_wheel).read(name))
        imported = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
        imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        wrong = [m for m in imported if m.startswith(grading)]
        assert wrong == [], f"{name} imports {wrong}: grading code belongs in grader/"
    meta, entry_points = _metadata(course_wheel)
    assert "console_scripts" not in entry_points, entry_points
    assert meta.get_all("Provides-Extra") == ["colab"], meta.get_all("Provides-Extra")


@pytest.mark.slow
def test_the_grader_is_its_own_distribution_with_the_command_and_the_courses_version(tmp_path):
    import manyheads

    wheel = _build(_clean_copy(ROOT / "grader", tmp_path / "source"), tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "manyheads_grader/runner.py" in names and not [n for n in names if n.startswith("manyheads/")]
    # the pipeline's folders and the pages' templates ship too (package data, not only modules)
    assert {"manyheads_grader/output/lms/canvas.py", "manyheads_grader/execution/sandbox.py"} <= names
    assert {"manyheads_grader/output/templates/report.html.j2", "manyheads_grader/output/templates/report.css"} <= names
    meta, entry_points = _metadata(wheel)
    assert "manyheads = manyheads_grader.cli:main" in entry_points
    assert meta["Version"] == manyheads.__version__  # tools/cut_release.py writes both
    assert f"manyheads=={manyheads.__version__}" in meta.get_all("Requires-Dist")
    assert {"jinja2>=3.1", "markdown-it-py>=3.0"} <= set(meta.get_all("Requires-Dist"))
    assert "cluster" in meta.get_all("Provides-Extra")


def test_import_manyheads_never_imports_the_grader():
    code = (
        "import sys, pkgutil, importlib, manyheads\n"
        "for m in pkgutil.walk_packages(manyheads.__path__, 'manyheads.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(sorted(n for n in sys.modules if n.startswith('manyheads_grader')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
