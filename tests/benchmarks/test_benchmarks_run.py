"""Benchmarks that cannot rot (issue 36, item 5): every script in benchmarks/ runs at its quick size and writes its
JSON where it is told, never over the committed results; and the README's table of committed results is the one
tools/benchmark_table.py makes from them, so each figure there names the command that produced it.

A benchmark used to import a module that had been renamed, and nothing noticed until someone ran it by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from manyheads.course.layout import REPO

BENCHMARKS = REPO.root / "benchmarks"
RESULTS = BENCHMARKS / "results"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
# The budget checks run in test_budget_checks_run.py: pytest-xdist hands a file to one worker, and the two halves of
# the quick runs (about 50 s and 110 s alone on 2 cores, one after the other) should not queue on the same one.
MEASURES = [p for p in SCRIPTS if not p.name.startswith("budget_check_")]
TIMEOUT_S = 600  # far above a quick run (2-25 s alone on 2 cores, slower beside the other worker), below a hang


def _committed_results() -> dict[str, int]:
    return {str(p.relative_to(RESULTS)): p.stat().st_mtime_ns for p in RESULTS.rglob("*.json")}


def test_there_are_benchmarks_to_run():
    assert len(SCRIPTS) >= 20 and (BENCHMARKS / "own_work_guard.py") in SCRIPTS


def runs_at_its_quick_size_into_the_folder_it_is_given(script, tmp_path):
    before = _committed_results()
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--results", str(tmp_path)],
        cwd=REPO.root,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, f"{script.name} --quick failed:\n{(done.stdout + done.stderr)[-4000:]}"
    written = sorted(tmp_path.rglob("*.json"))
    assert written, f"{script.name} --quick --results wrote no JSON into the folder it was given"
    for path in written:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert path.stem.endswith("_quick"), f"{path.name}: a quick run's file must say so in its name"
        if "rows" in data:  # a table (benchmarks/_report.py); otherwise a budget check's record
            assert data["rows"] and data["meta"]["command"].startswith("benchmarks/"), path.name
        else:
            assert {"id", "verdict", "holds", "numbers"} <= data.keys(), path.name
    assert _committed_results() == before, f"{script.name} --quick touched benchmarks/results/"


@pytest.mark.slow
@pytest.mark.parametrize("script", MEASURES, ids=lambda p: p.stem)
def test_the_benchmark_runs_at_its_quick_size_into_the_folder_it_is_given(script, tmp_path):
    runs_at_its_quick_size_into_the_folder_it_is_given(script, tmp_path)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_benchmark_takes_the_common_options(script):
    text = script.read_text(encoding="utf-8")
    assert "parse(arguments(__doc__))" in text or ("arguments(__doc__)" in text and "parse(parser)" in text), (
        f"{script.name}: build the command line with _report.arguments and read it with _report.parse, so that "
        "it takes --quick and --results like every other benchmark"
    )


def test_the_readme_table_lists_every_committed_result_with_its_command():
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_table", REPO.root / "tools" / "benchmark_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    readme = (REPO.root / "README.md").read_text(encoding="utf-8")
    assert table.current_table(readme) == table.make_table(), (
        "README.md's benchmark table is out of date: run .venv/bin/python tools/benchmark_table.py"
    )
    for path in RESULTS.glob("*.json"):
        assert f"`{path.name}`" in readme, f"{path.name} is missing from README.md's benchmark table"
