"""The course frame around the chapters: course map, syllabus, misconceptions index, notation and the TOC.

Fast (no book build, no execution): these tests read the chapters' markdown, the exercise descriptions and the
frame's pages, so that a new chapter, exercise part, misconception or symbol cannot be left out of the frame.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from manyheads.course.exercises import EXERCISES

ROOT = Path(__file__).resolve().parents[2]
NEW_PAGES = ["instructors/syllabus", "next_steps", "misconceptions", "glossary", "notation"]


def load_script(name: str):
    """A script from assets/ (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(f"assets_{name}", ROOT / "assets" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [entry["file"] for part in toc["parts"] for entry in part.get("chapters", [])]


CHAPTERS = [f.removeprefix("chapters/") for f in toc_files() if f.startswith("chapters/")]


def markdown_cells(stem: str) -> list[str]:
    notebook = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"]


def section(text: str, label: str) -> str:
    """The text of the section that a ``(label)=`` line opens, up to the next heading of the same level."""
    start = text.index(f"({label})=\n")
    heading = re.search(r"^(#+) ", text[start:], re.M)
    level = len(heading.group(1))
    rest = text[start + heading.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


INTRO = (ROOT / "intro.md").read_text(encoding="utf-8")
COURSE_MAP = section(INTRO, "sec-course-map")
SYLLABUS = (ROOT / "instructors" / "syllabus.md").read_text(encoding="utf-8")


def test_toc_lists_the_frame_pages():
    files = toc_files()
    for page in NEW_PAGES:
        assert page in files, f"{page} is not in _toc.yml"
        assert (ROOT / f"{page}.md").is_file(), f"_toc.yml lists {page} but {page}.md does not exist"
    assert len(CHAPTERS) == len(list((ROOT / "chapters").glob("*.ipynb"))), "a chapter is missing from _toc.yml"


def test_course_map_svg_is_up_to_date():
    course_map = load_script("course_map")
    assert course_map.render() == (ROOT / "assets" / "course_map.svg").read_bytes(), (
        "assets/course_map.svg is out of date: run `.venv/bin/python assets/course_map.py` and commit the SVG"
    )
    assert re.search(r":alt: \S.{80,}", COURSE_MAP), "the course map figure needs alt text that describes the flow"


def box_titles() -> set[str]:
    return {title for _, _, _, title, _ in load_script("course_map").BOXES}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_is_on_the_course_map_and_links_back(stem):
    rows = [line for line in COURSE_MAP.splitlines() if f"(chapters/{stem}.ipynb)" in line]
    assert len(rows) == 1, f"the course map table should have one row for {stem}"
    assert re.search(r"about \d+ min", rows[0]), f"{stem}'s row gives no time estimate"
    first = markdown_cells(stem)[0]
    paragraph = next((p for p in first.split("\n\n") if "<sec-course-map>" in p), None)
    assert paragraph is not None, f"{stem}'s first markdown cell does not link back to the course map"
    named = re.findall(r"(?<![*\w])\*([^*]+)\*(?!\*)", paragraph)
    assert named, f"{stem}'s course-map sentence names no box (in *italics*)"
    assert set(named) <= box_titles(), f"{stem} names boxes {named} that the map does not draw: {box_titles()}"


# Planning figures: about 100 words of prose and 20 lines of code a minute, plus the chapter's run (at most about
# 2 minutes on a laptop CPU); an exercise takes the sum of its parts' minutes from its header table.
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE, RUN_MINUTES, TOLERANCE = 100, 20, 2, 10


def reading_minutes(stem: str) -> float:
    notebook = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    words = sum(len("".join(c["source"]).split()) for c in notebook["cells"] if c["cell_type"] == "markdown")
    code = sum(
        1
        for c in notebook["cells"]
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if line.strip()
    )
    return words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE + RUN_MINUTES


def exercise_minutes(stem: str) -> int | None:
    path = ROOT / "exercises" / stem / f"{stem}.ipynb"
    if not path.exists():
        return None
    notebook = json.loads(path.read_text(encoding="utf-8"))
    header = next("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    rows = [line for line in header.splitlines() if re.match(r"^\| \d+ \|", line)]
    return sum(int(line.strip(" |").split("|")[-1]) for line in rows)


@pytest.mark.parametrize("stem", CHAPTERS)
def test_time_estimates_follow_the_chapter_and_exercise(stem):
    row = next(line for line in COURSE_MAP.splitlines() if f"(chapters/{stem}.ipynb)" in line)
    stated = [int(m) for m in re.findall(r"about (\d+) min", row)]
    assert abs(stated[0] - reading_minutes(stem)) <= TOLERANCE, (
        f"{stem}: the map says about {stated[0]} min of reading, the chapter's length gives "
        f"{reading_minutes(stem):.0f}: update intro.md"
    )
    minutes = exercise_minutes(stem)
    if minutes is None:
        assert len(stated) == 1, f"{stem} has no exercise but its row gives an exercise time"
    else:
        assert len(stated) == 2 and abs(stated[1] - minutes) <= TOLERANCE, (
            f"{stem}: the exercise's parts add up to {minutes} min; intro.md says {stated[1:]}"
        )


def test_total_times_add_up():
    reading = sum(reading_minutes(s) for s in CHAPTERS) / 60
    exercises = sum(exercise_minutes(s) or 0 for s in CHAPTERS) / 60
    found = re.search(r"about (\d+) hours of reading and running and about (\d+) hours of exercises", COURSE_MAP)
    assert found, "the course map should state the total hours"
    assert abs(int(found.group(1)) - reading) <= 0.75 and abs(int(found.group(2)) - exercises) <= 0.75


@pytest.mark.parametrize("stem", CHAPTERS)
def test_syllabus_schedules_every_chapter_in_both_plans(stem):
    for label in ("## One week", "## Seven weeks"):
        plan = SYLLABUS[SYLLABUS.index(label) :].split("\n## ", 1)[0]
        assert f"chapters/{stem}.ipynb" in plan, f"{stem} is missing from the syllabus's '{label[3:]}' plan"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.stem)
def test_syllabus_maps_every_exercise_part_to_an_outcome(exercise):
    outcomes = SYLLABUS[SYLLABUS.index("## Learning outcomes") :].split("\n## ", 1)[0]
    assert f"../exercises/{exercise.stem}/{exercise.stem}.ipynb" in SYLLABUS
    parts = [(p.function, p.points) for p in exercise.code_parts]
    parts += [(w.grade_id, w.points) for w in exercise.written_parts]
    for name, points in parts:
        assert f"`{name}` ({points})" in outcomes, f"the syllabus's outcomes do not list {name} ({points} points)"


def test_misconceptions_index_is_up_to_date():
    index = load_script("misconceptions_index")
    assert index.render() == (ROOT / "misconceptions.md").read_text(encoding="utf-8"), (
        "misconceptions.md is out of date: run `.venv/bin/python assets/misconceptions_index.py`"
    )


def test_misconceptions_index_lists_every_box_and_item():
    page = (ROOT / "misconceptions.md").read_text(encoding="utf-8")
    boxes = 0
    for stem in CHAPTERS:
        for cell in markdown_cells(stem):
            for box in re.finditer(r"```\{admonition\} Common misconceptions\n(.*?)\n```", cell, re.S):
                boxes += 1
                name = re.search(r"^:name: (\S+)$", box.group(1), re.M)
                assert name, f"{stem}: a misconceptions box has no :name: to link to"
                # Items are counted independently of the generator: paragraphs or bullets that open with a quote.
                items = re.findall(r'^(?:- )?\*{1,2}"', box.group(1), re.M)
                links = page.count(f"<{name.group(1)}>`)")
                assert links == len(items) > 0, f"{stem}: {len(items)} misconceptions in the box, {links} in the index"
    assert boxes >= len(CHAPTERS), "every chapter should end with a misconceptions box"


MATH = re.compile(r"```\{math\}.*?```|\$\$.+?\$\$|\$[^$\n]+\$", re.S)
SYMBOL = re.compile(
    r"(?<![A-Za-z\\])(?:[dnWMI]|\\xi)_(?:\\text\{[^}]*\}|\{[^}]*\}|[A-Za-z0-9])(?:\^(?:\{[^}]*\}|[A-Za-z]))?"
)
# The one symbol per quantity, and the other spellings the book used for the same thing.
NOT_NOTATION = {
    r"d_\text{head}": "d_k",
    r"n_\text{kv heads}": "g",
    "W^O": "W_O",
    "W^Q": "W_Q",
    "W^K": "W_K",
    "W^V": "W_V",
    "W_q": "W_Q",
    "W_k": "W_K",
    "W_v": "W_V",
    "W_o": "W_O",
    r"\xi_h": r"\xi_m",
    "M_h": "M_m",
    r"\alpha_{ij}": "w_{ij}",
}


def chapter_math(stem: str) -> list[str]:
    """The math of a chapter's markdown, minus the one passage that quotes the Transformer paper's notation."""
    found = []
    for cell in markdown_cells(stem):
        cell = re.sub(r"In the paper's notation.*?```\{math\}.*?```", "", cell, flags=re.S)
        found += MATH.findall(cell)
    return found


@pytest.mark.parametrize("stem", CHAPTERS)
def test_chapter_math_uses_the_notation_page(stem):
    notation = (ROOT / "notation.md").read_text(encoding="utf-8")
    for math in chapter_math(stem):
        for wrong, right in NOT_NOTATION.items():
            assert not re.search(re.escape(wrong) + r"(?![A-Za-z0-9])", math), (
                f"{stem} writes {wrong} in `{math[:80]}`; the notation page's symbol is {right}"
            )
        for symbol in SYMBOL.findall(math):
            assert symbol in notation, f"{stem} uses ${symbol}$, which notation.md does not list"


def test_notation_page_names_its_own_rejected_spellings_nowhere():
    notation = (ROOT / "notation.md").read_text(encoding="utf-8")
    table = notation.split("## Where the book shows other notation on purpose")[0]
    for wrong in NOT_NOTATION:
        assert not re.search(re.escape(wrong) + r"(?![A-Za-z0-9])", " ".join(MATH.findall(table))), wrong
