"""The instructor's page for a term (issue 37, item 7): the option tables of ``grade`` and ``rescore`` are the
commands' own (a test fails when they differ: rewrite them with tools/grading_options.py), the worked late example is
the code's arithmetic, the Canvas step names --column, and the page warns that stock nbgrader in OUT/course runs
student code unsandboxed."""

from __future__ import annotations

import importlib.util
import re

from manyheads.course.layout import REPO
from manyheads_grader.term import late

PAGE = REPO.root / "instructors" / "grading.md"
_spec = importlib.util.spec_from_file_location("grading_options", REPO.root / "tools" / "grading_options.py")
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


def test_the_option_tables_are_the_commands_own():
    text = PAGE.read_text(encoding="utf-8")
    assert tool.rewrite(text) == text, "run: .venv/bin/python tools/grading_options.py"
    for option in ("--course", "--lms", "--gradebook", "--column", "--keep-work", "--due", "--undo", "--times"):
        assert f"`{option} " in text or f"`{option}`" in text, option


def test_the_worked_late_example_is_what_the_code_computes():
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    example = re.search(
        r"with a maximum of (\d+), (\d+) points earned, `P` = (\d+), .*? 20 % of 10, so (\d+) points", text
    )
    maximum, raw, penalty, final = map(float, example.groups())
    policy = late.Policy(due="2026-11-30T23:59:00", penalty=penalty)  # Monday 23:59 -> Wednesday 11:59
    assert policy.verdict("s", raw, maximum, late.parse_time("2026-12-02T11:59:00", "t"))[1] == final


def test_the_canvas_step_names_the_column_and_the_page_warns_about_stock_nbgrader():
    lms = (REPO.root / "instructors" / "lms.md").read_text(encoding="utf-8")
    canvas = lms[lms.index("## Canvas, step by step") : lms.index("## Moodle, step by step")]
    assert "--column 'Exercise 1 (123456)'" in canvas and "--times" in canvas
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert "run the students' code **without the sandbox**" in text
    for step in ("**A late student.**", "**An extension.**", "**A changed point value.**", "**An appeal.**"):
        assert step in text, step
