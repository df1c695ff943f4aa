"""What the explorers' stored states add to the built site stays within issue 27's budget: at most 3 MB on any page
and 15 MB over the whole site.

A stored-state explorer (manyheads.viz.explorers.figure_explorer) carries its states as one inert payload,
``<script type="application/json" class="mh-states-data">...</script>``, inside the page's saved widget state; so
what the states add is the bytes of those payloads as they sit in the built files (with the escaping of the JSON
they sit in). A page's share is the payloads in its HTML and in every file of the book the page loads (scripts,
styles, images, frames named in its HTML); the site's total is the payloads in all its files, each file counted once
(so vendored JavaScript that every page loads counts once). A payload in a form this measure does not read (the
class name without the tag around it) fails the test rather than going uncounted.

Each page's size (its HTML plus the files only it loads) and the site's total are printed (``pytest -s``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from helpers.browser import pages_of

PAGE_BUDGET = 3_000_000  # bytes of stored states on any one page (issue 27)
SITE_BUDGET = 15_000_000  # bytes of stored states over the whole site
# the payload as it sits in a file: plain in HTML or JSON-escaped inside the saved widget state (quotes as \", "</"
# as "<\/"); its own "<" are written \u003c, so the first closing tag ends it
PAYLOAD = re.compile(rb'<script type=\\?"application/json\\?" class=\\?"mh-states-data\\?">.*?<\\?/script>', re.S)
MARKER = re.compile(rb'class=\\?"mh-states-data\\?"')
LOADS = {"script": "src", "img": "src", "source": "src", "iframe": "src", "embed": "src", "object": "data"}


class _Loads(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "link" and found.get("rel") not in ("canonical", "next", "prev", "index", "search", "alternate"):
            self.urls.append(found.get("href") or "")
        elif tag in LOADS:
            self.urls.append(found.get(LOADS[tag]) or "")


def loaded_files(html: Path, page: Path) -> set[Path]:
    """The book's files that ``page`` names for the browser to load (not the pages it links to)."""
    parser = _Loads()
    parser.feed(page.read_text(encoding="utf-8"))
    files = set()
    for url in parser.urls:
        parts = urlsplit(url)
        if not parts.path or parts.scheme or parts.netloc:
            continue
        target = (page.parent / unquote(parts.path)).resolve()
        if target.is_file() and target.is_relative_to(html.resolve()):
            files.add(target)
    return files


def payload_bytes(path: Path) -> int:
    return sum(len(m.group(0)) for m in PAYLOAD.finditer(path.read_bytes()))


@pytest.fixture(scope="module")
def sizes(book) -> dict:
    """{"pages": {page: {html, own, states}}, "site": bytes, "site_states": bytes, "unread": [files]}."""
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    html = book.html
    files = [p for p in html.rglob("*") if p.is_file()]
    unread = [
        p.relative_to(html).as_posix()
        for p in files
        if len(MARKER.findall(data := p.read_bytes())) != len(PAYLOAD.findall(data))
    ]
    pages = {page: loaded_files(html, page) for page in pages_of(html)}
    loaders: dict[Path, int] = {}
    for loads in pages.values():
        for f in loads:
            loaders[f] = loaders.get(f, 0) + 1
    found = {}
    for page, loads in pages.items():
        own = sum(f.stat().st_size for f in loads if loaders[f] == 1)
        states = payload_bytes(page) + sum(payload_bytes(f) for f in loads)
        found[page.relative_to(html).as_posix()] = {"html": page.stat().st_size, "own": own, "states": states}
    site = sum(p.stat().st_size for p in files)
    report = [f"{'page':<70} {'HTML':>11} {'own files':>11} {'states':>11}"]
    report += [f"{p:<70} {s['html']:>11,} {s['own']:>11,} {s['states']:>11,}" for p, s in found.items()]
    site_states = sum(payload_bytes(p) for p in files)
    static = sum(p.stat().st_size for p in (html / "_static").rglob("*") if p.is_file())
    report.append(f"site: {site:,} bytes in {len(files)} files, of which _static/ {static:,}; states {site_states:,}")
    print("\n".join(report))
    return {"pages": found, "site": site, "site_states": site_states, "unread": unread}


def test_every_stored_state_payload_is_measured(sizes):
    assert sizes["unread"] == []


def test_stored_states_add_at_most_3_mb_to_any_page(sizes):
    over = {page: s["states"] for page, s in sizes["pages"].items() if s["states"] > PAGE_BUDGET}
    assert over == {}


def test_stored_states_add_at_most_15_mb_to_the_site(sizes):
    assert sizes["site_states"] <= SITE_BUDGET
    assert sum(s["states"] for s in sizes["pages"].values()) > 0, "no stored states found: the measure reads none"
