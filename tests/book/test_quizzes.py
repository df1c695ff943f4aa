"""Every chapter ends with a self-check quiz: questions whose answers open in place (HTML <details>), which works in
the built book with no script and in Colab and Jupyter, whose Markdown renders the same element. Not graded."""

from __future__ import annotations

import re

import nbformat
import pytest

from manyheads.course.layout import REPO

CHAPTERS = sorted(REPO.chapters_dir.glob("*.ipynb"))
ANSWER = "<details><summary>Answer</summary>"


def quiz(chapter) -> str:
    nb = nbformat.read(chapter, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## Check yourself")]
    assert len(cells) == 1, f"{chapter.name}: one markdown cell starting with '## Check yourself'"
    assert nb.cells[-1] is cells[0], f"{chapter.name}: the quiz is the chapter's last cell"
    return cells[0].source


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_ends_with_three_or_more_questions_each_with_an_answer_that_explains(chapter):
    text = quiz(chapter)
    asked = re.sub(r"<details>.*?</details>", "", text, flags=re.DOTALL)
    questions = re.findall(r"^\*\*(\d+)\.\*\* ", asked, flags=re.MULTILINE)
    assert len(questions) >= 3 and questions == [str(i + 1) for i in range(len(questions))], questions
    answers = re.findall(re.escape(ANSWER) + r"\n\n(.+?)\n\n</details>", text, flags=re.DOTALL)
    assert len(answers) == len(questions) == text.count("<details>"), "one answer per question, blank lines inside"
    for answer in answers:
        verdict, _, why = answer.partition("** ")
        assert verdict.startswith("**") and len(why.split()) >= 8, f"an answer with its reason: {answer!r}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_a_multiple_choice_answer_names_one_of_its_options(chapter):
    for block in re.split(r"</details>", quiz(chapter))[:-1]:
        options = re.findall(r"^- \*\*([a-z])\.\*\* ", block, flags=re.MULTILINE)
        if options:
            verdict = re.search(re.escape(ANSWER) + r"\n\n\*\*([a-z])\.\*\*", block)
            assert verdict and verdict.group(1) in options, block[:200]
