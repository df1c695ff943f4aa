"""The grader's shared records: each stage's frozen record of a student (:class:`Checked`, :class:`Executed` with its
:class:`CellOutcome` list, :class:`Scored`, :class:`Reviewed`), joined into the class result, one :class:`Row` per
student (:func:`class_result`); each :class:`Problem` with its :class:`ProblemKind`, what the run observed
(:class:`RunFacts`, :class:`VersionFacts`), the sandbox's :class:`Limits`, the run's :class:`Options`, and
:class:`GradingError`.

Every other module of the grader reads and writes these; this module imports none of them.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

FEEDBACK_DIR = {"student": "feedback", "full": "feedback-full"}  # OUT/<folder> for each --feedback view


class GradingError(Exception):
    """Misuse or a broken course (unknown assignment, nbgrader cannot release it): the command stops."""


class ProblemKind(enum.Enum):
    """What kind of thing a :class:`Problem` reports: what later stages decide by (never the text)."""

    COLLECTED = "collected"  # the download's layout: a file too large, late, earlier attempts not graded
    UNREADABLE = "unreadable"  # no notebook of this student could be read: nothing to grade
    NOTE = "note"  # checking the notebook against the release found something to say, nothing repaired
    REPAIRED = "repaired"  # the notebook was repaired against the release (a deleted test restored, ...)
    NOT_GRADED = "not graded"  # nbgrader produced no graded notebook for it (``detail``: why, if known)
    MANUAL = "manual"  # a part has no automatic score: a human grades it
    RUN = "run"  # what happened while it ran: a time, memory or output limit hit
    OWN_WORK = "own work"  # a part given no points by the own-work rule, or a way around it for a human to look at
    NO_FEEDBACK = "no feedback"  # graded, but no feedback page was produced


# The kinds that need a human before the grades are final (the report lists these students first).
NEEDS_A_HUMAN = frozenset({ProblemKind.MANUAL, ProblemKind.OWN_WORK})


@dataclass(frozen=True)
class Problem:
    """Something to report about one student's submission: its kind, the text people read, and for
    :attr:`ProblemKind.NOT_GRADED` the reason alone (``detail``), without the sentence around it."""

    kind: ProblemKind
    text: str
    detail: str = ""

    def __str__(self) -> str:
        return self.text


# The reasons a notebook was not graded that say nothing about the notebook: the grader's environment failed it (a
# re-grade that fails for one of these keeps the student's previous result, term.merge).
STARTUP_DEATH = (
    "the kernel died at start-up, before any of the notebook ran: an environment problem, not the student's "
    "(`manyheads grade --check ASSIGNMENT` says why)"
)
CLUSTER_LOST = "the dask cluster lost it after its retries"
NO_KERNEL = "the kernel did not start"
ENVIRONMENT_REASONS = (STARTUP_DEATH, CLUSTER_LOST, NO_KERNEL)


def of_the_environment(problem: Problem) -> bool:
    """Whether ``problem`` says the grader's environment, not the notebook, kept it from being graded."""
    return problem.kind is ProblemKind.NOT_GRADED and problem.detail.startswith(ENVIRONMENT_REASONS)


def not_graded(why: str = "") -> Problem:
    """nbgrader produced no graded notebook: the problem, with ``why`` (if known) as its detail."""
    return Problem(ProblemKind.NOT_GRADED, "nbgrader could not grade it" + (f": {why}" if why else ""), why)


def texts(problems: list[Problem]) -> list[str]:
    """The problems as people read them."""
    return [str(p) for p in problems]


@dataclass(frozen=True)
class Limits:
    """What one student's kernel may use in the sandbox (sandbox.py applies them)."""

    memory_bytes: int = 4_000_000_000
    cpu_seconds: int = 600
    processes: int = 256
    file_bytes: int = 50_000_000
    open_files: int = 1024
    output_limit: int = 2_000_000


@dataclass(frozen=True)
class CellEvidence:
    """One cell behind an out-of-order flag (review.flags.out_of_order_cells), whole: its label, the execution count
    it was handed in with, its source, and what is compared of its outputs as handed in and in the top-to-bottom
    re-run (stdout, text results, error names; each cut at review.flags.KEEP_CHARS)."""

    label: str
    ran_as: int | None
    source: str
    handed_in: tuple[str, ...]
    rerun: tuple[str, ...]


@dataclass
class Row:
    """The class result for one student (:func:`class_result`): what every output reads (grades.csv, the report,
    the LMS files) and what ``store`` keeps under OUT."""

    student_id: str
    status: str = "failed"
    problems: list[Problem] = field(default_factory=list)
    score: float | None = None
    max_score: float | None = None
    tests: dict[str, float | None] = field(default_factory=dict)
    notebook: nbformat.NotebookNode | None = None
    feedback: Path | None = None
    repaired: bool = False
    zeroed: dict[str, str] = field(default_factory=dict)  # test id -> evidence: no points by the own-work rule
    failures: dict[str, str] = field(default_factory=dict)  # test id -> the message its test raised (report.py)
    flags: list[str] = field(default_factory=list)  # integrity flags for a human (flags.py): no points, no status
    evidence: list[CellEvidence] = field(default_factory=list)  # the cells behind its out-of-order flag, whole
    # The identical-answer flags, found across the whole class (after a re-grade's merge too, term.runs), and the
    # answers they compare: grade id -> the student's code.
    copied: list[str] = field(default_factory=list)
    code: dict[str, str] = field(default_factory=dict)
    submitted: nbformat.NotebookNode | None = None  # the file as handed in, cut to what flags.out_of_order compares
    name: str = ""  # the display name from the LMS's file names, if any (never the id)
    version: str | None = None  # the course release the notebook was written for (versions.py); None: unknown
    # Hand-graded items (written answers): item -> points given (None: not yet), and a digest of each answer as graded
    # (a re-grade keeps the points and flags an answer that changed since, term.merge).
    manual: dict[str, float | None] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    release: str = ""  # the digest of the release it was graded under (RunFacts.release); "": not known
    # Made for the outputs only (term.totals), never stored: the points before the late penalty, and the penalty.
    raw: float | None = None
    penalty: float = 0.0
    pending: list[str] = field(default_factory=list)  # hand-graded items without points yet


# ------------------------------------------------------------------------------------------------------------------
# The stages' records, one per student and stage; each stage is a function from the records before it to its own.


@dataclass(frozen=True, eq=False)  # eq=False: two students with the same notebook are two records
class Checked:
    """The checked stage's record of one student: the notebook to grade (None: nothing readable to grade), the file
    as handed in (for the review), the release it was written for, and what was found and repaired."""

    student_id: str
    name: str = ""  # the display name from the LMS's file names, if any (never the id)
    notebook: nbformat.NotebookNode | None = None
    submitted: nbformat.NotebookNode | None = None  # as handed in, cut to what flags.out_of_order compares
    version: str | None = None  # the course release the notebook was written for; None: unknown
    repaired: bool = False
    problems: tuple[Problem, ...] = ()


class Outcome(enum.Enum):
    """What a cell of a graded notebook ran into (read from its outputs): what the report's run notes say."""

    TIME = "time"  # stopped at its time limit
    MEMORY = "memory"  # MemoryError
    OUTPUT = "output"  # its output cut at the grader's limit


@dataclass(frozen=True)
class CellOutcome:
    """One cell's run, where it hit a limit: which cell (its index in the graded notebook), what, and the evidence
    (the error's name, or the output's cut)."""

    cell: int
    kind: Outcome
    evidence: str


@dataclass(frozen=True, eq=False)
class Executed:
    """The executed stage's record of one student: the notebook nbgrader graded (None: none came out, and
    ``problems`` says why), the cells that hit a limit."""

    student_id: str
    graded: nbformat.NotebookNode | None = None
    cells: tuple[CellOutcome, ...] = ()
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Scored:
    """The scored stage's record of one student: points per test, the own-work rule's zeros with their evidence,
    the failed tests' messages, the feedback page, and the status (graded, repaired or failed)."""

    student_id: str
    status: str = "failed"
    score: float | None = None
    max_score: float | None = None
    tests: dict[str, float | None] = field(default_factory=dict)
    zeroed: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    feedback: Path | None = None
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Reviewed:
    """The reviewed stage's record of one student: the integrity flags a human looks at (no points change)."""

    student_id: str
    flags: tuple[str, ...] = ()  # of the student's own notebook: out of order, tampering
    evidence: tuple[CellEvidence, ...] = ()  # the cells behind the out-of-order flag
    copied: tuple[str, ...] = ()  # identical answers, found across the class


def class_result(
    checked: list[Checked], executed: dict[str, Executed], scored: dict[str, Scored], reviewed: dict[str, Reviewed]
) -> list[Row]:
    """The class result: one Row per checked student, each stage's part joined (problems in the stages' order)."""
    rows = []
    for c in checked:
        ex, sc = executed.get(c.student_id), scored.get(c.student_id, Scored(c.student_id))
        rv = reviewed.get(c.student_id, Reviewed(c.student_id))
        problems = [*c.problems, *(ex.problems if ex else ()), *sc.problems]
        rows.append(
            Row(
                c.student_id,
                status=sc.status,
                problems=problems,
                score=sc.score,
                max_score=sc.max_score,
                tests=dict(sc.tests),
                notebook=c.notebook,
                feedback=sc.feedback,
                repaired=c.repaired,
                zeroed=dict(sc.zeroed),
                failures=dict(sc.failures),
                flags=list(rv.flags),
                evidence=list(rv.evidence),
                copied=list(rv.copied),
                code=answer_code(c.notebook),
                submitted=c.submitted,
                name=c.name,
                version=c.version,
                answers=answer_digests(c.notebook),
            )
        )
    return rows


@dataclass(frozen=True)
class AnswerKey:
    """What the identical-answer flags compare a class's answers against, kept with each run (``store``): the
    release's answer cells as handed out (stubs) and the published reference solution's; {grade id: source}."""

    stubs: dict[str, str]
    reference: dict[str, str]


def answer_code(nb: nbformat.NotebookNode | None) -> dict[str, str]:
    """{grade id: source} of the notebook's code answer cells (those that carry nbgrader ``solution``): what the
    identical-answer flags compare across the class (review.flags.identical_answers)."""
    found = {}
    for cell in nb.cells if nb is not None else []:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and meta.get("grade_id"):
            found[meta["grade_id"]] = cell.source
    return found


def answer_digests(nb: nbformat.NotebookNode | None) -> dict[str, str]:
    """{item: sha256 of the answer's text} for the notebook's hand-graded answers (graded solution cells, tasks)."""
    import hashlib

    found = {}
    for cell in nb.cells if nb is not None else []:
        meta = cell.metadata.get("nbgrader", {})
        if (meta.get("grade") and meta.get("solution")) or meta.get("task"):
            found[meta.get("grade_id", "")] = hashlib.sha256(cell.source.strip().encode()).hexdigest()[:16]
    return found


@dataclass(frozen=True)
class VersionFacts:
    """Which course release the class worked on (versions.py): the one expected, the release notebook's and the
    grader's package's version, a disagreement between those (or None), and the students on another or no version."""

    expected: str
    release: str | None = None
    package: str | None = None
    disagreement: str | None = None
    other: dict[str, str] = field(default_factory=dict)  # student -> the version their notebook was written for
    unknown: list[str] = field(default_factory=list)  # students whose notebook names no version


@dataclass(frozen=True)
class RunFacts:
    """What one run of ``manyheads grade`` observed, beside the students' rows: what the outputs (grades.csv, the
    LMS files, the report) say about the run as a whole."""

    assignment: str
    points: dict[str, float]  # test id -> points, in the notebook's order
    jobs: int = 1
    sandbox: bool = True
    db: str = "sqlite"  # "sqlite" or "postgresql"
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # files of the download that belong to no student
    identical: list[dict] | None = None  # groups of identical answers (review_flags.Group as dicts); None: not known
    versions: VersionFacts | None = None
    forked_kernels: int = 0  # kernels forked from a template process (the rest started Python each)
    not_forked: str = ""  # why not, in one line, when a worker's template failed
    phases: dict[str, float] = field(default_factory=dict)  # where the jobs' time went, summed over the jobs
    preflight: str = ""  # its one-line summary, or why it did not run
    log: str = ""  # nbgrader's output, every job's
    manual: dict[str, float] = field(default_factory=dict)  # hand-graded item -> its points, in the notebook's order
    manifest: list = field(default_factory=list)  # the release's [grade id, points, digest] (notebooks.py)

    @property
    def release(self) -> str:
        """The release's digest: two runs with the same tests and points have the same."""
        import hashlib

        return hashlib.sha256(repr(self.manifest).encode()).hexdigest()[:16] if self.manifest else ""

    @property
    def test_ids(self) -> list[str]:
        return list(self.points)

    @property
    def max_score(self) -> float:
        """The automatic parts' points."""
        return float(sum(self.points.values()))

    @property
    def maximum(self) -> float:
        """The assignment's points: the automatic parts' and the hand-graded ones' (what the LMS's column is worth)."""
        return self.max_score + float(sum(self.manual.values()))


@dataclass(frozen=True)
class Release:
    """The assignment as the course releases it: the student's notebook, the reference solution, the names of the
    functions the hidden tests define, and each test's points (in the notebook's order)."""

    notebook: nbformat.NotebookNode
    solution: nbformat.NotebookNode
    helpers: frozenset[str]
    points: dict[str, float]

    @property
    def test_ids(self) -> list[str]:
        return list(self.points)


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
    lms: str = "auto"  # the download's layout (output.lms): auto, canvas, moodle, blackboard or generic
    sandbox: bool = True
    keep_work: bool = False
    chunk: int | None = None
    feedback: str = "student"  # or "full": the instructor's private view, written to OUT/feedback-full
    limits: Limits = Limits()
    scheduler: str | None = None  # tcp://HOST:PORT of a dask.distributed scheduler: the chunks are graded there
    preflight: bool = True  # grade the reference answers and a blank release first (preflight.py)
    quiet: bool = False  # no progress lines (progress.py)
    check: bool = False  # only the preflight (``manyheads grade --check``): no submissions, nothing written to OUT
    earlier: frozenset = frozenset()  # cells of earlier releases graded into OUT: (grade id, points, digest)


@dataclass(frozen=True)
class Run:
    """Where one run of ``manyheads grade`` works: the assignment, its options, OUT, the course it grades from, the
    master copy of that course under ``OUT/.work`` and the gradebook's address; when it started."""

    assignment: str
    opts: Options
    out: Path
    source: Path
    master: Path
    db: str
    started: float

    @property
    def work(self) -> Path:
        return self.master.parent

    def seconds(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started
