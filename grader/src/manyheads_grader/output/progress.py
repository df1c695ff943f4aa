"""Progress while ``manyheads grade`` runs (issue 26, item 4): one line per student as their notebook is graded, with
the id, the name when the LMS gave one, the automatic score, the seconds it took and what happened to it, and an
estimate of the time left. Written to stderr (the summary stays on stdout); ``--quiet`` prints none.

The score is read from the graded notebook as nbgrader scores it (``nbgrader.utils.determine_grade``), the moment
nbgrader writes it; the grades table and the report still come from the gradebook at the end.

The time left (:meth:`Progress.estimate`, issue 37 item 6) counts the work in progress, not only the students
finished: each job's notebook in progress (a usual one has about the median time left; one that has run well past the
usual time is taken to be running into the cell limit, and then into the shorter limit of its later test cells), the
rest of that job's chunk, which waits behind it, and the chunks no job has taken yet, shared by the jobs. What it
cannot know is a notebook that has not started yet: a looping notebook still in the queue is not in the estimate
until its job takes it (``benchmarks/grading.py --looping`` measures each line's estimate against the time that
was actually left).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

RUN_FLAGS = {"KeyboardInterrupt": "time limit", "TimeoutError": "time limit", "MemoryError": "out of memory"}


def notebook_score(path: Path, test_ids: set[str]) -> tuple[float, float, list[str]]:
    """(automatic score, out of, what the run hit) of a graded notebook. Raises if it cannot be read yet or has
    not run yet."""
    from nbgrader.utils import determine_grade

    nb = nbformat.read(path, as_version=4)
    if not any(c.cell_type == "code" and c.get("execution_count") for c in nb.cells):
        raise ValueError("not run yet")  # nbgrader writes the sanitized notebook before it runs it
    score = top = 0.0
    hit: list[str] = []
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in test_ids:
            got, most = determine_grade(cell)
            score += got or 0.0
            top += most or 0.0
        for out in cell.get("outputs", []):
            flag = RUN_FLAGS.get(out.get("ename", "")) if out.get("output_type") == "error" else None
            if flag and flag not in hit:
                hit.append(flag)
    return score, top, hit


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(frozen=True)
class Pace:
    """What the time left goes by besides the students finished: the jobs grading at once, the per-cell time limit
    (``--timeout``), each later cell's limit once a notebook has run out of time (``budget.AFTER_TIMEOUT``), and the
    graded test cells of the assignment (the cells that meet a looping answer again)."""

    jobs: int = 1
    limit: float = 60.0
    after: float = 5.0
    tests: int = 0


class Progress:
    """Counts students as they finish and prints a line each (thread-safe: the workers report at once)."""

    # a notebook in progress for SLOW x the median time, and SLOW_S more, is taken to be running into the limit
    SLOW = 3.0
    SLOW_S = 5.0

    def __init__(self, total: int, stream=None, quiet: bool = False, pace: Pace = Pace(), clock=time.monotonic):
        self.total, self.done, self.quiet, self.pace = total, 0, quiet, pace
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock  # a test's simulated class runs on its own clock
        self.lock = threading.Lock()
        self.seconds: list[float] = []  # each finished student's time on its job
        self.watches: list[Watch] = []  # the chunks in progress

    def estimate(self, now: float | None = None) -> float | None:
        """Seconds left: the jobs' notebooks in progress, the rest of their chunks and the chunks not taken yet;
        None before the first student finishes (nothing to go by)."""
        if not self.seconds:
            return None
        now = self.clock() if now is None else now
        usual = statistics.median(self.seconds)
        per_job = []
        for watch in self.watches:
            if not watch.rows:
                continue
            ran = now - watch.last
            if ran > self.SLOW * usual + self.SLOW_S:  # past the usual time: a cell is running into the limit
                current = max(self.pace.limit + usual - ran, 0.0) + self.pace.after * self.pace.tests
            else:
                current = max(usual - ran, 0.0)
            per_job.append(current + (len(watch.rows) - 1) * usual)
        queued = self.total - self.done - sum(len(w.rows) for w in self.watches)
        shared = (sum(per_job) + max(queued, 0) * usual) / max(1, self.pace.jobs)
        return max([shared, *per_job])

    def line(self, row, seconds: float, score: str, flags: list[str]) -> str:
        name = f" ({row.name})" if getattr(row, "name", "") else ""
        left = self.total - self.done
        estimate = self.estimate() if left else None
        if estimate is not None:
            eta = f"about {_duration(estimate)} left"
        else:
            eta = "done" if not left else ""
        width = len(str(self.total))
        text = f"[{self.done:>{width}}/{self.total}] {row.student_id}{name}: {score} in {seconds:.1f} s"
        if flags:
            text += f" ({', '.join(flags)})"
        return f"{text}; {eta}" if eta else text

    def finished(self, row, seconds: float, score: str, flags: list[str], watch: Watch | None = None) -> None:
        with self.lock:
            self.done += 1
            self.seconds.append(seconds)
            if watch is not None and row in watch.rows:
                watch.rows.remove(row)
                watch.last = self.clock()  # the next of its chunk starts now
            self.watches = [w for w in self.watches if w.rows]
            if not self.quiet:
                print(self.line(row, seconds, score, flags), file=self.stream, flush=True)


class Watch:
    """One worker's chunk: reports each student whose graded notebook has appeared since the last look."""

    def __init__(self, progress: Progress | None, rows: list, autograded, test_ids: set[str]):
        self.progress, self.rows, self.autograded, self.test_ids = progress, list(rows), autograded, test_ids
        self.last = progress.clock() if progress is not None else 0.0  # when its notebook in progress started
        if progress is not None:
            with progress.lock:
                progress.watches.append(self)

    def __call__(self, final: bool = False) -> None:
        if self.progress is None:
            return
        for row in list(self.rows):
            path = self.autograded(row)
            if not path.is_file():
                continue
            try:
                score, top, hit = notebook_score(path, self.test_ids)
            except Exception:  # still being written: the next look reads it
                if not final:
                    continue
                score, top, hit = None, None, ["unreadable"]
            flags = (["repaired"] if getattr(row, "repaired", False) else []) + hit
            shown = "score unknown" if score is None else f"{score:g}/{top:g}"
            self.progress.finished(row, self.progress.clock() - self.last, shown, flags, self)

    def failed(self, row, why: str) -> None:
        """A student nbgrader could not grade (reported when the chunk ends)."""
        if self.progress is None or row not in self.rows:
            return
        self.progress.finished(row, self.progress.clock() - self.last, "not graded", [why], self)
