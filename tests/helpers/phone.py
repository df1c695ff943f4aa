"""Display equations that do not fit a phone: shared by tests/book/test_phone_layout.py (planted pages) and
tests/book/test_pages.py (the built chapters)."""

from __future__ import annotations

import contextlib

import pytest

from helpers.browser import CHROMIUM

PHONE = (390, 844)

WIDE_EQUATIONS = """() => {
  const cued = (box) => {
    for (let e = box; e && e !== document.body; e = e.parentElement) {
      const s = getComputedStyle(e);
      const scrolls = ['auto', 'scroll'].includes(s.overflowX);
      const cue = e.hasAttribute('data-scroll-cue') || s.boxShadow !== 'none' || s.backgroundImage !== 'none'
        || (s.maskImage && s.maskImage !== 'none') || (s.webkitMaskImage && s.webkitMaskImage !== 'none');
      if (scrolls) return cue;
    }
    return false;
  };
  return [...document.querySelectorAll('mjx-container[display="true"]')].filter(eq => {
    const inner = eq.firstElementChild || eq;
    const column = (eq.closest('article') || document.body).clientWidth;
    const width = Math.max(inner.scrollWidth, inner.getBoundingClientRect().width, eq.scrollWidth);
    return width > Math.min(column, eq.clientWidth || column) + 1 && !cued(eq);
  }).map(eq => (eq.textContent || '').slice(0, 60));
}"""


@contextlib.contextmanager
def phone_browser():
    """One headless Chromium (Debian's, driven by Playwright) for :func:`wide_equations`, so that a run of pages
    starts the browser once; each page still opens in a fresh context of its own."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def wide_equations(url: str, browser=None) -> list[str]:
    """Display equations on the page at ``url`` that are wider than their column at 390 px with no scroll cue;
    ``browser`` (from :func:`phone_browser`) or a browser of its own."""
    if browser is None:
        with phone_browser() as own:
            return wide_equations(url, own)
    context = browser.new_context(viewport={"width": PHONE[0], "height": PHONE[1]})  # fresh storage
    try:
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())
        page.goto(url, wait_until="load")
        try:
            page.wait_for_function(
                "() => !document.querySelector('.math') || document.querySelector('mjx-container')", timeout=30_000
            )
        except Exception:  # noqa: BLE001 (a page without MathJax: the planted fixture)
            pass
        return page.evaluate(WIDE_EQUATIONS)
    finally:
        context.close()
