"""What a student and a reader get: one commit per course version, found from the history, named by every link.

The release ``vX.Y.Z`` is the commit that set the version in pyproject.toml (manyheads.course.delivery). These tests
read it from git's objects, never from the working tree: every Colab link of the README and every launch button of
the book opens a path that exists at that commit, the set-up cells there install that very release, and every name
a notebook there takes from the package resolves in the package of the release its set-up cell installs, imported
from that release's ``git archive``. They need the whole history, and fail (never skip) without it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from helpers.release_fixture import make_course_repository

from manyheads.course import delivery, hygiene
from manyheads.course.layout import REPO
from manyheads.course.package_names import missing_names, names_used

ROOT = REPO.root
COLAB_LINK = re.compile(
    r"https://colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/([\w.-]+)/([\w./-]+\.ipynb)"
)


@pytest.fixture(scope="module")
def linked() -> tuple[str, str]:
    """(ref the links name, the commit it resolves to) for this clone."""
    ref = delivery.linked_ref(ROOT)
    return ref, delivery.resolve_ref(ref, ROOT)


def _notebook_at(commit: str, path: str) -> nbformat.NotebookNode:
    return nbformat.reads(delivery.read_at(commit, path).decode(), as_version=4)


# --- one commit per version ----------------------------------------------------------------------------------------


def test_the_links_name_the_release_of_the_version_in_pyproject(linked):
    ref, commit = linked
    assert ref == hygiene.release_tag(), "_config.yml's repository.branch must be the release tag v<version>"
    assert delivery.version_at(commit) == hygiene.project_version()
    parents = delivery.git("rev-list", "--parents", "-n", "1", commit).split()[1:]
    assert all(delivery.version_at(p) != hygiene.project_version() for p in parents), "not the commit that set it"
    head = delivery.git("rev-parse", "HEAD").strip()
    assert delivery.git("merge-base", "--is-ancestor", commit, head) == ""  # the release is in main's history


def test_every_release_is_found_in_the_history_as_the_commit_that_set_its_version():
    # The two releases before the current one, as this repository's history records them.
    assert delivery.release_commit("0.2.0").startswith("dae62589")  # "Publishing and release 0.2.0"
    assert delivery.version_at("dae62589^") == "0.1.0"
    with pytest.raises(delivery.ReleaseNotFound, match=r"no commit .* sets version 9\.9\.9 .*versions set: 0\.1\.0"):
        delivery.release_commit("9.9.9")


def test_every_colab_link_in_the_readme_opens_a_notebook_of_the_release(linked):
    ref, commit = linked
    url, _ = hygiene.repository_settings()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = COLAB_LINK.findall(readme)
    assert links, "the README has no Colab links"
    for repo, link_ref, path in links:
        assert (repo, link_ref) == (url.removeprefix("https://github.com/"), ref), path
        assert delivery.read_at(commit, path) is not None, f"{path} does not exist at {ref} ({commit[:12]})"


def test_the_readme_links_every_chapter_and_exercise_of_the_book(linked):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked_paths = {path for _, _, path in COLAB_LINK.findall(readme)}
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    notebooks = {f"{p}.ipynb" for p in pages if (ROOT / f"{p}.ipynb").is_file()}
    assert notebooks and notebooks <= linked_paths, f"not in the README's Colab table: {notebooks - linked_paths}"


def test_every_launch_button_opens_a_notebook_that_exists_at_the_release(linked):
    """The book's launch buttons open <toc page>.ipynb at repository.branch: each must exist in the release's git
    objects (a notebook added or renamed on main since the release would give a dead link: cut a release)."""
    ref, commit = linked
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    notebooks = [f"{p}.ipynb" for p in pages if (ROOT / f"{p}.ipynb").is_file()]
    missing = [p for p in notebooks if delivery.read_at(commit, p) is None]
    assert notebooks and missing == [], f"launch buttons would open paths missing at {ref}: {missing}"


def test_the_release_s_notebooks_install_the_release_and_carry_its_version(linked):
    ref, commit = linked
    url, _ = hygiene.repository_settings()
    paths = delivery.notebooks_at(commit)
    assert any(p.startswith("chapters/") for p in paths) and any(p.startswith("exercises/") for p in paths)
    for path in paths:
        nb = _notebook_at(commit, path)
        assert delivery.installed_ref(nb.cells[0].source) == (url, ref), path
        assert nb.metadata.get("manyheads", {}).get("version") == ref[1:], path


# --- the names a notebook takes from the package of the release it installs ----------------------------------------


def _names_missing_at(commit: str, root: Path, scratch: Path) -> dict[str, dict[str, str]]:
    """{notebook: {name: why}} for every notebook at ``commit`` whose names do not resolve in the package its
    set-up cell installs, imported from that release's git archive."""
    by_release: dict[str, set[str]] = {}
    users: dict[str, list[tuple[str, set[str]]]] = {}
    for path in delivery.notebooks_at(commit, root):
        nb = nbformat.reads(delivery.read_at(commit, path, root).decode(), as_version=4)
        installed = delivery.installed_ref(nb.cells[0].source)
        assert installed, f"{path} at {commit[:12]} has no set-up cell that installs the course"
        release = delivery.resolve_ref(installed[1], root)
        names = names_used(nb)
        by_release.setdefault(release, set()).update(names)
        users.setdefault(release, []).append((path, names))
    found = {}
    for release, names in by_release.items():
        package = delivery.archive(release, scratch / release, root) / "src"
        missing = missing_names(names, package)
        for path, used in users[release]:
            if used & set(missing):
                found[path] = {n: missing[n] for n in sorted(used & set(missing))}
    return found


def test_every_name_a_linked_notebook_takes_resolves_in_the_release_it_installs(linked, tmp_path):
    _, commit = linked
    assert _names_missing_at(commit, ROOT, tmp_path) == {}


def test_the_names_check_catches_the_skew_students_met_on_main_before_0_3_0(tmp_path):
    """81d11bc, main before release 0.3.0: the links opened notebooks from main, whose set-up cells installed
    v0.2.0, which lacks mh.use_course_style (every chapter's second cell) and mh.viz.annotate_cells (chapter 2)."""
    assert delivery.linked_ref(ROOT, "81d11bc") == "main"
    found = _names_missing_at("81d11bc", ROOT, tmp_path)
    chapters = {p for p in found if p.startswith("chapters/")}
    assert len(chapters) == 8 and all("manyheads.use_course_style" in found[p] for p in chapters)
    assert "manyheads.viz.annotate_cells" in found["chapters/02_subspaces.ipynb"]
    assert (
        "has no attribute 'use_course_style'"
        in found["chapters/01_single_head_bottleneck.ipynb"]["manyheads.use_course_style"]
    )


def test_the_names_check_catches_a_fixture_whose_notebook_calls_a_name_its_release_lacks(tmp_path):
    commits = make_course_repository(tmp_path / "course", links="main")
    found = _names_missing_at(commits["main"], tmp_path / "course", tmp_path / "scratch")
    assert found == {
        "chapters/01_demo.ipynb": {"manyheads.shiny": "AttributeError: module 'manyheads' has no attribute 'shiny'"}
    }
    assert _names_missing_at(commits["release"], tmp_path / "course", tmp_path / "scratch2") == {}


def test_names_used_reads_every_form_of_taking_a_name():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "%matplotlib inline\nimport manyheads as mh\nfrom manyheads import glue\n"
            "from manyheads.models import llama as ll\nimport manyheads.analysis.pruning as pr\n"
            "import manyheads.viz\nmh.viz.annotate_cells(ax)\nmh.checks.check_softmax(f)\nll.load_decoder()\n"
            "pr.pruning_curve(x).plot()\nmanyheads.viz.live\nx = mh.device().type"
        )
    ]
    assert names_used(nb) == {
        "manyheads",
        "manyheads.glue",
        "manyheads.models.llama",
        "manyheads.models.llama.load_decoder",
        "manyheads.analysis.pruning",
        "manyheads.analysis.pruning.pruning_curve",
        "manyheads.viz",
        "manyheads.viz.annotate_cells",
        "manyheads.checks.check_softmax",
        "manyheads.viz.live",
        "manyheads.device",
    }


# --- history needed, tags checked ----------------------------------------------------------------------------------


def test_a_shallow_clone_fails_with_clone_with_full_history(tmp_path):
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", ROOT.as_uri(), str(shallow)], check=True)
    with pytest.raises(delivery.HistoryMissing, match="clone with full history"):
        delivery.release_commit(hygiene.project_version(), shallow)
    with pytest.raises(delivery.HistoryMissing, match="clone with full history"):
        delivery.resolve_ref("main", shallow)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(delivery.HistoryMissing, match="not a git clone.*clone with full history"):
        delivery.release_commit("0.1.0", plain)


def test_a_tag_on_another_commit_than_the_release_is_refused_and_check_tag_says_so(tmp_path):
    course = tmp_path / "course"
    commits = make_course_repository(course, links="v0.1.0")
    assert delivery.release_commit("0.1.0", course) == commits["release"]  # no tag needed
    subprocess.run(["git", "-C", str(course), "tag", "v0.1.0", commits["main"]], check=True)
    with pytest.raises(delivery.ReleaseNotFound, match=r"the tag v0\.1\.0 points at .*move the tag"):
        delivery.release_commit("0.1.0", course)
    subprocess.run(
        ["git", "-C", str(course), "tag", "-f", "v0.1.0", commits["release"]], check=True, capture_output=True
    )
    check = [
        sys.executable,
        "-c",
        "import sys, pathlib; from manyheads.course import delivery as d; "
        "sys.exit(d.main(['check-tag', sys.argv[1]], root=pathlib.Path(sys.argv[2])))",
    ]
    # HEAD (development) is not the release: the Pages workflow would refuse to publish it.
    done = subprocess.run([*check, "v0.1.0", str(course)], capture_output=True, text=True)
    assert done.returncode == 1 and "is not this commit's release" in done.stderr, done.stderr
    subprocess.run(["git", "-C", str(course), "checkout", "-q", commits["release"]], check=True)
    done = subprocess.run([*check, "v0.1.0", str(course)], capture_output=True, text=True)
    assert done.returncode == 0 and "is the release commit" in done.stdout, done.stderr


# --- cutting a release ---------------------------------------------------------------------------------------------


def test_cut_release_names_the_new_version_everywhere(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("cut_release", ROOT / "tools" / "cut_release.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    names = ("pyproject.toml", "grader/pyproject.toml", "_config.yml", "README.md", "CHANGELOG.md")
    for name in (*names, "src/manyheads/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    import datetime

    tool.write_version("9.8.7", tmp_path, today=datetime.date(2030, 1, 2))
    assert hygiene.project_version(tmp_path) == "9.8.7"
    assert delivery.linked_ref(tmp_path) == "v9.8.7"
    assert 'version__ = "9.8.7"' in (tmp_path / "src/manyheads/__init__.py").read_text()
    grader = (tmp_path / "grader/pyproject.toml").read_text()  # the grader: the same version, this course release
    assert 'version = "9.8.7"' in grader and '"manyheads==9.8.7"' in grader
    readme_refs = {ref for _, ref, _ in COLAB_LINK.findall((tmp_path / "README.md").read_text())}
    assert readme_refs == {"v9.8.7"}
    changelog = (tmp_path / "CHANGELOG.md").read_text()
    assert "## [Unreleased]\n\n## [9.8.7] - 2030-01-02\n" in changelog
    assert "/releases/tag/v9.8.7" in changelog and "/compare/v9.8.7...HEAD" in changelog
    with pytest.raises(SystemExit, match="X.Y.Z"):
        tool.write_version("1.0", tmp_path)
