"""The late policy: a due date, extensions, a penalty per started day late, a cap and a cut-off.

    final = max(0, raw - min(cap, penalty x days started late) / 100 x maximum), or 0 after the cut-off

Worked example (the tests and the docs use it): maximum 10, raw 8, penalty 10 %, due Monday 23:59, handed in Wednesday
11:59: 1.5 days late, 2 days started, 20 % of 10 = 2 points off, final 6.

The policy is given to ``grade`` or ``rescore`` and kept in OUT (``records/policy.json``) for the runs after it.
Submission times come from the LMS download where its names carry them (Blackboard's attempt stamps) or from a
``--times`` CSV exported from the LMS (Canvas and Moodle names carry none); a student with no known time gets no
penalty and is listed as "time unknown".
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path

from manyheads_grader.records import GradingError

DAY = dt.timedelta(days=1)


def parse_time(text: str, where: str) -> dt.datetime:
    """An ISO 8601 time; without an offset, the machine's time zone. :class:`GradingError` names ``where``."""
    try:
        found = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise GradingError(f"{where}: {text!r} is not an ISO 8601 time (e.g. 2026-12-01T23:59:00-05:00)") from None
    return found if found.tzinfo is not None else found.astimezone()  # the machine's zone


def _read_csv(path: Path, column: str, what: str) -> dict[str, str]:
    """{student_id: value} from a CSV with the columns student_id and ``column``; errors name the line."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            if not reader.fieldnames or not {"student_id", column} <= set(reader.fieldnames):
                raise GradingError(f"{path}: {what} needs the columns student_id,{column}")
            found = {}
            for line, row in enumerate(reader, start=2):
                sid, value = (row.get("student_id") or "").strip(), (row.get(column) or "").strip()
                if not sid or not value:
                    raise GradingError(f"{path}, line {line}: a student_id and a {column} are needed")
                found[sid] = value
            return found
    except OSError as exc:
        raise GradingError(f"{path}: cannot read it ({exc.strerror})") from exc


@dataclass(frozen=True)
class Policy:
    due: str | None = None  # ISO 8601, as given
    penalty: float = 0.0  # percent of the maximum per started 24 hours late
    cap: float = 100.0  # the most the penalty takes, in percent
    cutoff: float | None = None  # days late after which the score is 0
    extensions: dict[str, str] = field(default_factory=dict)  # student -> their own due (ISO 8601)
    times: dict[str, str] = field(default_factory=dict)  # student -> submitted at (ISO 8601), from --times

    def __post_init__(self):
        if not 0 <= self.penalty <= 100 or not 0 <= self.cap <= 100:
            raise GradingError("--late-penalty and --late-cap are percents between 0 and 100")
        if self.cutoff is not None and self.cutoff < 0:
            raise GradingError("--late-cutoff is a number of days, at least 0")
        if self.due is not None:
            parse_time(self.due, "--due")
        for sid, due in self.extensions.items():
            parse_time(due, f"the extension of {sid}")
        for sid, when in self.times.items():
            parse_time(when, f"the submission time of {sid}")

    @property
    def zone(self) -> str:
        """The due date's time zone, as the report prints it."""
        return parse_time(self.due, "--due").strftime("UTC%z") if self.due else ""

    def due_for(self, student: str) -> dt.datetime | None:
        due = self.extensions.get(student, self.due)
        return None if due is None else parse_time(due, f"the due date of {student}")

    def verdict(self, student: str, raw: float | None, maximum: float | None, submitted: dt.datetime | None):
        """(penalty in points, final, why) for one student."""
        due = self.due_for(student)
        if raw is None or due is None or maximum is None:
            return 0.0, raw, ""
        if submitted is None:
            return 0.0, raw, "time unknown"
        late = submitted - due
        if late <= dt.timedelta(0):
            return 0.0, raw, ""
        days = late / DAY
        if self.cutoff is not None and days > self.cutoff:
            return raw, 0.0, f"{days:.2f} days late: after the cut-off of {self.cutoff:g} days"
        started = math.ceil(days)
        points = min(self.cap, self.penalty * started) / 100 * maximum
        final = max(0.0, raw - points)
        return raw - final, final, f"{days:.2f} days late ({started} started)"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def policy(args, kept: dict | None) -> Policy:
    """The policy of this run: the options given, over the one kept in OUT."""
    base = dict(kept or {})
    if args.due is not None:
        base["due"] = args.due
    if args.late_penalty is not None:
        base["penalty"] = args.late_penalty
    if args.late_cap is not None:
        base["cap"] = args.late_cap
    if args.late_cutoff is not None:
        base["cutoff"] = args.late_cutoff
    if args.extensions is not None:
        base["extensions"] = _read_csv(args.extensions, "due", "--extensions")
    if args.times is not None:
        base["times"] = _read_csv(args.times, "submitted_at", "--times")
    return Policy(**base)


def add_options(parser) -> None:
    """The late policy's options, for ``grade`` and ``rescore``."""
    parser.add_argument(
        "--due",
        help="due date, ISO 8601, e.g. 2026-12-01T23:59:00-05:00 (no offset: this machine's zone); every late "
        "option is kept in OUT for the runs after, until given again",
    )
    parser.add_argument(
        "--late-penalty",
        type=float,
        metavar="P",
        help="percent of the maximum off per started 24 hours late (default 0)",
    )
    parser.add_argument(
        "--late-cap", type=float, metavar="C", help="the most a late penalty takes, in percent (default 100)"
    )
    parser.add_argument(
        "--late-cutoff", type=float, metavar="D", help="days late after which the score is 0 (default none)"
    )
    parser.add_argument(
        "--extensions", type=Path, metavar="CSV", help="CSV student_id,due: each student's own due date"
    )
    parser.add_argument(
        "--times",
        type=Path,
        metavar="CSV",
        help="CSV student_id,submitted_at exported from the LMS (Canvas and Moodle download names carry no times)",
    )


def submitted_at(policy: Policy, plan, student: str) -> dt.datetime | None:
    """When the student handed in: the --times CSV, else the LMS download's name (Blackboard's attempt stamp, read
    in the due date's zone)."""
    if student in policy.times:
        return parse_time(policy.times[student], f"the submission time of {student}")
    ident = plan.identity(student) if plan is not None else None
    if ident is not None and ident.attempt:
        try:
            found = dt.datetime.strptime(ident.attempt, "%Y-%m-%d-%H-%M-%S")
        except ValueError:
            return None
        due = policy.due_for(student)
        return found.replace(tzinfo=due.tzinfo) if due is not None else found.astimezone()
    return None
