"""``manyheads grade ASSIGNMENT SUBMISSIONS --out OUT``: autograde a class with nbgrader, safely.

Exit status 0 when the batch ran to the end, whatever single submissions did; 2 for misuse (unknown assignment,
unreadable submissions, an LMS layout or gradebook that cannot be used, no sandbox without --no-sandbox), with a
message on stderr; 3 when the preflight fails (the release's reference answers or its blank release do not score as
they should in the grader's sandbox: an environment problem, nobody is graded); ``--check`` runs only the
preflight. After grading, the LMS export (``output.lms``) writes the gradebook CSV and the feedback to upload.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from manyheads_grader.nbgrader.command import skip_iri_parsers

skip_iri_parsers()  # before nbformat is imported below: seconds of CPU for a string format no notebook uses

from manyheads_grader import store  # noqa: E402
from manyheads_grader import submissions as collect  # noqa: E402
from manyheads_grader.execution.preflight import PreflightError  # noqa: E402
from manyheads_grader.output import lms, report  # noqa: E402
from manyheads_grader.records import FEEDBACK_DIR, GradingError, Options, RunFacts, default_jobs  # noqa: E402
from manyheads_grader.review import versions  # noqa: E402
from manyheads_grader.runner import grade  # noqa: E402
from manyheads_grader.submissions import CollectError  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="manyheads", description="Many Heads course tools")
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser(
        "grade",
        help="autograde a class's submissions with nbgrader (sandboxed, parallel)",
        description=__doc__.split("\n\n")[0],
    )
    _what_to_grade(g)
    _how_to_grade(g)
    _what_to_write(g)
    return parser


def _what_to_grade(g: argparse.ArgumentParser) -> None:
    g.add_argument("assignment", metavar="ASSIGNMENT", help="assignment stem, e.g. 01_single_head_bottleneck")
    g.add_argument(
        "submissions",
        metavar="SUBMISSIONS",
        type=Path,
        nargs="?",
        help="folder or .zip: an LMS download (Canvas, Moodle, Blackboard), <student_id>/<any>.ipynb or "
        "<student_id>__<any>.ipynb",
    )
    g.add_argument(
        "--out", type=Path, help="output folder (grades.csv, feedback/, report.md/.html); required but with --check"
    )
    g.add_argument(
        "--check",
        action="store_true",
        help="only the preflight: grade the release's reference answers and a blank release in the sandbox the class "
        "would use, and say whether grading works here (and if not, why)",
    )


def _how_to_grade(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--jobs", type=int, default=default_jobs(), help="submissions graded at once (default: the cores + 1)"
    )
    g.add_argument("--timeout", type=int, default=60, help="seconds per cell before it is interrupted (default 60)")
    g.add_argument("--db", help="gradebook URL, e.g. postgresql://user:pw@host/course (default: sqlite in OUT/course)")
    g.add_argument("--pattern", help="regex with a (?P<student_id>...) group, searched in each file's relative path")
    g.add_argument(
        "--lms",
        choices=lms.CHOICES,
        default="auto",
        help="the download's layout and the gradebook CSV's format (default auto: detected from the file names)",
    )
    g.add_argument(
        "--gradebook",
        type=Path,
        help="a gradebook CSV exported from the LMS, filled in with the scores as OUT/<lms>-grades.csv",
    )
    g.add_argument("--column", help="the gradebook column to fill, e.g. 'Exercise 1 (123456)' (default: found by name)")
    g.add_argument("--no-sandbox", action="store_true", help="run student code without bubblewrap (trusted code only)")
    g.add_argument("--course", type=Path, help="course folder (default: the current folder, else this checkout)")


def _what_to_write(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--feedback",
        choices=["student", "full"],
        default="student",
        help="student (default): points, pass/fail and messages, never hidden tests or reference code, in "
        "OUT/feedback; full: everything, for the instructor's private review, in OUT/feedback-full",
    )
    g.add_argument(
        "--quiet", action="store_true", help="no progress lines (one per student as it is graded, on stderr)"
    )
    g.add_argument("--keep-work", action="store_true", help="keep OUT/.work (worker courses and nbgrader logs)")
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on a dask.distributed cluster, e.g. tcp://host:8786 (needs manyheads[cluster]; with --jobs N "
        "the class is cut into at least N tasks of at most 10 students)",
    )


def _invalid(args) -> str | None:
    """What is wrong with the command line's values, in one line, or None."""
    if args.jobs < 1 or args.timeout < 1:
        return "--jobs and --timeout must be at least 1"
    if args.db and not args.db.startswith(("postgresql", "sqlite")):
        return "--db must be a postgresql:// or sqlite:/// URL"
    if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://")):
        return "--scheduler must be a tcp://HOST:PORT (or tls://) address"
    if args.gradebook is not None and not args.gradebook.is_file():
        return f"--gradebook {args.gradebook}: no such file"
    if not args.check and (args.submissions is None or args.out is None):
        return "SUBMISSIONS and --out are required (but with --check)"
    return None


def _plan(args) -> lms.Plan:
    """Whose file is whose, from the names only, so that a layout or gradebook problem stops the command before
    grading starts (CollectError, LmsError); the files that belong to no student are listed on stderr."""
    layout = collect.plan(args.submissions, args.pattern, args.lms)
    if args.gradebook is not None:
        header = lms.Table.read(args.gradebook).rows[0]
        lms.template(header, layout.lms, args.assignment, args.column, args.gradebook)
    if layout.unmatched:
        print(
            f"manyheads grade: not graded, these notebooks belong to no student ({len(layout.unmatched)}):",
            file=sys.stderr,
        )
        for name, why in sorted(layout.unmatched.items()):
            print(f"  {name}: {why}", file=sys.stderr)
    return layout


def _options(args) -> Options:
    return Options(
        jobs=args.jobs,
        timeout=args.timeout,
        db=args.db,
        pattern=args.pattern,
        lms=args.lms,
        sandbox=not args.no_sandbox,
        keep_work=args.keep_work,
        feedback=args.feedback,
        scheduler=args.scheduler,
        quiet=args.quiet,
    )


def _write_outputs(args, layout: lms.Plan) -> tuple[list, RunFacts, lms.Result | None]:
    """Every output, made from the class result as kept under OUT (a re-grade or a rescore can make them again
    without executing anything): grades.csv, report.md, the LMS files, report.html."""
    out = args.out
    rows, facts = store.read_class(out)
    report.write_csv(out / "grades.csv", rows, facts.test_ids)
    report.write_report(out / "report.md", rows, facts)
    lms_lines: list[str] = []
    try:
        exported = lms.export(
            rows, facts, layout, out, lms.Into(args.gradebook, args.column), args.feedback == "student"
        )
    except lms.LmsError as exc:  # grades.csv and the feedback are written: only the LMS files are missing
        print(f"manyheads grade: no LMS export: {exc}", file=sys.stderr)
        exported = None
    else:
        lms_lines = lms.report_section(layout, exported, out)
        with open(out / "report.md", "a", encoding="utf-8") as f:
            f.write("\n".join(lms_lines) + "\n")
    report.write_html(out / "report.html", rows, facts, lms_lines)  # the same report, with figures
    return rows, facts, exported


def _say_done(args, layout: lms.Plan, rows: list, facts: RunFacts, exported: lms.Result | None) -> None:
    out = args.out
    counts = {s: sum(r.status == s for r in rows) for s in ("graded", "repaired", "failed")}
    on_other = f" ({versions.version_summary(facts)}: see the report)" if versions.version_summary(facts) else ""
    print(
        f"{len(rows)} students: {counts['graded']} graded, {counts['repaired']} repaired, {counts['failed']} failed "
        f"in {facts.seconds:.1f} s{on_other}; wrote {out / 'grades.csv'}, {out / 'report.md'}, "
        f"{out / 'report.html'}, {out / FEEDBACK_DIR[args.feedback]}/"
    )
    if exported is not None:
        print(
            f"{lms.LABEL[layout.lms]} ({layout.how}): wrote {exported.grades}"
            + (f", {exported.feedback_zip}" if exported.feedback_zip else "")
            + (f", {exported.by_hand}/" if exported.by_hand else "")
        )
        for note in exported.notes:
            print(f"  check: {note}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if problem := _invalid(args):
        print(f"manyheads grade: {problem}", file=sys.stderr)
        return 2
    if args.check:
        return _check(args)
    try:
        layout = _plan(args)
    except (CollectError, lms.LmsError) as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 2
    try:
        rows, facts = grade(args.assignment, args.submissions, args.out, _options(args), course=args.course)
    except PreflightError as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 3
    except (GradingError, CollectError) as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 2
    store.write_class(args.out, rows, facts)  # the class result is kept; the outputs are made from what was kept
    rows, facts, exported = _write_outputs(args, layout)
    _say_done(args, layout, rows, facts, exported)
    return 0 if exported is not None else 2


def _check(args) -> int:
    """``--check``: the preflight alone, in a scratch OUT unless --out is given; 0 when grading works here."""
    import tempfile

    opts = Options(jobs=1, timeout=args.timeout, sandbox=not args.no_sandbox, keep_work=args.keep_work, check=True)
    with tempfile.TemporaryDirectory(prefix="mh-check-") as scratch:
        try:
            _, facts = grade(args.assignment, None, args.out or Path(scratch), opts, course=args.course)
        except PreflightError as exc:
            print(f"manyheads grade: {exc}", file=sys.stderr)
            return 3
        except GradingError as exc:
            print(f"manyheads grade: {exc}", file=sys.stderr)
            return 2
    print(f"{args.assignment}: {facts.preflight}; grading works here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
