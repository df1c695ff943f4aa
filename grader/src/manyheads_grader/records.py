"""The grader's shared records: one :class:`Row` per student, the run's :class:`Options`, and :class:`GradingError`.

Every other module of the grader reads and writes these; this module imports none of them but the sandbox's limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from manyheads_grader.sandbox import Limits

FEEDBACK_DIR = {"student": "feedback", "full": "feedback-full"}  # OUT/<folder> for each --feedback view


class GradingError(Exception):
    """Misuse or a broken course (unknown assignment, nbgrader cannot release it): the command stops."""


@dataclass
class Row:
    student_id: str
    status: str = "failed"
    problems: list[str] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    tests: dict[str, float | None] = field(default_factory=dict)
    notebook: nbformat.NotebookNode | None = None
    feedback: Path | None = None
    repaired: bool = False
    zeroed: dict[str, str] = field(default_factory=dict)  # test id -> evidence: no points by the own-work rule
    failures: dict[str, str] = field(default_factory=dict)  # test id -> the message its test raised (report.py)
    flags: list[str] = field(default_factory=list)  # integrity flags for a human (flags.py): no points, no status
    submitted: nbformat.NotebookNode | None = None  # the file as handed in, cut to what flags.out_of_order compares
    name: str = ""  # the display name from the LMS's file names, if any (never the id)
    version: str | None = None  # the course release the notebook was written for (versions.py); None: unknown


def default_jobs() -> int:
    """Jobs by default: one more than the cores. A job alternates between nbgrader and its kernel, each waiting for
    the other, so as many jobs as cores leave the CPU partly idle (benchmarks/grading.py)."""
    return (os.cpu_count() or 1) + 1


@dataclass
class Options:
    jobs: int = field(default_factory=lambda: default_jobs())
    timeout: int = 60
    db: str | None = None
    pattern: str | None = None
    lms: str = "auto"  # the download's layout (lms.py): auto, canvas, moodle, blackboard or generic
    sandbox: bool = True
    keep_work: bool = False
    chunk: int | None = None
    feedback: str = "student"  # or "full": the instructor's private view, written to OUT/feedback-full
    limits: Limits = Limits()
    scheduler: str | None = None  # tcp://HOST:PORT of a dask.distributed scheduler: the chunks are graded there
    preflight: bool = True  # grade the reference answers and a blank release first (preflight.py)
    quiet: bool = False  # no progress lines (progress.py)
    check: bool = False  # only the preflight (``manyheads grade --check``): no submissions, nothing written to OUT
