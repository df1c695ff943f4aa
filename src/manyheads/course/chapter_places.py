"""Every file a chapter must appear in besides its notebook, and which of them a chapter is still missing from.

Adding a chapter means more than the notebook: the table of contents, the landing page's course table and reading
list, the course map's badges, the Colab links, the instructors' syllabus, the committed run time that the budget
and the landing page read, and the chapter's evidence tests. No single list drives them all (each is written for
its reader), so this one names them, and ``tests/course/test_chapter_places.py`` fails for a chapter that is missing
from any, naming the files still to touch.

Run: ``python -m manyheads.course.chapter_places 09_new_topic`` (a chapter's file name without ``.ipynb``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ChapterPlace", "CHAPTER_PLACES", "places_to_touch"]


@dataclass(frozen=True)
class ChapterPlace:
    """A file a chapter must appear in: ``found(root, stem)`` says whether it does; ``what`` says what to add."""

    path: str
    what: str
    found: Callable[[Path, str], bool]


def _mentions(path: str, pattern: str) -> Callable[[Path, str], bool]:
    def found(root: Path, stem: str) -> bool:
        file = root / path
        return file.is_file() and pattern.format(stem=stem) in file.read_text(encoding="utf-8")

    return found


def _badge(root: Path, stem: str) -> bool:
    file = root / "assets" / "course_map.py"
    if not file.is_file():
        return False
    label = "i" if stem.startswith("interlude") else stem.split("_", 1)[0].lstrip("0")
    return re.search(rf'\(\s*"{re.escape(label)}"\s*,\s*"\w+"\s*\)', file.read_text(encoding="utf-8")) is not None


def _timed(root: Path, stem: str) -> bool:
    file = root / "benchmarks" / "results" / "chapters_solo.json"
    if not file.is_file():
        return False
    return any(row.get("chapter") == stem for row in json.loads(file.read_text(encoding="utf-8")).get("rows", []))


CHAPTER_PLACES = [
    ChapterPlace(
        "_toc.yml", "an entry `- file: chapters/<stem>` in reading order", _mentions("_toc.yml", "chapters/{stem}")
    ),
    ChapterPlace(
        "intro.md",
        "a row of the chapter table (with its reading time) and a line of the reading list",
        _mentions("intro.md", "(chapters/{stem}.ipynb)"),
    ),
    ChapterPlace("assets/course_map.py", "a badge (its number, on the box it takes apart) in BADGES", _badge),
    ChapterPlace(
        "README.md", "its Colab link in the table of notebooks", _mentions("README.md", "chapters/{stem}.ipynb")
    ),
    ChapterPlace(
        "instructors/syllabus.md",
        "the week that reads it, in each plan",
        _mentions("instructors/syllabus.md", "(../chapters/{stem}.ipynb)"),
    ),
    ChapterPlace(
        "benchmarks/results/chapters_solo.json",
        "its solo run time: .venv/bin/python benchmarks/chapters.py --solo 3 (the budget and the landing page)",
        _timed,
    ),
    ChapterPlace(
        "tests/book/test_evidence_<stem>.py",
        "the evidence tests of its claims (see CONTRIBUTING.md, the evidence standard)",
        lambda root, stem: (root / "tests" / "book" / f"test_evidence_{stem}.py").is_file(),
    ),
]


def places_to_touch(root: Path, stem: str) -> list[str]:
    """'file: what to add' for each place the chapter ``stem`` is missing from (empty when it is everywhere)."""
    return [f"{place.path}: {place.what}" for place in CHAPTER_PLACES if not place.found(Path(root), stem)]


def main(argv: list[str] | None = None) -> int:
    from manyheads.course.layout import REPO

    stems = (argv if argv is not None else sys.argv[1:]) or [path.stem for path in REPO.chapters()]
    missing = {stem: places_to_touch(REPO.root, stem) for stem in stems}
    for stem, places in missing.items():
        print(f"{stem}: " + ("in every place" if not places else "still to touch:\n  " + "\n  ".join(places)))
    return 1 if any(missing.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
