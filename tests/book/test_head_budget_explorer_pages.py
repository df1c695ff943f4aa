"""The head-budget calculator on the built pages of chapters 3 and 7 responds with no kernel (issue 27).

One headless Chromium (helpers.browser.browser_on) opens each page over HTTP with nothing else reachable, and types
into each of the calculator's six boxes twice (a value the calculator refuses, then one it accepts); each time the
table (or the message) must change and be exactly what manyheads.viz.widgets.head_budget_html, the function the
kernel runs, gives for the values the boxes hold, with nothing in the error line and no console error, page error,
request outside the book or response of 400 or more. The same check over chapter 3 with a port whose KV-cache formula
is off by one (the page's head_budget.js replaced in flight) fails. tests/book/test_explorer_pages.py checks every
other explorer on the pages and that every explorer without stored states is driven by a test such as this one.
"""

from __future__ import annotations

import pytest
from helpers.browser import browser_on

from manyheads.costs import divisors
from manyheads.course.layout import REPO
from manyheads.viz.widgets import head_budget_html

PAGES = ["chapters/03_head_size.html", "chapters/07_grouped_query_attention.html"]
CONTROLS = ("d_model", "n_heads", "n_kv_heads", "seq_len", "n_layers", "batch")
OTHER = {"seq_len": [64, 4096, 100], "n_layers": [2, 12, 32], "batch": [2, 8, 64]}  # values the boxes accept
# Parameters are shown to the unit ("1,050,624"): a port that counts one bias too many shows a wrong table.
OFF_BY_ONE = (
    "var biases = bias ? 2n * dModel + 2n * kvWidth : 0n;",
    "var biases = bias ? 2n * dModel + 2n * kvWidth + 1n : 0n;",
)

READ = """(box) => Object.fromEntries([...box.querySelectorAll('.mh-control')].map(c => [
  [...c.classList].find(k => k.startsWith('mh-control--')).slice('mh-control--'.length),
  parseInt(c.querySelector('input').value, 10)]))"""
SHOWN = "(box) => box.querySelector('.mh-explorer-view .widget-html-content').innerHTML"
MESSAGE = "(box) => box.querySelector('.mh-explorer-message .widget-html-content').innerHTML"
PARSED = "(html) => { const t = document.createElement('template'); t.innerHTML = html; return t.innerHTML; }"


def _refused(name: str, values: dict) -> int:
    """A value of box ``name`` that head_budget refuses, given the other boxes' values."""
    if name == "d_model":
        return values["n_heads"] * 7 + 1 if values["n_heads"] > 1 else 0
    if name == "n_heads":
        return next(n for n in range(2, 200) if values["d_model"] % n)
    if name == "n_kv_heads":
        return next((k for k in range(2, values["n_heads"]) if values["n_heads"] % k), values["n_heads"] + 1)
    return 0  # seq_len, n_layers, batch: "must be a positive integer, got 0"


def _accepted(name: str, values: dict) -> int:
    """A value of box ``name`` that head_budget accepts with the other boxes' values, and that changes the table."""
    if name == "d_model":
        candidates = [values["n_heads"] * d_head for d_head in (128, 64, 96, 32)]
    elif name == "n_heads":
        candidates = [n for n in divisors(values["d_model"]) if n % values["n_kv_heads"] == 0]
    elif name == "n_kv_heads":
        candidates = divisors(values["n_heads"])
    else:
        candidates = OTHER[name]
    for value in candidates:
        trial = {**values, name: value}
        if value != values[name] and "Invalid" not in head_budget_html(**trial):
            return value
    raise AssertionError(f"no accepted value for {name} from {candidates} with {values}")


def try_the_calculators(browser, page_path: str, port_source: str | None = None) -> tuple[list[str], int]:
    """Type into every box of every head-budget calculator of the page; returns (problems, changes made).
    ``port_source`` replaces the page's head_budget.js (a planted fault)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    problems: list[str] = []
    changes = 0
    replace = {"_static/head_budget.js": port_source} if port_source is not None else None
    with browser.visit(page_path, replace=replace) as visit:
        page = visit.page
        boxes = page.locator(".mh-explorer--head_budget")
        if boxes.count() == 0:
            return [f"{page_path}: no head-budget calculator drawn"], 0
        for index in range(boxes.count()):
            box = boxes.nth(index).element_handle()
            for name in CONTROLS:
                for step in ("refused", "accepted"):
                    values = page.evaluate(READ, box)
                    value = (_refused if step == "refused" else _accepted)(name, values)
                    before = page.evaluate(SHOWN, box)
                    field = boxes.nth(index).locator(f".mh-control--{name} input")
                    field.fill(str(value))
                    field.press("Enter")
                    changes += 1
                    where = f"{page_path} calculator {index + 1}, {name} = {value} ({step})"
                    try:
                        page.wait_for_function(
                            f"(box) => ({SHOWN})(box) !== {before!r}", arg=box, timeout=5000, polling=50
                        )
                    except PlaywrightTimeout:
                        problems.append(f"{where}: what is shown did not change")
                        continue
                    now = page.evaluate(READ, box)
                    expected = page.evaluate(PARSED, head_budget_html(**now))
                    if page.evaluate(SHOWN, box) != expected:
                        problems.append(f"{where}: shown != head_budget_html(**{now})")
                    if now[name] != value:
                        problems.append(f"{where}: the box holds {now[name]}")
                    if step == "refused" and "Invalid combination" not in expected:
                        problems.append(f"{where}: Python accepts {now}")
                    if page.evaluate(MESSAGE, box):
                        problems.append(f"{where}: error line {page.evaluate(MESSAGE, box)}")
        problems += [f"{page_path}: {p}" for p in visit.problems()]
    return problems, changes


@pytest.fixture(scope="module")
def browser(book):
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    with browser_on(book.html) as browser:
        yield browser


@pytest.mark.browser
@pytest.mark.parametrize("page_path", PAGES)
def test_typing_into_each_box_recomputes_the_calculator_as_python_does(browser, page_path):
    problems, changes = try_the_calculators(browser, page_path)
    assert problems == []
    assert changes >= 2 * len(CONTROLS)


@pytest.mark.browser
def test_a_page_whose_port_is_off_by_one_fails_the_check(browser):
    source = (REPO.root / "book_static" / "head_budget.js").read_text(encoding="utf-8")
    assert source.count(OFF_BY_ONE[0]) == 1, "the planted fault no longer applies: update it to the port"
    problems, _ = try_the_calculators(browser, PAGES[0], port_source=source.replace(*OFF_BY_ONE))
    assert any("shown != head_budget_html" in p for p in problems), problems
