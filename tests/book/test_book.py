"""The book, built once per test run (conftest.py's ``book``): every chapter executed (once, by the build), no warnings,
and pages whose HTML holds what the chapters computed.

The whole book is built with ``jupyter-book build -W -n --keep-going`` (through tools/build_book.py, two chapters at a
time, as ``make book`` builds it) into a temporary folder, which executes every chapter through jupyter-cache. The
chapter tests read the executed notebooks and run times from that build instead of running the chapters again, with
the checkers of test_claims.py and test_phone_layout.py. conftest.py builds it once per run under a file lock,
whichever pytest-xdist worker asks first; the pages in a real browser are test_pages.py's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from helpers import evidence
from helpers.browser import pages_of
from helpers.claims import check, glued_values, page_from_html, page_from_notebook

from manyheads.course import hygiene
from manyheads.course.layout import REPO

CHAPTERS = REPO.chapters()
EXERCISES = sorted(REPO.exercises_dir.glob("*/*.ipynb"))
# Seconds a chapter's cell may run (what the chapters were held to when they were executed on their own).
CELL_BUDGET = 300

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_times(book) -> dict[str, float]:
    """{chapter file name: seconds its execution took}, from the build's jupyter-cache."""
    from jupyter_cache import get_cache

    cache = get_cache(book.build_dir / ".jupyter_cache")
    return {Path(r.uri).name: r.data.get("execution_seconds") for r in cache.list_cache_records()}


def test_build_has_no_warnings(book):
    # -W turns every Sphinx warning into a failure; with --keep-going it reports "finished with problems".
    assert book.returncode == 0, f"book build failed:\n{book.log[-6000:]}"
    assert "build succeeded" in book.log and "finished with problems" not in book.log


# ------------------------------------------------------------------------------------------------------------------
# The chapters, as the build executed them


def test_the_build_holds_each_cell_to_the_chapter_budget():
    execute = yaml.safe_load((REPO.root / "_config.yml").read_text(encoding="utf-8"))["execute"]
    assert execute["execute_notebooks"] == "cache" and 0 < execute["timeout"] <= CELL_BUDGET
    assert execute["allow_errors"] is False and execute["raise_on_error"] is True


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_executes_without_errors(book, run_times, chapter):
    """Every code cell ran (in order, once) and none raised; the build recorded how long the chapter took."""
    executed = book.executed(chapter)
    assert executed.is_file(), f"the build did not execute {chapter.name}:\n{book.log_about(chapter)}"
    assert not list(book.html.glob(f"reports/**/{chapter.stem}*.log")), book.log_about(chapter)
    nb = nbformat.read(executed, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    source = [c for c in nbformat.read(chapter, as_version=4).cells if c.cell_type == "code" and c.source.strip()]
    assert [c.source for c in code] == [c.source for c in source], "the executed notebook is not this chapter"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "not every cell ran, in order"
    errors = [out for c in code for out in c.outputs if out.output_type == "error"]
    assert not errors, errors
    assert run_times.get(chapter.name) is not None, f"no run time recorded for {chapter.name}: {run_times}"


# ------------------------------------------------------------------------------------------------------------------
# The pages


def _html(book, stem_path: str) -> str:
    return (book.html / f"{stem_path}.html").read_text(encoding="utf-8")


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
    assert "YOUR CODE HERE" in html or "YOUR ANSWER HERE" in html  # the capstone has written answers only
    assert 'class="cell_output' not in html, "exercise notebooks must never be executed by the book build"
    assert "BEGIN SOLUTION" not in html and "HIDDEN TESTS" not in html


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_pages_show_no_frozen_progress_bars(book, chapter):
    """Training loops show a tqdm bar live (an ipywidgets FloatProgress in a box); saved into the static page it is a
    dead widget, so the book's kernels hide them (MANYHEADS_STATIC_BUILD; review finding 1-9). No explorer of the
    course uses a progress widget, so any in the page's embedded widget state is a leftover bar."""
    html = _html(book, f"chapters/{chapter.stem}")
    assert re.findall(r'"model_name": *"(?:Float|Int)ProgressModel"', html) == []


def test_pages_load_no_scripts_or_styles_from_the_internet(book):
    for page in book.html.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="(https?://[^"]+)"', text)
        remote = [r for r in remote if not r.startswith("https://github.com")]  # repository/issue links are <a>-like
        assert remote == [], f"{page.relative_to(book.html)} loads {remote}"


def test_every_page_names_its_icon_so_no_browser_asks_for_a_missing_favicon(book):
    """Without a <link rel="icon"> a browser asks the site root for /favicon.ico, and the 404 lands on the reader's
    console (seen on every page of 0.6.0 in Chromium; the browser tests' fresh contexts did not always ask)."""
    for page in pages_of(book.html):
        text = page.read_text(encoding="utf-8")
        if 'http-equiv="refresh"' in text.lower():
            continue  # a redirect (a moved page's, _ext/redirects.py, or index.html's) sends the reader on at once
        icon = re.search(r'<link rel="icon" href="([^"]+)"', text)
        assert icon, f"{page.relative_to(book.html)} names no icon"
        assert (page.parent / icon.group(1)).resolve().is_file(), f"{page.relative_to(book.html)}: {icon.group(1)}"


# --- claims and phones (CONTRIBUTING.md): the checkers of test_claims.py and test_phone_layout.py over this build ---
# They live here, beside the build, so that the other test worker never waits for it.


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_words_follow_from_its_numbers(book, chapter):
    """The built page's words against the built page's numbers (tests/helpers/claims.py, rules 1-3)."""
    html = (book.html / f"chapters/{chapter.stem}.html").read_text(encoding="utf-8")
    glued = glued_values(book.executed_notebook(chapter))
    assert check(page_from_html(html, glued)) == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_summary_quotes_its_glued_values(book, chapter):
    """The executed notebook's glue, rendered as myst-nb renders it, read the same way (no HTML parsing involved)."""
    nb = book.executed_notebook(chapter)
    assert glued_values(nb), f"{chapter.stem}: no glued values found in the build (myst-nb's .glue.json)"
    assert check(page_from_notebook(nb)) == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_summary_boxes_and_quiz_agree_with_its_experiments(book, chapter):
    """The chapter's own evidence checks (tests/helpers/evidence/ch_<stem>.py) over the executed notebook."""
    module = evidence.module_for(chapter.stem)
    if module is None:
        pytest.skip(f"{chapter.stem} has no evidence module yet")
    nb = book.executed_notebook(chapter)
    assert module.check(evidence.numbers(glued_values(nb)), nb) == []


def test_a_moved_page_s_old_address_leads_to_the_new_page(book):
    """The interlude's 0.4 address (chapters/06_meet_a_decoder.html) sends the reader to the page that exists now."""
    old = _html(book, "chapters/06_meet_a_decoder")
    target = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', old).group(1)
    assert target == "interlude_meet_a_decoder.html" and (book.html / "chapters" / target).is_file()


def test_the_landing_page_quotes_the_committed_chapter_times(book):
    """The landing page's run times are the committed benchmark's (benchmarks/results/chapters_solo.json), as built."""
    data = json.loads((REPO.root / "benchmarks/results/chapters_solo.json").read_text(encoding="utf-8"))
    seconds = [float(row["solo_s"]) for row in data["rows"] if (REPO.chapters_dir / f"{row['chapter']}.ipynb").exists()]
    text = " ".join(BeautifulSoup(_html(book, "intro"), "html.parser").get_text().split())
    assert f"in {min(seconds):.0f} s to {max(seconds):.0f} s" in text
    assert data["meta"]["when"][:10] in text


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda p: p.stem)
def test_exercise_page_words_follow_from_its_numbers(book, exercise):
    """The standard covers the exercises and the capstone too: their built pages (not executed, so no glue) against
    rules 1 and 2; the mark schemes, which the pages leave out, are read from solutions/ in test_claims.py."""
    html = _html(book, f"exercises/{exercise.parent.name}/{exercise.stem}")
    page = page_from_html(html, {})
    assert page.sentences, f"{exercise.stem}: the checker found no text on the built page"
    assert check(page) == []
