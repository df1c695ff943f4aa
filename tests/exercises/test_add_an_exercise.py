"""Adding an exercise is a description entry and a notebook (and, for code parts, its checks module): a fake one
(fake_exercise.py) enters every derived list of the exercises' fast tests and passes them, with no other edit."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fake_exercise import FAKE, write_course
from helpers.nbgrader_course import ROOT

# The exercise-parametrised test files that run in this process (the nbgrader and nbclient ones take minutes).
FILES = ("test_descriptions.py", "test_answers.py", "test_visible_check_forms.py")


@pytest.mark.slow
def test_a_fake_exercise_needs_only_its_description_entry_notebook_and_checks_module(tmp_path):
    course = write_course(tmp_path / "course")
    report = tmp_path / "report.xml"
    here = Path(__file__).parent
    env = {**os.environ, "FAKE_COURSE": str(course), "PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}
    args = ["-p", "fake_exercise", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={report}"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-k", FAKE.stem, *(str(here / f) for f in FILES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    cases = ET.parse(report).getroot().iter("testcase")
    ran = {(c.get("classname").rsplit(".", 1)[-1], c.get("name").split("[")[0]) for c in cases}
    expected = {
        ("test_descriptions", "test_description_names_every_graded_cell_with_its_points"),
        ("test_descriptions", "test_part_anatomy"),
        ("test_descriptions", "test_written_answers_and_imports"),
        ("test_answers", "test_right_answers_pass_the_hidden_tests"),
        ("test_answers", "test_hidden_tests_catch_an_answer_made_wrong_from_the_solution"),
        ("test_answers", "test_visible_checks_let_the_stub_s_not_implemented_error_through"),
        ("test_visible_check_forms", "test_reference_answers_pass_every_visible_check"),
        (
            "test_visible_check_forms",
            "test_an_answer_that_misses_one_form_fails_the_visible_check_with_a_message_naming_it",
        ),
        ("test_visible_check_forms", "test_an_answer_that_misses_any_one_input_fails_the_visible_check"),
    }
    assert expected <= ran, expected - ran
