"""The book builds with no warnings, and its pages work in a real browser with no network.

Builds the whole book once (executing the chapters) into a temporary folder, then opens pages in headless Chromium
from Debian with every host name unresolvable, so any script, style or font fetched from the internet would fail.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from manyheads.course import hygiene

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*/*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """(build log, html folder) of a fresh build of the book from the working tree."""
    if not (ROOT / "_vendor").is_dir():
        pytest.fail("_vendor/ is missing: run `make vendor` (part of `make book` and `make test`) first")
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=1500,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"book build failed:\n{log[-6000:]}"
    return log, out / "_build" / "html"


# Chapters whose live view (manyheads.viz.live.figure_widget) shows a figure; chapter 3's shows a table.
FIGURE_WIDGETS = {"01_single_head_bottleneck", "02_subspaces", "04_specialization"}


def _html(book, stem_path: str) -> str:
    return (book[1] / f"{stem_path}.html").read_text(encoding="utf-8")


def test_build_has_no_warnings(book):
    # -W turns every Sphinx warning into a failure; with --keep-going it reports "finished with problems".
    log, _ = book
    assert "build succeeded" in log and "finished with problems" not in log


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_page_shows_executed_outputs_and_glued_numbers(book, chapter):
    html = _html(book, f"chapters/{chapter.stem}")
    assert html.count('class="cell_output') >= 5, "the chapter page shows too few executed outputs"
    assert html.count("<img") >= 3, "expected at least three figures"
    # Every glue reference in the prose was replaced by a value (myst-nb leaves the role text otherwise).
    assert "{glue" not in html
    # Live views keep their picture in an Image or HTML widget: an Output widget is what headless execution can
    # hang on (manyheads.viz.live explains why), so none may reach the saved widget state.
    assert "OutputModel" not in html
    nb = nbformat.read(chapter, as_version=4)
    glued = set(re.findall(r"\{glue(?::text)?\}`([A-Za-z_][A-Za-z0-9_]*)", "".join(c.source for c in nb.cells)))
    assert glued, "the chapter quotes no measured figure through glue"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_launch_buttons_open_the_committed_notebook_in_colab(book, chapter):
    url, branch = hygiene.repository_settings()
    repo = url.removeprefix("https://github.com/")
    expected = f"https://colab.research.google.com/github/{repo}/blob/{branch}/chapters/{chapter.name}"
    assert expected in _html(book, f"chapters/{chapter.stem}")


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_exercise_pages_are_rendered_but_not_executed(book, exercise):
    html = _html(book, f"exercises/{exercise.parent.name}/{exercise.stem}")
    assert "YOUR CODE HERE" in html
    assert 'class="cell_output' not in html, "exercise notebooks must never be executed by the book build"
    assert "BEGIN SOLUTION" not in html and "HIDDEN TESTS" not in html


def test_pages_load_no_scripts_or_styles_from_the_internet(book):
    _, html_dir = book
    for page in html_dir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="(https?://[^"]+)"', text)
        remote = [r for r in remote if not r.startswith("https://github.com")]  # repository/issue links are <a>-like
        assert remote == [], f"{page.relative_to(html_dir)} loads {remote}"


def _chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"chromium-profile-{os.getpid()}"
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
        "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no network: anything remote would fail to load
        "--virtual-time-budget=20000", *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_math_and_widgets_render_offline_in_chromium(book, chapter):
    page = book[1] / "chapters" / f"{chapter.stem}.html"
    dom = _chromium("--dump-dom", page.as_uri()).stdout
    assert "mjx-container" in dom, "MathJax did not typeset the page's math"
    assert re.search(r'class="[^"]*\bjupyter-widgets\b', dom), "no ipywidget was rendered from its saved state"
    if chapter.stem in FIGURE_WIDGETS:  # the live figure itself, drawn from the PNG in the saved state
        assert re.search(r'<img[^>]*class="[^"]*widget-image[^"]*"[^>]*src="blob:|'
                         r'<img[^>]*src="blob:[^>]*class="[^"]*widget-image', dom), "the live figure was not drawn"
    # A screenshot for people reviewing the build (kept beside the HTML).
    shot = book[1] / f"screenshot-{chapter.stem}.png"
    _chromium("--window-size=1280,2400", f"--screenshot={shot}", page.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000
