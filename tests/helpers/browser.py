"""Headless Chromium (Debian's) for the tests that look at pages as a reader's browser would, with no network."""

from __future__ import annotations

import contextlib
import functools
import http.server
import mimetypes
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Debian's chromium here; GitHub's Ubuntu runners ship Google Chrome instead.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium(*args: str, timeout: int = 120, budget_ms: int = 20000) -> subprocess.CompletedProcess:
    """Run headless Chromium with ``args`` (e.g. ``--dump-dom URL``); any remote host fails to resolve."""
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"chromium-profile-{os.getpid()}"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no network: anything remote would fail to load
        f"--virtual-time-budget={budget_ms}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


# --- Every page in a real browser (Playwright driving Debian's Chromium: no browser is downloaded) ----------------

WIDTHS = {"desktop": (1280, 900), "phone": (375, 812)}
# Whole-page screenshots take 2-3 s and 2-3 MB each: the publishing workflow asks for them, make test takes the
# first screen of each page.
FULL_PAGE_SHOTS = os.environ.get("MANYHEADS_FULL_PAGE_SCREENSHOTS") == "1"

# What the page looks like to the test: evaluated in the page once it has loaded and settled.
PAGE_FACTS = """() => {
  const width = window.innerWidth;
  const article = document.querySelector('article') || document.body;
  const code = [...article.querySelectorAll('div.cell_input pre, div[class^="highlight-"]:not(.output) pre')]
    .filter(pre => !pre.closest('.cell_output'));
  const clipped = code.filter(pre => pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => pre.innerText.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 100));
  const scrollBoxes = '.cell_output, .table-wrapper, mjx-container, .jupyter-widgets, table, .highlight';
  const overflowing = [...article.querySelectorAll('*')]
    .filter(e => e.getBoundingClientRect().right > width + 1 && !e.closest(scrollBoxes))
    .slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${String(e.className).slice(0, 40)}`);
  const images = [...article.querySelectorAll('img')].map(img => ({
    src: img.getAttribute('src') || '', alt: (img.getAttribute('alt') || '').trim()}));
  return {
    pageWidth: document.documentElement.scrollWidth,
    viewport: width,
    clipped,
    overflowing,
    images,
    doubledEquationRefs: (article.innerText.match(/\\(\\(\\d+(\\.\\d+)?\\)\\)/g) || []),
    widgetStates: document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length,
    widgetsDrawn: document.querySelectorAll('.jupyter-widgets').length,
    liveFigures: document.querySelectorAll('img.widget-image[src^="blob:"]').length,
    attentionViewsTooWide: [...article.querySelectorAll('[id^="bertviz"] svg')]
      .filter(svg => svg.getBoundingClientRect().width > svg.closest('[id^="bertviz"]').clientWidth + 1).length,
    wideTables: [...article.querySelectorAll('table')].filter(table => {
      // A table wider than its column must scroll inside a box that shows it does (book_static/scroll_cue.js and
      // manyheads.css), not be cut at the edge (issue 27: tables were cut at 1280 px and on phones).
      for (let e = table.parentElement; e && e !== article.parentElement; e = e.parentElement) {
        const s = getComputedStyle(e);
        if (['auto', 'scroll', 'hidden', 'clip'].includes(s.overflowX)) {
          if (e.scrollWidth <= e.clientWidth + 1) return false;
          // the cue a reader sees over any cell colour: the content fades at the edge (a shadow behind the content
          // is hidden by striped table cells, so a background does not count)
          const cue = (s.maskImage && s.maskImage !== 'none') || (s.webkitMaskImage && s.webkitMaskImage !== 'none');
          return !(['auto', 'scroll'].includes(s.overflowX) && cue);
        }
      }
      return table.getBoundingClientRect().right > article.getBoundingClientRect().right + 1;
    }).map(table => (table.innerText || '').replace(/ +/g, ' ').slice(0, 60)),
    mathSource: article.querySelectorAll('.math, .MathJax_Preview').length,
    mathDrawn: article.querySelectorAll('mjx-container').length,
  };
}"""


# MathJax and the widget manager finish after "load", later on a busy machine (make test grades notebooks on the
# other core): wait until the math is typeset and every saved widget drawn, or until SETTLE_MS have passed (then the
# facts show what is missing).
SETTLED = """() => {
  if (document.readyState !== 'complete') return false;
  const article = document.querySelector('article') || document.body;
  const math = article.querySelectorAll('.math, .MathJax_Preview').length;
  if (math && !(window.MathJax && window.MathJax.startup && article.querySelector('mjx-container'))) return false;
  const views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length;
  return document.querySelectorAll('.jupyter-widgets').length >= views;
}"""
SETTLE_MS = 60_000


def settle(page) -> None:
    """Wait for :data:`SETTLED` (at most :data:`SETTLE_MS`), then for MathJax's own typesetting promise."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(SETTLED, timeout=SETTLE_MS, polling=100)
        page.evaluate("() => window.MathJax && window.MathJax.startup && window.MathJax.startup.promise")
    except PlaywrightTimeout:
        pass
    page.wait_for_timeout(200)  # a last layout pass (live figures' images are decoded from the saved state)


def pages_of(html: Path) -> list[Path]:
    """Every page of the built book that a reader reaches (not Sphinx's own search and index pages)."""
    return sorted(
        p
        for p in html.rglob("*.html")
        if not any(part.startswith("_") for part in p.relative_to(html).parts)
        and p.name not in ("genindex.html", "search.html")
    )


@contextlib.contextmanager
def serve(html: Path):
    """The built book over HTTP on a free local port, as a static host serves it: yields its root URL."""
    handler = functools.partial(_QuietHandler, directory=str(html))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the test reports what failed; no access log on stderr
        pass


# One browser for a run of pages: the book served over HTTP, a fresh context per page with a route that refuses
# anything outside the book (and can answer one of the book's files with other text: a planted fault), and listeners
# that record what the reader's browser would report. Every test that opens built pages goes through it.

EVENTS = ("console", "page_errors", "failed", "outside", "bad_status")


@dataclass
class Visit:
    """A page open in the browser: Playwright's ``page`` and what the browser reported since it was asked for, by
    kind (:data:`EVENTS`: console errors, uncaught page errors, failed requests, requests outside the book, which are
    refused, and responses of 400 or more)."""

    page: Any
    events: dict[str, list[str]] = field(default_factory=lambda: {kind: [] for kind in EVENTS})

    def problems(self) -> list[str]:
        """The events a reader would notice, as lines (a refused request outside the book also fails as a request:
        it is counted once, as outside)."""
        labels = {"console": "console error", "page_errors": "page error", "outside": "requested from outside the book"}
        lines = [
            f"{labels[kind]}: {text}" for kind in ("console", "page_errors", "outside") for text in self.events[kind]
        ]
        return lines + [f"response of 400 or more: {url}" for url in self.events["bad_status"]]


class Browser:
    """Headless Chromium over the book served at ``root`` (see :func:`browser_on`)."""

    def __init__(self, browser, root: str) -> None:
        self._browser, self.root = browser, root

    @contextlib.contextmanager
    def visit(
        self, page_path: str, viewport: tuple[int, int] = WIDTHS["desktop"], replace: Mapping[str, str] | None = None
    ) -> Iterator[Visit]:
        """Open ``page_path`` (relative to the book's root) in a fresh context, wait until it has settled
        (:func:`settle`) and yield it; ``replace`` answers the book's file at each path (relative to the root) with
        the text given."""
        width, height = viewport
        context = self._browser.new_context(viewport={"width": width, "height": height})  # fresh storage
        try:
            page = context.new_page()
            visit = Visit(page)
            events, root = visit.events, self.root
            planted = {root + path: body for path, body in (replace or {}).items()}

            def route(request_route):
                url = request_route.request.url
                if url.split("?")[0] in planted:
                    kind = mimetypes.guess_type(url.split("?")[0])[0] or "text/plain"
                    request_route.fulfill(body=planted[url.split("?")[0]], content_type=kind)
                elif url.startswith((root, "data:", "blob:")):
                    request_route.continue_()
                else:  # the internet, or a file outside the book: the published site would not have it
                    events["outside"].append(url)
                    request_route.abort()

            context.route("**/*", route)
            page.on("console", lambda m: m.type == "error" and events["console"].append(m.text))
            page.on("pageerror", lambda error: events["page_errors"].append(str(error)))
            page.on("requestfailed", lambda r: events["failed"].append(f"{r.url} ({r.failure})"))
            page.on("response", lambda r: r.status >= 400 and events["bad_status"].append(r.url))
            page.goto(root + page_path, wait_until="load")
            settle(page)
            yield visit
        finally:
            context.close()


@contextlib.contextmanager
def browser_on(html: Path) -> Iterator[Browser]:
    """One headless Chromium (Debian's, driven by Playwright: no browser is downloaded) over the built book in
    ``html``, served over HTTP as the published site is, so that a missing file is a 404 the tests see."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    with serve(html) as root, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield Browser(browser, root)
        finally:
            browser.close()


def visit_every_page(html: Path, screenshots: Path) -> dict[str, dict[str, dict]]:
    """Open every page at each of :data:`WIDTHS` with nothing reachable but the built files (:func:`browser_on`).

    Returns {page: {width name: facts}}: :data:`PAGE_FACTS` plus the browser's events (:class:`Visit`). Writes a
    screenshot of each page at each width to ``screenshots/<width name>/<page path with / as __>.png``.
    """
    found: dict[str, dict[str, dict]] = {}
    with browser_on(html) as browser:
        for name, viewport in WIDTHS.items():
            (screenshots / name).mkdir(parents=True, exist_ok=True)
            for page_path in pages_of(html):
                rel = page_path.relative_to(html).as_posix()
                with browser.visit(rel, viewport) as visit:
                    facts = visit.page.evaluate(PAGE_FACTS)
                    shot = screenshots / name / (rel.replace("/", "__") + ".png")
                    visit.page.screenshot(path=str(shot), full_page=FULL_PAGE_SHOTS)
                found.setdefault(rel, {})[name] = {**facts, **visit.events}
    return found
