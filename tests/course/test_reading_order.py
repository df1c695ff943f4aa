"""The book's reading order (_toc.yml) introduces the decoder before the first chapter that uses it, and every page
that lists the chapters lists them in that order (issue 35, item 5: chapter 5 pruned SmolLM2 one page before the
interlude that introduces it)."""

from __future__ import annotations

import re

import nbformat
import pytest
import yaml

from manyheads.course.layout import REPO

INTERLUDE = "interlude_meet_a_decoder"
LINK = re.compile(r"chapters/((?:\d\d|interlude)_[a-z0-9_]+)\.ipynb")


def toc_chapters(toc_text: str) -> list[str]:
    """The chapter stems of a _toc.yml, in reading order."""
    toc = yaml.safe_load(toc_text)
    files = [entry["file"] for part in toc["parts"] for entry in part.get("chapters", [])]
    return [f.removeprefix("chapters/") for f in files if f.startswith("chapters/")]


def decoder_before_use(order: list[str], uses_decoder: set[str]) -> list[str]:
    """What is wrong with ``order``: a chapter that loads the decoder before the interlude, or an interlude that
    comes before chapter 4 (the encoder it is contrasted with)."""
    where = {stem: i for i, stem in enumerate(order)}
    problems = [
        f"{stem} loads the decoder before the interlude introduces it"
        for stem in sorted(uses_decoder - {INTERLUDE})
        if where[stem] < where[INTERLUDE]
    ]
    encoder = next(s for s in order if s.startswith("04_"))
    if where[INTERLUDE] < where[encoder]:
        problems.append("the interlude comes before chapter 4, whose encoder it is contrasted with")
    return problems


def listed_order(text: str) -> list[str]:
    """The chapter stems a page links to, in the order of their first link."""
    seen: list[str] = []
    for stem in LINK.findall(text):
        if stem not in seen:
            seen.append(stem)
    return seen


def _uses_decoder() -> set[str]:
    return {
        p.stem
        for p in REPO.chapters()
        if any("load_decoder(" in c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
    }


ORDER = toc_chapters((REPO.root / "_toc.yml").read_text(encoding="utf-8"))


def test_the_decoder_is_introduced_before_the_first_chapter_that_loads_it():
    uses = _uses_decoder()
    assert {"05_pruning", "06_layer_hierarchy", "07_grouped_query_attention"} <= uses
    assert decoder_before_use(ORDER, uses) == []


def test_the_old_order_is_caught():
    old = ["01_a", "02_b", "03_c", "04_specialization", "05_pruning", INTERLUDE, "06_layer_hierarchy"]
    assert decoder_before_use(old, {"05_pruning", "06_layer_hierarchy", INTERLUDE}) == [
        "05_pruning loads the decoder before the interlude introduces it"
    ]
    too_early = [INTERLUDE, "04_specialization", "05_pruning"]
    assert "before chapter 4" in decoder_before_use(too_early, {"05_pruning"})[0]


@pytest.mark.parametrize(
    ("page", "start", "end"),
    [
        ("README.md", "## Open it in Colab", "## The two commands"),
        ("intro.md", "| chapter | the question it answers", "After the last chapter"),
        ("intro.md", "## Chapters", "Instructors:"),
        ("instructors/syllabus.md", "## One week", "## Seven weeks"),
        ("instructors/syllabus.md", "## Seven weeks", "## Learning outcomes"),
        ("instructors/syllabus.md", "## Learning outcomes", "## Running the course"),
    ],
)
def test_every_list_of_chapters_follows_the_toc(page, start, end):
    text = (REPO.root / page).read_text(encoding="utf-8")
    section = text[text.index(start) : text.index(end, text.index(start))]
    if "Learning outcomes" in start:  # headings, not links: "### Chapter 5: …", "### Interlude: …"
        names = re.findall(r"^### (Chapter (\d)|Interlude)", section, flags=re.MULTILINE)
        listed = [INTERLUDE if not n else next(s for s in ORDER if s.startswith(f"0{n}_")) for _, n in names]
    else:
        listed = listed_order(section)
    assert listed == ORDER, f"{page} ({start!r}) lists the chapters as {listed}, _toc.yml as {ORDER}"


def test_a_list_out_of_order_is_caught():
    old_table = (
        "| 5. [Redundancy and pruning](chapters/05_pruning.ipynb) |\n"
        "| Interlude: [meet a decoder](chapters/interlude_meet_a_decoder.ipynb) |\n"
    )
    assert listed_order(old_table) == ["05_pruning", INTERLUDE]
    assert listed_order(old_table) != [s for s in ORDER if s in ("05_pruning", INTERLUDE)]
