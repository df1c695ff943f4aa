"""Every budget check's script still runs (issue 36, item 5): at --quick (the chapter's budget shrunk, the check
still 5x it, over as many seeds), writing its record into the folder it is given, never over the committed ones."""

from __future__ import annotations

import pytest
from test_benchmarks_run import SCRIPTS, runs_at_its_quick_size_into_the_folder_it_is_given

CHECKS = [p for p in SCRIPTS if p.name.startswith("budget_check_")]


def test_every_training_chapter_has_a_budget_check_script():
    assert len(CHECKS) == 7


@pytest.mark.slow
@pytest.mark.parametrize("script", CHECKS, ids=lambda p: p.stem)
def test_the_budget_check_runs_at_its_quick_size_into_the_folder_it_is_given(script, tmp_path):
    runs_at_its_quick_size_into_the_folder_it_is_given(script, tmp_path)
