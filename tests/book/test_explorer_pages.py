"""Every control on the built pages belongs to an explorer that responds with no kernel (issue 27).

One headless Chromium (helpers.browser.browser_on) opens every page that saves widgets over HTTP, with nothing else
reachable (a page that saves none draws no ipywidgets control), and checks two things.

Every ipywidgets control drawn on it (slider, dropdown, text box, button, ...) lies inside an explorer
(``.mh-explorer``, manyheads.viz.explorers): anywhere else it is an inert control, which moves and changes nothing
on a page no kernel runs. bertviz's attention views are not ipywidgets: they draw and respond in their own
JavaScript, so they count as explorers and are not looked for here.

Every stored-state explorer (``figure_explorer``: the box holds ``.mh-explorer-states``, every state of its controls'
grid computed by the Python function the kernel runs) has each control moved to two values of its grid, as a reader
can (a dropdown by choosing an option, a slider by its keys, a text box by typing). Each time the drawing must
change, the error line stay empty and the page show exactly what its drawing (book_static/explorers.js) gives for the
state that function computes now for the controls' values (``data["function"](**data["fixed"], **values)``); that
state must equal the stored one exactly (states are data, not pictures), the two values must give different states,
and no console error, page error, request outside the book or response of 400 or more may occur. A float slider's
grid has at most 21 values. An explorer without stored states runs a JavaScript port instead, which its own test
drives (:data:`PORT_TESTS`).

Planted faults: the same page with its stored states shifted by one value of a control fails the second check, and
with its explorers' boxes unmarked, their controls fail the first.
"""

from __future__ import annotations

import importlib
import itertools
import json
import re
from dataclasses import dataclass, field

import pytest
from helpers.browser import browser_on, pages_of

# An explorer without stored states computes in a JavaScript port of its Python function; the test that drives it.
PORT_TESTS = {"head_budget": "tests/book/test_head_budget_explorer_pages.py"}
MAX_GRID = 21  # issue 27: "continuous sliders on a stated grid of at most 21 steps" (a float slider's)

SAVED_WIDGETS = 'type="application/vnd.jupyter.widget-state+json"'
# ipywidgets 8's classes for the widgets a reader acts on (the book's widget manager is ipywidgets 8's)
CONTROLS = ", ".join(
    f".jupyter-widgets.widget-{kind}"
    for kind in (
        "slider",
        "dropdown",
        "text",
        "textarea",
        "checkbox",
        "toggle-button",
        "toggle-buttons",
        "radio",
        "select",
        "select-multiple",
        "button",
        "play",
        "colorpicker",
        "datepicker",
    )
)
INERT = f"""() => [...document.querySelectorAll({CONTROLS!r})].filter(c => !c.closest('.mh-explorer')).map(c => {{
  const kind = [...c.classList].filter(k => k.startsWith('widget-') && k !== 'widget-inline-hbox').join(' ');
  const label = c.querySelector('.widget-label');
  return `${{kind}} "${{label ? label.innerText.trim() : ''}}"`;
}})"""
EXPLORERS = """() => [...document.querySelectorAll('.mh-explorer')].map(box => ({
  name: [...box.classList].find(k => k.startsWith('mh-explorer--')).slice('mh-explorer--'.length),
  stored: !!box.querySelector('.mh-explorer-states')}))"""
DATA = "(box) => JSON.parse(box.querySelector('.mh-states-data').textContent)"
SHOWN = "(box) => { const d = box.querySelector('.mh-explorer-drawn'); return d ? d.innerHTML : ''; }"
KEY = "(box) => { const d = box.querySelector('.mh-explorer-drawn'); return d ? d.getAttribute('data-key') : null; }"
DRAW = "(state) => window.manyheadsDrawPanels(state).outerHTML"
MESSAGE = "(box) => box.querySelector('.mh-explorer-message .widget-html-content').innerHTML"
PICTURE_HIDDEN = "(box) => getComputedStyle(box.querySelector('img.mh-explorer-view')).display === 'none'"


def state_function(data: dict):
    """The Python function the kernel runs, by the name the page saved (``module.name``)."""
    module, _, name = data["function"].rpartition(".")
    return getattr(importlib.import_module(module), name)


def canonical(svg: str) -> str:
    """A drawing with its element ids numbered in order of appearance (a colour bar's gradient has a random id), so
    that two drawings of one state compare equal."""
    ids = list(dict.fromkeys(re.findall(r'\bid="([^"]+)"', svg)))
    for number, name in enumerate(ids):
        svg = re.sub(rf'(id="|url\(#|href="#){re.escape(name)}(?=[")])', rf"\g<1>mh-id-{number}", svg)
    return svg


def targets(current: int, size: int) -> list[int]:
    """Two grid positions other than ``current`` and each other: one step up (or down), then the far end."""
    first = current + 1 if current + 1 < size else current - 1
    far = 0 if current >= size // 2 else size - 1
    return [first, far if far not in (first, current) else (first + 1 if first + 1 < size else 0)]


def move(control, current: int, index: int, grid: list) -> None:
    """Set ``control`` from grid position ``current`` to ``index`` as a reader can: choose a dropdown's option, press
    a slider's keys (Home, End, an arrow: one step of its grid), type into a text box and press Enter."""
    if control.locator("select").count():
        control.locator("select").select_option(index=index)
    elif control.locator(".noUi-handle").count():  # ipywidgets 8's slider, any kind (float, int, selection)
        handle = control.locator(".noUi-handle").first
        if index in (0, len(grid) - 1):
            handle.press("Home" if index == 0 else "End")
        else:
            for _ in range(abs(index - current)):
                handle.press("ArrowRight" if index > current else "ArrowLeft")
    else:
        field_ = control.locator("input").first
        field_.fill(f"{grid[index]:g}" if isinstance(grid[index], float) else str(grid[index]))
        field_.press("Enter")


def check_stored_state_explorers(visit, page_path: str) -> tuple[list[str], int]:
    """Move every control of every stored-state explorer of the open page twice (module docstring); returns
    (problems, moves made)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page, problems, moves = visit.page, [], 0
    boxes = page.locator(".mh-explorer:has(.mh-explorer-states)")
    for number in range(boxes.count()):
        box = boxes.nth(number).element_handle()
        data = page.evaluate(DATA, box)
        state = state_function(data)
        grids = [data["grids"][c] for c in data["controls"]]
        explorer = f"{page_path} explorer {number + 1} ({data['function']})"
        keys = {",".join(map(str, i)) for i in itertools.product(*(range(len(g)) for g in grids))}
        if set(data["states"]) != keys:
            problems.append(f"{explorer}: stores states {sorted(set(data['states']) ^ keys)[:5]} off its grid")
        indices = [int(i) for i in data["initial"].split(",")]
        for axis, control in enumerate(data["controls"]):
            grid = grids[axis]
            locator = boxes.nth(number).locator(f".mh-control--{control}")
            most = MAX_GRID if "mh-kind--float" in (locator.get_attribute("class") or "") else len(grid)
            if not 2 <= len(grid) <= most:
                problems.append(f"{explorer}: {control} has {len(grid)} values, not 2 to {most}")
                continue
            seen = []
            for index in targets(indices[axis], len(grid)):
                before = page.evaluate(SHOWN, box)
                current, indices[axis] = indices[axis], index
                key = ",".join(map(str, indices))
                values = {c: g[i] for c, g, i in zip(data["controls"], grids, indices)}
                where = f"{explorer}, {control} = {grid[index]!r} (state {key})"
                move(locator, current, index, grid)
                moves += 1
                try:
                    page.wait_for_function(f"(box) => ({KEY})(box) === {key!r}", arg=box, timeout=5000, polling=50)
                except PlaywrightTimeout:
                    problems.append(f"{where}: the page shows state {page.evaluate(KEY, box)}")
                    continue
                expected = json.loads(json.dumps(state(**data["fixed"], **values)))
                if data["states"].get(key) != expected:
                    problems.append(f"{where}: the stored state != {data['function']}(**fixed, **{values})")
                shown = page.evaluate(SHOWN, box)
                if shown == before:
                    problems.append(f"{where}: what is shown did not change")
                if "<svg" not in shown or not page.evaluate(PICTURE_HIDDEN, box):
                    problems.append(f"{where}: the saved picture is not replaced by a drawing")
                if canonical(shown) != canonical(page.evaluate(DRAW, expected)):
                    problems.append(f"{where}: shown != the drawing of {data['function']}(**fixed, **{values})")
                if page.evaluate(MESSAGE, box):
                    problems.append(f"{where}: error line {page.evaluate(MESSAGE, box)}")
                seen.append(expected)
            if len(seen) == 2 and seen[0] == seen[1]:
                problems.append(f"{explorer}: two values of {control}, one state")
    return problems + [f"{page_path}: {p}" for p in visit.problems()], moves


def shift_states(page_html: str) -> str:
    """The page with every explorer's stored states moved one value of its first control along its grid (each grid
    position shows the state of the next one; the last keeps its own): a planted fault the check must catch."""

    def shifted(match: re.Match) -> str:
        state = json.loads(match.group(1))
        for model in state["state"].values():
            value = model.get("state", {}).get("value")
            if not isinstance(value, str) or "mh-states-data" not in value:
                continue
            head, rest = value.split(">", 1)
            data = json.loads(rest[: rest.rindex("</script>")])
            size = len(data["grids"][data["controls"][0]])
            moved = {}
            for key in data["states"]:
                indices = key.split(",")
                indices[0] = str(min(int(indices[0]) + 1, size - 1))
                moved[key] = data["states"][",".join(indices)]
            data["states"] = moved
            text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
            model["state"]["value"] = f"{head}>{text}</script>"
        return match.group(0).replace(match.group(1), json.dumps(state).replace("</", "<\\/"))  # inside a <script>

    pattern = r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>'
    return re.sub(pattern, shifted, page_html, count=1, flags=re.S)


@dataclass
class Walked:
    """What one page showed: its inert controls, its explorers ({name, stored}), the stored-state check's problems
    and how many moves it made."""

    inert: list[str] = field(default_factory=list)
    explorers: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    moves: int = 0


@pytest.fixture(scope="module")
def html(book):
    if book.returncode != 0:
        pytest.fail("the book did not build (see test_build_has_no_warnings)")
    return book.html


@pytest.fixture(scope="module")
def browser(html):
    with browser_on(html) as browser:
        yield browser


@pytest.fixture(scope="module")
def walked(html, browser) -> dict[str, Walked]:
    """Every page that saves widgets, opened once: {page: Walked}."""
    found = {}
    for path in pages_of(html):
        if SAVED_WIDGETS not in path.read_text(encoding="utf-8"):
            continue
        rel = path.relative_to(html).as_posix()
        with browser.visit(rel) as visit:
            inert, explorers = visit.page.evaluate(INERT), visit.page.evaluate(EXPLORERS)
            try:
                problems, moves = check_stored_state_explorers(visit, rel) if explorers else ([], 0)
            except Exception as error:  # one page's failure (a function gone, a page timing out) spares the rest
                problems, moves = [f"{rel}: {type(error).__name__}: {error}"], 0
        found[rel] = Walked(inert, explorers, problems, moves)
    return found


@pytest.mark.browser
def test_every_control_on_a_page_belongs_to_an_explorer(walked):
    inert = {page: seen.inert for page, seen in walked.items() if seen.inert}
    assert inert == {}, "controls outside any explorer, which change nothing with no kernel: " + json.dumps(inert)


@pytest.mark.browser
def test_each_control_of_each_stored_state_explorer_draws_the_state_python_computes(walked):
    assert {page: seen.problems for page, seen in walked.items() if seen.problems} == {}
    stored = {page: seen for page, seen in walked.items() if any(e["stored"] for e in seen.explorers)}
    assert len(stored) >= 2, "chapters 1 and 2 have stored-state explorers: the check found fewer pages with one"
    for page, seen in stored.items():
        assert seen.moves >= 4, f"{page}: only {seen.moves} moves"


@pytest.mark.browser
def test_every_explorer_without_stored_states_has_a_test_of_its_port(walked):
    ported = {e["name"] for seen in walked.values() for e in seen.explorers if not e["stored"]}
    assert ported - set(PORT_TESTS) == set()


def _first_with_stored_states(walked) -> str:
    return next(p for p, seen in walked.items() if any(e["stored"] for e in seen.explorers))


@pytest.mark.browser
def test_a_page_whose_states_are_shifted_by_one_value_fails_the_check(html, browser, walked):
    page_path = _first_with_stored_states(walked)
    planted = shift_states((html / page_path).read_text(encoding="utf-8"))
    with browser.visit(page_path, replace={page_path: planted}) as visit:
        problems, _ = check_stored_state_explorers(visit, page_path)
    assert any("the stored state != " in p for p in problems), problems
    assert any("shown != the drawing" in p for p in problems), problems


@pytest.mark.browser
def test_a_control_outside_any_explorer_is_found(html, browser, walked):
    """The same page with its explorers' boxes no longer marked as explorers: their controls are inert."""
    page_path = _first_with_stored_states(walked)
    page_html = (html / page_path).read_text(encoding="utf-8")
    assert page_html.count('"mh-explorer"') == len(walked[page_path].explorers)
    with browser.visit(
        page_path, replace={page_path: page_html.replace('"mh-explorer"', '"mh-was-explorer"')}
    ) as visit:
        inert = visit.page.evaluate(INERT)
    assert inert and all(found.startswith(("widget-slider", "widget-dropdown")) for found in inert), inert
