"""A time budget per notebook (budget.py, issue 26 item 3): after a notebook's first cell runs past the per-cell
limit, its remaining cells get at most 5 s each, and the student and the report read "this cell ran longer than N s
(an infinite loop?)" instead of a bare KeyboardInterrupt."""

from __future__ import annotations

import re
import time

import nbformat
import pytest
from helpers import grading_corpus as corpus

from manyheads_grader import runner
from manyheads_grader.execution import budget, sandbox
from manyheads_grader.output import report

LOOPS = "def softmax(scores):\n    while True:\n        pass"


def test_budgeted_execute_replaces_nbgrader_s_execute_and_nothing_else(tmp_path):
    from nbgrader.converters.autograde import Autograde

    config = tmp_path / "nbgrader_config.py"
    config.write_text("c = get_config()\n")
    budget.use_budget(config)
    budget.use_budget(config)  # idempotent
    text = config.read_text()
    assert text.count(budget._BEGIN) == 1
    names = eval(text.split("c.Autograde.autograde_preprocessors = ", 1)[1].splitlines()[0])
    default = Autograde.class_traits()["autograde_preprocessors"].default()
    assert len(names) == len(default) and names[0] == "manyheads_grader.execution.budget.BudgetedExecute"
    assert [n.rsplit(".", 1)[1] for n in names[1:]] == [c.__name__ for c in default[1:]]


def test_the_message_names_the_limit():
    assert budget.timeout_message(60) == "this cell ran longer than 60 s (an infinite loop?) and was stopped"
    assert "the others get 5 s each" in budget.timeout_message(5, after_first=True)


@pytest.mark.parametrize(
    ("n", "jobs", "size"),
    [(60, 2, 5), (100, 2, 5), (65, 2, 5), (4, 2, 2), (3, 2, 2), (2, 2, 1), (1, 1, 1), (5, 4, 2), (1000, 40, 5)],
)
def test_a_class_is_cut_into_small_equal_chunks_of_two_or_more(n, jobs, size):
    """Chunks of at most 5 from a shared queue: a job held up by a looping notebook leaves the rest of the class to
    the others (a fixed half of it would wait for it); every job a chunk, of two or more where the class allows."""
    assert runner.chunk_size(n, jobs) == size
    chunks = -(-n // size)
    assert size <= runner.CHUNK_MAX and chunks >= min(jobs, n // 2)


@pytest.mark.parametrize(("n", "jobs", "size"), [(60, 2, 10), (100, 2, 10), (65, 2, 9), (4, 2, 2), (1000, 40, 9)])
def test_a_cluster_gets_chunks_of_up_to_10(n, jobs, size):
    """On a cluster each chunk sets up a worker of its own (template, nbgrader): chunks of up to 10 spread that."""
    assert runner.chunk_size(n, jobs, runner.CLUSTER_CHUNK_MAX) == size


@pytest.mark.slow
def test_a_looping_answer_costs_one_full_timeout_then_5_s_a_cell(tmp_path):
    if sandbox.available():
        pytest.fail(sandbox.available())
    subs, out = tmp_path / "subs", tmp_path / "out"
    for student, nb in {"loops": corpus.answered({"softmax": LOOPS}), "fine": corpus.answered()}.items():
        (subs / student).mkdir(parents=True)
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(nb))
    started = time.monotonic()
    done = corpus.run_grade(corpus.EX1, str(subs), "--out", str(out), "--jobs", "1", "--timeout", "12")
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report.read_csv(out / "grades.csv")
    assert rows["fine"]["score"] == "8" and rows["loops"]["status"] == "graded"
    assert "ran past its time limit (an infinite loop?)" in rows["loops"]["problems"]
    graded = nbformat.read(out / "course" / "autograded" / "loops" / corpus.EX1 / f"{corpus.EX1}.ipynb", 4)
    stopped = [o.evalue for c in graded.cells for o in c.get("outputs", []) if o.get("ename") == budget.ENAME]
    assert stopped[0] == budget.timeout_message(12), stopped
    assert len(stopped) >= 2 and all(m == budget.timeout_message(5, after_first=True) for m in stopped[1:]), stopped
    for cell in graded.cells:
        assert not any(o.get("ename") in ("KeyboardInterrupt", "CellTimeoutError") for o in cell.get("outputs", []))
    html = (out / "feedback" / "loops" / f"{corpus.EX1}.html").read_text()
    assert "this cell ran longer than 12 s (an infinite loop?)" in html and "KeyboardInterrupt" not in html
    md = (out / "report.md").read_text()
    assert "this cell ran longer than" in md
    # one full limit, then 5 s for each other looping cell: far from one full limit per cell
    budgeted = 12 + 5 * (len(stopped) - 1)
    print(
        f"looping cells: {len(stopped)}, budget {budgeted} s (without it {12 * len(stopped)} s); class {seconds:.0f} s"
    )
    # No wall-clock assertion: on a loaded machine a class's time says nothing about the budget (CI failed at 121 s
    # under load); the budget shows in the messages above, and its time is measured in benchmarks/grading.py.
    assert re.search(r"Preflight: preflight passed", md)
    # progress: a line per student as it finishes, with the time left until the last
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and lines[0].startswith("[1/2] ") and lines[1].startswith("[2/2] "), done.stderr
    looping = next(line for line in lines if "] loops:" in line)
    assert "(time limit)" in looping and re.search(r"\] fine: 8/8 in \d+\.\d s", done.stderr), lines
    assert "left" in lines[0] and lines[1].endswith("; done"), lines
