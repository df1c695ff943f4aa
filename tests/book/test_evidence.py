"""Each chapter's evidence checks (tests/helpers/evidence/) catch what they exist to catch: planted contradictions.

The checks themselves run over the built book in test_book.py; here each one is given a planted notebook whose
summary contradicts its table and must report it. Each chapter's module adds its own cases below.
"""

from __future__ import annotations

from helpers import evidence


def test_a_chapter_without_a_module_has_none_and_a_broken_module_is_not_hidden():
    assert evidence.module_for("99_no_such_chapter") is None


def test_glued_numbers_parse_and_text_stays_text():
    glued = {"a": {"text/plain": "0.05"}, "b": {"text/plain": "'gradual'"}, "c": {"text/plain": "1,024"}}
    assert evidence.numbers(glued) == {"a": 0.05, "b": "gradual", "c": 1024.0}
