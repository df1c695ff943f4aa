"""The suite's time budget (tests/budget.toml, tools/test_budget.py): the last step of ``make test`` fails when a
folder of tests is slower than its budget by more than the margin, names the tests to look at, and scales every
budget by the machine's measured speed so that a slow machine is not taken for a slow suite."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys

import pytest

from manyheads.course.layout import REPO

_spec = importlib.util.spec_from_file_location("test_budget_tool", REPO.root / "tools" / "test_budget.py")
tool = sys.modules.setdefault("test_budget_tool", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(tool)

BUDGET = {
    "margin": 0.25,
    "reference": {"torch_import_s": 2.0, "python_code_s": 0.2, "torch_ops_s": 0.1},
    "suite": {"pytest_wall_s": 100},
    "folders": {"tests/book": 50, "tests/grader": 40},
}


def _junit(path, wall: float, cases: dict[str, float], xdist: bool = True) -> None:
    """A JUnit report as pytest writes it (``testsuites`` > ``testsuite`` > ``testcase``, times in seconds)."""
    rows = []
    for test, seconds in cases.items():
        module, name = test.split("::")
        classname = module.removesuffix(".py").replace("/", ".")
        rows.append(f'<testcase classname="{classname}" name="{name}" time="{seconds}" />')
    suite = f'<testsuite name="pytest" tests="{len(rows)}" time="{wall}">{"".join(rows)}</testsuite>'
    path.write_text(f"<testsuites>{suite}</testsuites>" if xdist else suite, encoding="utf-8")


def _check(tmp_path, wall, cases, speed=1.0, budget=BUDGET) -> tuple[int, str]:
    _junit(tmp_path / "report.xml", wall, cases)
    (tmp_path / "speed.json").write_text(json.dumps({"speed": speed}))
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = tool.check(tmp_path / "report.xml", tmp_path / "speed.json", budget, tmp_path / "durations.json")
    return status, printed.getvalue()


def test_a_run_within_budget_passes_and_its_figures_are_kept(tmp_path):
    cases = {"tests/book/test_book.py::test_a": 30.0, "tests/book/test_b.py::test_b[x]": 29.0}
    status, printed = _check(tmp_path, 80.0, {**cases, "tests/grader/test_g.py::test_g": 45.0})
    assert status == 0, printed  # grader 45 s: over 40 s, within 25 %
    kept = json.loads((tmp_path / "durations.json").read_text())
    assert kept["folders"] == {"tests/book": 59.0, "tests/grader": 45.0} and kept["wall_s"] == 80.0
    assert re.search(r"tests/book\s+59\s+50\s+50", printed), printed


def test_a_folder_over_budget_fails_and_names_its_slowest_tests_first(tmp_path):
    cases = {f"tests/grader/test_g.py::test_{i}": float(i) for i in range(1, 12)}  # 66 s against 40 (+25 % = 50)
    status, printed = _check(tmp_path, 80.0, cases)
    assert status == 1
    named = re.findall(r"^\s+([\d.]+) s  (\S+)$", printed, re.MULTILINE)
    slowest_first = [f"tests/grader/test_g.py::test_{i}" for i in range(11, 11 - tool.SLOWEST, -1)]
    assert [test for _, test in named] == slowest_first
    assert "tests/grader took 66 s: over its budget of 40 s" in printed and "tests/book took" not in printed


def test_the_whole_run_has_its_own_budget(tmp_path):
    status, printed = _check(tmp_path, 130.0, {"tests/book/test_book.py::test_a": 1.0})
    assert status == 1 and "the whole run took 130 s of pytest: over its budget of 100 s" in printed
    assert _check(tmp_path, 124.0, {"tests/book/test_book.py::test_a": 1.0})[0] == 0


def test_budgets_scale_with_the_machine_s_speed(tmp_path):
    cases = {"tests/grader/test_g.py::test_g": 90.0}
    assert _check(tmp_path, 200.0, cases, speed=1.0)[0] == 1
    status, printed = _check(tmp_path, 200.0, cases, speed=2.0)  # a machine that takes twice as long
    assert status == 0, printed
    assert "takes 2.00x the reference's time; budgets x 2.00" in printed


def test_a_machine_that_reads_faster_than_the_reference_keeps_the_reference_s_budgets(tmp_path):
    """A quick calibration does not tighten the budgets: the workloads read faster than the suite runs under load."""
    cases = {"tests/grader/test_g.py::test_g": 45.0}  # the grader's budget is 40 (+25 %: 50); x 0.5 it would fail
    status, printed = _check(tmp_path, 50.0, cases, speed=0.5)
    assert status == 0, printed
    assert "takes 0.50x the reference's time; budgets x 1.00" in printed
    assert _check(tmp_path, 50.0, {"tests/grader/test_g.py::test_g": 51.0}, speed=0.5)[0] == 1


def test_a_folder_without_a_budget_fails(tmp_path):
    status, printed = _check(tmp_path, 10.0, {"tests/newthing/test_n.py::test_n": 1.0})
    assert status == 1 and "tests/newthing has no budget" in printed


def test_the_report_is_read_with_and_without_pytest_xdist(tmp_path):
    cases = {"tests/book/test_book.py::test_a[1]": 2.5, "tests/package/test_p.py::test_b": 1.5}
    for xdist in (True, False):
        _junit(tmp_path / "r.xml", 7.0, cases, xdist=xdist)
        run = tool.read_report(tmp_path / "r.xml")
        assert run.wall_s == 7.0 and run.tests == cases
        assert tool.by_folder(run) == {"tests/book": 2.5, "tests/package": 1.5}


def test_speed_is_the_geometric_mean_of_the_workloads_ratios():
    reference = BUDGET["reference"]
    assert tool.speed(reference, reference) == pytest.approx(1.0)
    slower = {"torch_import_s": 4.0, "python_code_s": 0.4, "torch_ops_s": 0.2}
    assert tool.speed(slower, reference) == pytest.approx(2.0)
    mixed = {"torch_import_s": 8.0, "python_code_s": 0.2, "torch_ops_s": 0.1}
    assert tool.speed(mixed, reference) == pytest.approx(4 ** (1 / 3))


def test_the_committed_budget_covers_every_test_folder_and_make_test_checks_it():
    budget = tool.load_budget()
    folders = {f"tests/{p.name}" for p in (REPO.root / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert set(budget["folders"]) == folders
    assert budget["margin"] == 0.25
    # Two workers: the wall-time budget is no looser than the folders' budgets shared out over them.
    assert budget["suite"]["pytest_wall_s"] <= 1.05 * sum(budget["folders"].values()) / 2
    # A ratchet: the figure measured when the budget was set (issue 34's target is 600 s); it may only come down,
    # but for what an issue allows: issue 37 gave its term tests up to 3 minutes (150 s of wall time taken), issue 38
    # its graded mistakes up to 2 minutes (60 s taken).
    assert budget["suite"]["pytest_wall_s"] <= 1850 + 150 + 60
    assert set(budget["reference"]) == set(tool.WORKLOADS)
    recipe = (REPO.root / "Makefile").read_text(encoding="utf-8").split("\ntest:", 1)[1].split("\n\n", 1)[0]
    steps = [line.strip() for line in recipe.splitlines()[1:]]
    assert "tools/test_budget.py calibrate" in steps[0]
    assert "--junitxml=_build/test-report.xml" in steps[1] and "pytest" in steps[1]
    assert "tools/test_budget.py check" in steps[2]


def _reads_the_book(path) -> bool:
    """Whether a test file's tests or fixtures take tests/book/conftest.py's ``book`` fixture."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    return any(arg.arg == "book" for f in functions for arg in f.args.args)


def test_the_schedule_starts_the_build_first_and_its_readers_last():
    """pytest-xdist hands out files in tests/budget.toml's order: the file that builds the book first, every other
    file that reads the book last (a worker that reached one earlier would wait for the build)."""
    schedule = tool.load_budget()["schedule"]
    first, last = schedule["first"], schedule["last"]
    for name in first + last:
        assert (REPO.root / name).is_file(), name
    assert not set(first) & set(last)
    assert first[0] == "tests/book/test_book.py" and _reads_the_book(REPO.root / first[0])
    readers = {f"tests/book/{p.name}" for p in (REPO.root / "tests" / "book").glob("test_*.py") if _reads_the_book(p)}
    assert readers - {first[0]} == set(last)
    makefile = (REPO.root / "Makefile").read_text(encoding="utf-8")
    assert "--dist loadfile --no-loadscope-reorder" in makefile


def test_the_collection_follows_the_schedule():
    """tests/conftest.py's ordering (helpers/schedule.py)."""
    from helpers.schedule import order

    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    schedule = tool.load_budget()["schedule"]
    names = ["tests/course/test_a.py::t", schedule["last"][0] + "::t1", schedule["first"][1] + "::t"]
    names += [schedule["first"][0] + "::t2", "tests/package/test_b.py::t", schedule["first"][0] + "::t1"]
    items = [Item(n) for n in names]
    order(items)
    assert [i.nodeid for i in items] == [
        schedule["first"][0] + "::t2",
        schedule["first"][0] + "::t1",
        schedule["first"][1] + "::t",
        "tests/course/test_a.py::t",
        "tests/package/test_b.py::t",
        schedule["last"][0] + "::t1",
    ]
