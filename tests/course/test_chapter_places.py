"""Adding a chapter touches files besides its notebook (issue 36, item 6): every chapter is in every one of them,
and a new chapter that is missing from some gets the list of files still to touch
(``python -m manyheads.course.chapter_places <stem>``)."""

from __future__ import annotations

import shutil

import pytest

from manyheads.course.chapter_places import CHAPTER_PLACES, places_to_touch
from manyheads.course.layout import REPO


@pytest.mark.parametrize("chapter", REPO.chapters(), ids=lambda p: p.stem)
def test_the_chapter_is_in_every_place_a_chapter_must_be(chapter):
    assert places_to_touch(REPO.root, chapter.stem) == []


def test_a_new_chapter_gets_every_file_still_to_touch_and_loses_each_once_added(tmp_path):
    for place in CHAPTER_PLACES:
        source = REPO.root / place.path
        if source.is_file():
            (tmp_path / place.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, tmp_path / place.path)
    missing = places_to_touch(tmp_path, "09_new_topic")
    assert [line.split(":")[0] for line in missing] == [place.path for place in CHAPTER_PLACES]
    # Added to the table of contents and given its evidence tests, those two leave the list.
    toc = tmp_path / "_toc.yml"
    toc.write_text(toc.read_text(encoding="utf-8") + "      - file: chapters/09_new_topic\n", encoding="utf-8")
    (tmp_path / "tests" / "book").mkdir(parents=True)
    (tmp_path / "tests" / "book" / "test_evidence_09_new_topic.py").write_text("", encoding="utf-8")
    still = [line.split(":")[0] for line in places_to_touch(tmp_path, "09_new_topic")]
    assert "_toc.yml" not in still and "tests/book/test_evidence_<stem>.py" not in still and len(still) == 5


def test_the_command_names_the_files_for_a_chapter_that_is_missing(capsys):
    from manyheads.course.chapter_places import main

    assert main(["09_new_topic"]) == 1
    out = capsys.readouterr().out
    assert "09_new_topic: still to touch" in out and "assets/course_map.py" in out
