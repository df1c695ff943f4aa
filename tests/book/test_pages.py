"""Every page of the built book as a reader sees it (conftest.py's ``book``, built once per run by whichever test
asks first, in practice test_book.py): Playwright driving Debian's Chromium over the built site, served over HTTP, at
desktop and phone widths, with nothing reachable but the book's own files, so any script, style or font fetched from
the internet would fail a test. Screenshots of every page at both widths go to _build/screenshots/ (the publishing
workflow uploads them as an artifact).

These tests were part of test_book.py; they live in a file of their own so that pytest-xdist (``--dist loadfile``) can
run them on the other worker once the build is there (tests/budget.toml's ``[schedule]`` runs this file last).
"""

from __future__ import annotations

import pytest
from helpers.browser import WIDTHS, pages_of, visit_every_page
from helpers.phone import phone_browser, wide_equations

from manyheads.course.layout import REPO

CHAPTERS = REPO.chapters()

pytestmark = pytest.mark.slow


def live_figure_chapters(book) -> set[str]:
    """The chapters whose live view shows a figure (manyheads.viz.live.figure_widget): read from each executed
    notebook's saved widget state (an Image model), not listed by hand; chapter 3's calculator shows a table."""
    found = set()
    for chapter in CHAPTERS:
        widgets = book.executed_notebook(chapter).metadata.get("widgets", {})
        state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        if any(model.get("model_name") == "ImageModel" for model in state.values()):
            found.add(chapter.stem)
    return found


SCREENSHOTS = REPO.root / "_build" / "screenshots"


@pytest.fixture(scope="module")
def seen(book) -> dict[str, dict[str, dict]]:
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    return visit_every_page(book.html, SCREENSHOTS)


def _each(seen, key):
    return {f"{page} ({width})": facts[key] for page, by_width in seen.items() for width, facts in by_width.items()}


@pytest.mark.browser
def test_every_page_loads_with_no_console_error_page_error_or_failed_request(seen):
    """Served over HTTP as the published site is: a response of 400 or more (a missing font, icon or script) fails."""
    for key in ("console", "page_errors", "failed", "bad_status"):
        assert {page: found for page, found in _each(seen, key).items() if found} == {}, key


@pytest.mark.browser
def test_no_page_asks_for_anything_outside_the_book(seen):
    assert {page: found for page, found in _each(seen, "outside").items() if found} == {}


@pytest.mark.browser
def test_no_page_is_wider_than_a_phone_screen(seen):
    too_wide = {
        page: (facts["pageWidth"], facts["overflowing"])
        for page, by_width in seen.items()
        for width, facts in by_width.items()
        if facts["pageWidth"] > facts["viewport"] + 1
    }
    assert too_wide == {}


@pytest.mark.browser
def test_wide_tables_scroll_with_a_cue_instead_of_being_cut(seen):
    """A table wider than its column (chapter 5's speed table, chapter 7's KV-cache and conversion tables, the
    capstone's) scrolls inside a box that shows that it does, at 1280 px and on a phone."""
    assert {page: tables for page, tables in _each(seen, "wideTables").items() if tables} == {}


@pytest.mark.browser
def test_attention_views_fit_the_column_so_no_head_hides_behind_a_scrollbar(seen):
    assert {page: n for page, n in _each(seen, "attentionViewsTooWide").items() if n} == {}


@pytest.mark.browser
def test_code_lines_wrap_instead_of_being_clipped(seen):
    clipped = {page: lines for page, lines in _each(seen, "clipped").items() if lines}
    assert clipped == {}


@pytest.mark.browser
def test_equation_references_have_one_pair_of_parentheses(seen):
    assert {page: refs for page, refs in _each(seen, "doubledEquationRefs").items() if refs} == {}


@pytest.mark.browser
def test_math_is_typeset_and_saved_widgets_are_drawn(seen, book):
    for page, by_width in seen.items():
        for width, facts in by_width.items():
            if facts["mathSource"]:
                assert facts["mathDrawn"], f"{page} ({width}): MathJax typeset nothing"
            if facts["widgetStates"]:
                assert facts["widgetsDrawn"] >= facts["widgetStates"], f"{page} ({width}): widgets not drawn"
    live = live_figure_chapters(book)
    assert len(live) >= 2, f"only {live} store a live figure: is the widget state still saved with the notebooks?"
    for chapter in CHAPTERS:  # the live figure itself, drawn from the PNG in the saved state, and only there
        for width, facts in seen[f"chapters/{chapter.stem}.html"].items():
            if chapter.stem in live:
                assert facts["liveFigures"], f"{chapter.stem} ({width}): the live figure was not drawn"
            else:
                assert not facts["liveFigures"], f"{chapter.stem} ({width}): a live figure its notebook does not store"


@pytest.mark.browser
def test_every_image_has_alt_text(seen):
    missing = {
        page: [image["src"] for image in images if not image["alt"]]
        for page, images in _each(seen, "images").items()
        if any(not image["alt"] for image in images)
    }
    assert missing == {}


@pytest.mark.browser
def test_every_figure_has_alt_text_that_describes_it(seen):
    """myst-nb's default alt text is the image's file name: each figure cell gives its own (``mystnb.image.alt``)."""
    named_by_file = {
        page: [image["src"] for image in images if image["alt"] == image["src"]]
        for page, images in _each(seen, "images").items()
        if any(image["alt"] == image["src"] for image in images)
    }
    assert named_by_file == {}


@pytest.mark.browser
def test_a_screenshot_of_every_page_at_each_width(seen, book):
    for name in WIDTHS:
        shots = {p.name for p in (SCREENSHOTS / name).glob("*.png")}
        expected = {page.relative_to(book.html).as_posix().replace("/", "__") + ".png" for page in pages_of(book.html)}
        assert expected <= shots, sorted(expected - shots)


@pytest.fixture(scope="module")
def browser():
    with phone_browser() as launched:
        yield launched


@pytest.mark.browser
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_equations_fit_a_phone_or_scroll_with_a_cue(book, chapter, browser):
    """At 390 px every display equation fits its column or scrolls with a visible cue (tests/helpers/phone.py)."""
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    assert wide_equations((book.html / "chapters" / f"{chapter.stem}.html").resolve().as_uri(), browser) == []
