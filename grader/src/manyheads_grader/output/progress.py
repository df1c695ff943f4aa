"""Progress while ``manyheads grade`` runs (issue 26, item 4): one line per student as their notebook is graded, with
the id, the name when the LMS gave one, the automatic score, the seconds it took and what happened to it, and an
estimate of the time left. Written to stderr (the summary stays on stdout); ``--quiet`` prints none.

The score is read from the graded notebook as nbgrader scores it (``nbgrader.utils.determine_grade``), the moment
nbgrader writes it; the grades table and the report still come from the gradebook at the end.
"""

from __future__ import annotations

import sys
import threading
import time
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


class Progress:
    """Counts students as they finish and prints a line each (thread-safe: the workers report at once)."""

    def __init__(self, total: int, stream=None, quiet: bool = False):
        self.total, self.done, self.quiet = total, 0, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.lock = threading.Lock()

    def line(self, row, seconds: float, score: str, flags: list[str]) -> str:
        name = f" ({row.name})" if getattr(row, "name", "") else ""
        left = self.total - self.done
        if left and self.done:
            eta = f"about {_duration((time.monotonic() - self.started) / self.done * left)} left"
        else:
            eta = "done" if not left else ""
        width = len(str(self.total))
        text = f"[{self.done:>{width}}/{self.total}] {row.student_id}{name}: {score} in {seconds:.1f} s"
        if flags:
            text += f" ({', '.join(flags)})"
        return f"{text}; {eta}" if eta else text

    def finished(self, row, seconds: float, score: str, flags: list[str]) -> None:
        with self.lock:
            self.done += 1
            if not self.quiet:
                print(self.line(row, seconds, score, flags), file=self.stream, flush=True)


class Watch:
    """One worker's chunk: reports each student whose graded notebook has appeared since the last look."""

    def __init__(self, progress: Progress | None, rows: list, autograded, test_ids: set[str]):
        self.progress, self.rows, self.autograded, self.test_ids = progress, list(rows), autograded, test_ids
        self.last = time.monotonic()

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
            now = time.monotonic()
            flags = (["repaired"] if getattr(row, "repaired", False) else []) + hit
            shown = "score unknown" if score is None else f"{score:g}/{top:g}"
            self.progress.finished(row, now - self.last, shown, flags)
            self.last = now
            self.rows.remove(row)

    def failed(self, row, why: str) -> None:
        """A student nbgrader could not grade (reported when the chunk ends)."""
        if self.progress is None or row not in self.rows:
            return
        now = time.monotonic()
        self.progress.finished(row, now - self.last, "not graded", [why])
        self.last = now
        self.rows.remove(row)
