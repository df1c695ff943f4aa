"""Progress while grading (progress.py, issue 26 item 4): one line per student as their notebook is graded (id, name,
score, seconds, flags) with the time left; ``--quiet`` prints none. The time left counts the work in progress (issue
37 item 6): checked here on a simulated class on its own clock (the jobs, chunks and times of the benchmark class);
``benchmarks/grading.py --looping`` measures it on the real command. The real command's lines are checked in
``test_grading_budget.py`` (with progress) and ``test_instructor_report.py`` (``--quiet``)."""

from __future__ import annotations

import io
import re

import nbformat
import pytest
from helpers import grading_corpus as corpus

from manyheads_grader.output import progress
from manyheads_grader.records import Row

LINE = re.compile(r"^\[\s*(\d+)/(\d+)\] (\S+)(?: \(([^)]*)\))?: (.*?) in (\d+\.\d) s(?: \((.*)\))?(?:; (.*))?$")


def test_one_line_per_student_with_name_score_seconds_flags_and_time_left():
    out = io.StringIO()
    tracker = progress.Progress(3, stream=out)  # one job
    tracker.finished(Row("s1", name="Ann Lee"), 10.0, "8/8", [])  # two more of 10 s each to go
    tracker.finished(Row("s2", repaired=True), 10.0, "4/8", ["repaired", "time limit"])
    tracker.finished(Row("s3"), 10.0, "not graded", ["the kernel died"])
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    first = LINE.match(lines[0]).groups()
    assert first[:6] == ("1", "3", "s1", "Ann Lee", "8/8", "10.0") and first[7] == "about 20 s left"
    assert LINE.match(lines[1]).group(7) == "repaired, time limit"
    assert lines[2].endswith("(the kernel died); done")


def test_quiet_prints_nothing():
    out = io.StringIO()
    tracker = progress.Progress(1, stream=out, quiet=True)
    tracker.finished(Row("s1"), 1.0, "8/8", [])
    assert out.getvalue() == "" and tracker.done == 1


def test_the_score_is_read_as_nbgrader_scores_the_graded_notebook(tmp_path):
    nb = corpus.answered()
    test_ids = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("points")}
    test_ids = {t for t in test_ids if t.startswith("test_")}
    i = corpus.cell_index(nb, "test_softmax")
    nb.cells[i].outputs = [nbformat.v4.new_output("error", ename="TimeoutError", evalue="x", traceback=[])]
    with pytest.raises(ValueError, match="not run yet"):  # sanitized, not yet run
        nbformat.write(nb, tmp_path / "graded.ipynb")
        progress.notebook_score(tmp_path / "graded.ipynb", test_ids)
    nb.cells[0].execution_count = 1
    nbformat.write(nb, tmp_path / "graded.ipynb")
    score, top, hit = progress.notebook_score(tmp_path / "graded.ipynb", test_ids)
    assert (score, top, hit) == (corpus.FULL - 2, corpus.FULL, ["time limit"])


# ------------------------------------------------------------------------------------------------------------------
# the time left, on a simulated class


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _simulate(seconds: dict[str, float], jobs: int, chunk: int, feedback: float = 0.4):
    """The class graded as the runner grades it (chunks from one queue, each job one chunk at a time, then the
    chunk's feedback), on a simulated clock: [(time, student, estimate printed, the time actually left)]."""
    clock = Clock()
    pace = progress.Pace(jobs, limit=60, after=5, tests=4)
    tracker = progress.Progress(len(seconds), stream=io.StringIO(), pace=pace, clock=clock)
    students = list(seconds)
    queue = [students[i : i + chunk] for i in range(0, len(students), chunk)]
    running = {}  # job -> Watch of its chunk
    free_at = dict.fromkeys(range(jobs), 0.0)  # a job between chunks takes the next one at this time
    lines = []
    while queue or running:
        for job in range(jobs):
            if job not in running and queue and free_at[job] <= clock.now:
                rows = [Row(s) for s in queue.pop(0)]
                running[job] = progress.Watch(tracker, rows, autograded=None, test_ids=set())
        # the next notebook to finish: each job's current one ends `seconds` after its chunk's watch.last
        ends = {job: w.last + seconds[w.rows[0].student_id] for job, w in running.items()}
        starts = [t for job, t in free_at.items() if job not in running and queue]
        if not ends:
            clock.now = min(starts)
            continue
        job = min(ends, key=ends.get)
        if starts and min(starts) < ends[job]:
            clock.now = min(starts)
            continue
        clock.now = ends[job]
        watch = running[job]
        row = watch.rows[0]
        tracker.finished(row, clock.now - watch.last, "8/8", [], watch)
        lines.append((clock.now, row.student_id, tracker.estimate() if tracker.done < tracker.total else None))
        if not watch.rows:
            del running[job]
            free_at[job] = clock.now + feedback
    end = lines[-1][0]
    return [(t, student, estimate, end - t) for t, student, estimate in lines]


def _benchmark_class(looping: bool) -> dict[str, float]:
    """benchmarks/grading.py's class: 60 notebooks of about 1.7 s, the looping one (s030) 60 s + 3 x 5 s more."""
    times = {f"s{i:03d}": 1.5 + 0.4 * ((i * 7) % 5) / 4 for i in range(60)}
    if looping:
        times["s030"] += 75.0
    return times


def test_the_time_left_counts_a_looping_notebook_in_progress():
    """Issue 37's report: "about 1 s left" before a 71 s wait. Once the looping notebook has run past the usual time
    (``Progress.SLOW`` x the median, and ``SLOW_S`` more: until then it looks like any other), no estimate is less
    than half the time actually left, the last ones included. The lines before cannot know of it."""
    times = _benchmark_class(looping=True)
    lines = _simulate(times, jobs=3, chunk=5)
    started = next(t for t, student, _, _ in lines if student == "s030") - times["s030"]
    usual = sorted(times.values())[len(times) // 2]
    known = started + progress.Progress.SLOW * usual + progress.Progress.SLOW_S
    during = [(t, student, est, left) for t, student, est, left in lines if t >= known and est is not None]
    assert len(during) > 15, during
    too_low = [(round(t, 1), s, round(est, 1), round(left, 1)) for t, s, est, left in during if est < left / 2]
    assert not too_low, too_low
    # the moment of the report: every notebook that does not wait for the looping one done, that one still running
    t, student, est, left = lines[[line[1] for line in lines].index("s030") - 1]
    assert left > 30 and est >= left / 2, (t, student, est, left)
    # and the estimator of before (the time so far per student done, times the students left) fails here
    old = [(t, left, t / (n + 1) * (60 - n - 1)) for n, (t, _, _, left) in enumerate(lines) if t >= known and n < 59]
    assert any(guess < left / 2 for t, left, guess in old)


def test_the_time_left_of_a_plain_class_stays_near_the_truth():
    """Without a looping notebook the estimate is neither far below nor far above the time left (within a factor
    of two once three students are done, and while more than 5 s are left)."""
    lines = _simulate(_benchmark_class(looping=False), jobs=3, chunk=5)
    checked = [(t, s, est, left) for t, s, est, left in lines[3:] if est is not None and left > 5]
    assert len(checked) > 40
    off = [
        (round(t, 1), s, round(est, 1), round(left, 1))
        for t, s, est, left in checked
        if not left / 2 <= est <= 2 * left
    ]
    assert not off, off
