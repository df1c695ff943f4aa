"""The figure explorers of chapters 1 and 2 respond on the built pages with no kernel (issue 27).

Each explorer (manyheads.viz.explorers.figure_explorer) saves every state of its controls' grid with the page;
book_static/explorers.js draws the state of the controls' values as SVG. Headless Chromium opens each page over HTTP
with nothing else reachable and moves each control of each explorer to two values of its grid (a slider by typing
into its readout, as a reader can, a dropdown by choosing an option). Each time the picture must change, the error
line stay empty, and what is shown must be exactly what the page's drawing gives for the state that the Python
function the kernel runs (the one the page names, with the arguments it saved) computes now for the values the
controls hold; the two values must give different states, and no console error, page error or response of 400 or
more may occur. The same check over a page whose stored states are shifted by one value of a slider fails.
"""

from __future__ import annotations

import importlib
import json
import re

import pytest
from helpers.browser import CHROMIUM, serve, settle

PAGES = {"chapters/01_single_head_bottleneck.html": "one_softmax", "chapters/02_subspaces.html": "plane_projection"}
DATA = "(box) => JSON.parse(box.querySelector('.mh-states-data').textContent)"
SHOWN = "(box) => { const d = box.querySelector('.mh-explorer-drawn'); return d ? d.innerHTML : ''; }"
KEY = "(box) => { const d = box.querySelector('.mh-explorer-drawn'); return d ? d.getAttribute('data-key') : null; }"
DRAW = "(state) => window.manyheadsDrawPanels(state).outerHTML"
MESSAGE = "(box) => box.querySelector('.mh-explorer-message .widget-html-content').innerHTML"
PICTURE_HIDDEN = "(box) => getComputedStyle(box.querySelector('img.mh-explorer-view')).display === 'none'"


def state_function(data: dict):
    module, _, name = data["function"].rpartition(".")
    return getattr(importlib.import_module(module), name)


def targets(current: int, size: int) -> list[int]:
    """Two grid positions other than ``current`` and each other: one step up (or down), then the far end."""
    first = current + 1 if current + 1 < size else current - 1
    far = 0 if current >= size // 2 else size - 1
    return [first, far if far not in (first, current) else (first + 1 if first + 1 < size else 0)]


def shift_states(page_html: str, control: str) -> str:
    """The page with every stored state moved one value of ``control`` along its grid (each grid position shows the
    state of the next one; the last keeps its own): a planted fault the check must catch."""

    def shifted(match: re.Match) -> str:
        state = json.loads(match.group(1))
        for model in state["state"].values():
            value = model.get("state", {}).get("value")
            if not isinstance(value, str) or "mh-states-data" not in value:
                continue
            head, rest = value.split(">", 1)
            data = json.loads(rest[: rest.rindex("</script>")])
            axis, size = data["controls"].index(control), len(data["grids"][control])
            moved = {}
            for key in data["states"]:
                indices = key.split(",")
                indices[axis] = str(min(int(indices[axis]) + 1, size - 1))
                moved[key] = data["states"][",".join(indices)]
            data["states"] = moved
            text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
            model["state"]["value"] = f"{head}>{text}</script>"
        return match.group(0).replace(match.group(1), json.dumps(state).replace("</", "<\\/"))  # inside a <script>

    pattern = r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>'
    return re.sub(pattern, shifted, page_html, count=1, flags=re.S)


def move(locator, kind: str, grid: list, index: int) -> None:
    if kind == "choice":
        locator.locator("select").select_option(index=index)
    else:  # a slider: type the value into its readout and press Enter, as a reader can
        readout = locator.locator(".widget-readout")
        readout.click()
        readout.press("Control+a")
        readout.type(f"{grid[index]:g}")
        readout.press("Enter")


def try_the_explorers(html, page_path: str, plant: str | None = None) -> tuple[list[str], int]:
    """Move every control of every figure explorer of the page twice; returns (problems, moves made).
    ``plant``: serve the page with its stored states shifted along this control (shift_states)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    problems: list[str] = []
    moves = 0
    with serve(html) as root, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})

            def route(request_route):
                url = request_route.request.url
                if plant is not None and url.split("?")[0] == root + page_path:
                    body = shift_states((html / page_path).read_text(encoding="utf-8"), plant)
                    request_route.fulfill(body=body, content_type="text/html")
                elif url.startswith((root, "data:", "blob:")):
                    request_route.continue_()
                else:
                    problems.append(f"requested from outside the book: {url}")
                    request_route.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status}: {r.url}"))
            page.goto(root + page_path, wait_until="load")
            settle(page)
            boxes = page.locator(f".mh-explorer--{PAGES[page_path]}")
            if boxes.count() == 0:
                return [f"{page_path}: no {PAGES[page_path]} explorer drawn"], 0
            for number in range(boxes.count()):
                box = boxes.nth(number).element_handle()
                data = page.evaluate(DATA, box)
                state = state_function(data)
                indices = [int(i) for i in data["initial"].split(",")]
                for axis, control in enumerate(data["controls"]):
                    locator = boxes.nth(number).locator(f".mh-control--{control}")
                    kind = "choice" if control in data["labels"] else "float"
                    grid = data["grids"][control]
                    if not 2 <= len(grid) <= 21:  # issue 27: a stated grid of at most 21 steps
                        problems.append(f"{page_path} explorer {number + 1}: {control} has {len(grid)} values")
                    seen = []
                    for index in targets(indices[axis], len(grid)):
                        before = page.evaluate(SHOWN, box)
                        indices[axis] = index
                        key = ",".join(map(str, indices))
                        where = f"{page_path} explorer {number + 1}, {control} = {grid[index]} (state {key})"
                        move(locator, kind, grid, index)
                        moves += 1
                        try:
                            page.wait_for_function(f"(box) => ({KEY})(box) === {key!r}", arg=box, timeout=5000)
                        except PlaywrightTimeout:
                            problems.append(f"{where}: the page shows state {page.evaluate(KEY, box)}")
                            continue
                        shown = page.evaluate(SHOWN, box)
                        values = {c: data["grids"][c][i] for c, i in zip(data["controls"], indices)}
                        expected = json.loads(json.dumps(state(**data["fixed"], **values)))
                        if shown == before:
                            problems.append(f"{where}: what is shown did not change")
                        if "<svg" not in page.evaluate(DRAW, expected) or not page.evaluate(PICTURE_HIDDEN, box):
                            problems.append(f"{where}: the saved picture is not replaced by a drawing")
                        if shown != page.evaluate(DRAW, expected):
                            problems.append(f"{where}: shown != the drawing of {data['function']}(**{values})")
                        if page.evaluate(MESSAGE, box):
                            problems.append(f"{where}: error line {page.evaluate(MESSAGE, box)}")
                        seen.append(expected)
                    if len(seen) == 2 and seen[0] == seen[1]:
                        problems.append(f"{page_path} explorer {number + 1}: two values of {control}, one state")
        finally:
            browser.close()
    return problems, moves


@pytest.fixture(scope="module")
def html(book):
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    return book.html


@pytest.mark.browser
@pytest.mark.parametrize("page_path", list(PAGES))
def test_moving_each_control_draws_the_state_python_computes(html, page_path):
    problems, moves = try_the_explorers(html, page_path)
    assert problems == []
    assert moves >= 4


@pytest.mark.browser
def test_a_page_whose_states_are_shifted_by_one_value_fails_the_check(html):
    problems, _ = try_the_explorers(html, "chapters/01_single_head_bottleneck.html", plant="gap")
    assert any("shown != the drawing" in p for p in problems), problems
