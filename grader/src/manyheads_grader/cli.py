"""``manyheads grade ASSIGNMENT SUBMISSIONS --out OUT``: autograde a class with nbgrader, safely.

Exit status 0 when the batch ran to the end, whatever single submissions did; 2 for misuse (unknown assignment,
unreadable submissions, an LMS layout or gradebook that cannot be used, no sandbox without --no-sandbox), with a
message on stderr; 3 when the preflight fails (the release's reference answers or its blank release do not score as
they should in the grader's sandbox: an environment problem, nobody is graded); ``--check`` runs only the
preflight. After grading, the LMS export (``output.lms``) writes the gradebook CSV and the feedback to upload.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from manyheads_grader.nbgrader.command import skip_iri_parsers

skip_iri_parsers()  # before nbformat is imported below: seconds of CPU for a string format no notebook uses

from manyheads_grader import store  # noqa: E402
from manyheads_grader import submissions as collect  # noqa: E402
from manyheads_grader.execution import sandbox  # noqa: E402
from manyheads_grader.execution.preflight import PreflightError  # noqa: E402
from manyheads_grader.output import lms, report  # noqa: E402
from manyheads_grader.records import FEEDBACK_DIR, GradingError, Options, RunFacts, default_jobs  # noqa: E402
from manyheads_grader.review import versions  # noqa: E402
from manyheads_grader.runner import grade  # noqa: E402
from manyheads_grader.submissions import CollectError  # noqa: E402
from manyheads_grader.term import generations, late, lock, manual, runs, totals  # noqa: E402


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
    _over_the_term(g)
    late.add_options(g)
    r = sub.add_parser(
        "rescore",
        help="make every output again from the grades kept in OUT, running nothing (after hand-grading, a changed "
        "late policy)",
        description="Make grades.csv, the LMS files, the feedback pages and the report again from the class kept in "
        "OUT, starting no kernel.",
    )
    r.add_argument("assignment", metavar="ASSIGNMENT", help="assignment stem, e.g. 01_single_head_bottleneck")
    r.add_argument("--out", type=Path, required=True, help="the folder `manyheads grade` wrote")
    r.add_argument("--gradebook", type=Path, help="as for grade: a gradebook CSV exported from the LMS, to fill in")
    r.add_argument("--column", help="as for grade: the gradebook column to fill")
    r.add_argument("--feedback", choices=["student", "full"], default="student", help="as for grade")
    late.add_options(r)
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


def _over_the_term(g: argparse.ArgumentParser) -> None:
    g.add_argument(
        "--reason",
        default="re-graded",
        help="why these students are graded again (kept with their earlier results in OUT/history), e.g. 'appeal'",
    )
    g.add_argument(
        "--undo",
        metavar="STUDENT",
        help="restore STUDENT's previous result from OUT/history (no SUBMISSIONS; nothing is run)",
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
    if args.undo and (args.out is None or args.submissions is not None):
        return "--undo STUDENT takes --out and no SUBMISSIONS"
    if not args.check and not args.undo and (args.submissions is None or args.out is None):
        return "SUBMISSIONS and --out are required (but with --check or --undo)"
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


def _hand_graded(args, gen: Path, rows: list, facts: RunFacts) -> list[str]:
    """The hand-graded points in force, put into the rows' records (kept in OUT with the class): the formgrader's
    (gradebook in OUT/course) and the instructor's OUT/manual-grades.csv, whose values win. A bad CSV line is an
    error naming it (:class:`GradingError`), and nothing of the file is applied. Returns the report's lines."""
    items = {**facts.manual}
    gradebook_given = manual.from_gradebook(gen / "course", facts.assignment) if facts.db == "sqlite" else {}
    csv_given = manual.from_csv(args.out / manual.CSV_NAME, rows, items, facts.points)
    given, conflicts = manual.combine(gradebook_given, csv_given)
    for row in rows:
        for (student, item), value in given.items():
            if student == row.student_id:
                row.manual[item] = value.points
        for item in items:
            row.manual.setdefault(item, None)
    lines = [f"hand-graded points: the CSV and the formgrader differ: {c}" for c in conflicts]
    if csv_given is not None:
        lines.insert(0, f"hand-graded points read from {args.out / manual.CSV_NAME}: {len(csv_given)}")
    return lines


def _write_outputs(
    args, gen: Path, plan: lms.Plan | None, term: list[str], kept_policy: dict | None
) -> tuple[list, RunFacts, lms.Result | None, list[str]]:
    """Every output, made from the class result as kept in the generation ``gen`` (a re-grade or a rescore makes
    them again without executing anything): grades.csv, report.md, the LMS files, report.html; the totals count
    the hand-graded points and the late policy (term.totals). Returns the rows shown and the summary lines."""
    rows, facts = store.read_class(gen)
    term = [*term, *_hand_graded(args, gen, rows, facts)]
    store.write_class(gen, rows, facts)  # with the hand-graded points in force: a re-grade keeps them
    policy = late.policy(args, kept_policy)
    store.write_policy(gen, policy.to_json())
    shown, total_lines = totals.apply(rows, facts, policy, plan)
    term += total_lines
    for row in shown:
        totals.mark_feedback(row, facts.manual)
    if facts.manual:
        manual.write_template(gen / manual.TEMPLATE_NAME, rows, facts.manual)
    report.write_csv(gen / "grades.csv", shown, totals.columns(facts, policy))
    generations.crash_point("grades.csv")
    term_lines = ["", "## This run in the term", "", *(f"- {line}" for line in term)] if term else []
    report.write_report(gen / "report.md", shown, facts)
    lms_lines: list[str] = []
    exported = None
    if plan is None:
        print("manyheads: no LMS export: this OUT keeps no record of whose file was whose", file=sys.stderr)
    else:
        try:
            exported = lms.export(
                shown, facts, plan, gen, lms.Into(args.gradebook, args.column), args.feedback == "student"
            )
        except lms.LmsError as exc:  # grades.csv and the feedback are written: only the LMS files are missing
            print(f"manyheads: no LMS export: {exc}", file=sys.stderr)
        else:
            lms_lines = lms.report_section(plan, exported, args.out)
    generations.crash_point("lms")
    with open(gen / "report.md", "a", encoding="utf-8") as f:
        f.write("\n".join([*lms_lines, *term_lines]) + "\n")
    report.write_html(gen / "report.html", shown, facts, [*lms_lines, *term_lines])  # the same report, with figures
    generations.crash_point("report.html")
    return shown, facts, exported, total_lines


def _say_done(args, plan: lms.Plan | None, rows: list, facts: RunFacts, exported: lms.Result | None) -> None:
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
            f"{lms.LABEL[plan.lms]} ({plan.how}): wrote {_at_top(args.out, exported.grades)}"
            + (f", {_at_top(args.out, exported.feedback_zip)}" if exported.feedback_zip else "")
            + (f", {_at_top(args.out, exported.by_hand)}/" if exported.by_hand else "")
        )
        for note in exported.notes:
            print(f"  check: {note}")


def _at_top(out: Path, path: Path) -> Path:
    """An output's name as the instructor opens it: OUT/<name>, a link into the current generation."""
    return out / Path(path).name


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "rescore":
        return _rescore(args)
    if problem := _invalid(args):
        print(f"manyheads grade: {problem}", file=sys.stderr)
        return 2
    if args.check:
        return _check(args)
    args.out = args.out.resolve()
    if args.undo:
        return _undo(args)
    try:
        layout = _plan(args)
    except (CollectError, lms.LmsError) as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 2
    if not args.no_sandbox and (why := sandbox.available()):  # before OUT is made: nothing written
        print(f"manyheads grade: {why}", file=sys.stderr)
        return 2
    notes: list[str] = []
    try:
        with lock.held(args.out, "manyheads grade " + " ".join(argv or sys.argv[1:]), notes):
            before = runs.Before.read(args.out, args.assignment)
            gen = generations.start(args.out)
            try:
                return _grade_into(args, layout, before, gen, notes)
            finally:
                shutil.rmtree(gen, ignore_errors=True)  # unless made current (then renamed): a failed run's half
    except PreflightError as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 3
    except (GradingError, CollectError) as exc:
        print(f"manyheads grade: {exc}", file=sys.stderr)
        return 2


def _grade_into(args, layout: lms.Plan, before: runs.Before | None, gen: Path, notes: list[str]) -> int:
    earlier = store.read_releases(before.generation) if before else []
    opts = _options(args)
    opts.earlier = frozenset(tuple(cell) for manifest in earlier for cell in manifest)
    rows, facts = grade(args.assignment, args.submissions, gen, opts, course=args.course)
    for row in rows:
        row.release = facts.release
    store.write_releases(gen, earlier + ([facts.manifest] if facts.manifest not in earlier else []))
    rows, plan, merged_notes = runs.after_grading(before, gen, rows, facts, layout, args.reason)
    facts = runs.compare_again(gen, rows, facts)
    store.write_class(gen, rows, facts)  # the class result is kept; the outputs are made from what was kept
    store.write_plan(gen, plan)
    generations.crash_point("records")
    kept_policy = store.read_policy(before.generation) if before else None
    rows, facts, exported, summary = _write_outputs(args, gen, plan, notes + merged_notes, kept_policy)
    generations.make_current(args.out, gen)
    _say_done(args, plan, rows, facts, exported)
    for line in summary:
        print(line)
    return 0 if exported is not None else 2


def _again(args, command: str, redo) -> int:
    """A rescore or an undo: a new generation made from the last finished run by ``redo(before, gen)`` (rows and
    notes), its outputs made again, made current."""
    args.out = Path(args.out).resolve()
    notes: list[str] = []
    try:
        with lock.held(args.out, command, notes):
            before = runs.Before.read(args.out, args.assignment)
            if before is None:
                raise GradingError(f"{args.out} holds no graded class: grade it first (manyheads grade ... --out)")
            gen = generations.start(args.out)
            try:
                rows, note = redo(before, gen)
                store.write_class(gen, rows, runs.compare_again(gen, rows, before.facts))
                kept_policy = store.read_policy(before.generation)
                _, _, exported, summary = _write_outputs(args, gen, before.plan, [*notes, note], kept_policy)
                generations.make_current(args.out, gen)
            finally:
                shutil.rmtree(gen, ignore_errors=True)
    except GradingError as exc:
        print(f"manyheads {args.command}: {exc}", file=sys.stderr)
        return 2
    print(
        f"{len(rows)} students: {note}; wrote {args.out / 'grades.csv'}, {args.out / 'report.md'}, "
        f"{args.out / 'report.html'}"
    )
    for line in summary:  # the last: how many students still have written answers to grade
        print(line)
    return 0 if exported is not None or before.plan is None else 2


def _rescore(args) -> int:
    if args.gradebook is not None and not args.gradebook.is_file():
        print(f"manyheads rescore: --gradebook {args.gradebook}: no such file", file=sys.stderr)
        return 2

    def redo(before, gen):
        rows = runs.carry_all(before, gen)
        return rows, f"rescored from the grades kept in {args.out} (nothing was run)"

    return _again(args, f"manyheads rescore {args.assignment} --out {args.out}", redo)


def _undo(args) -> int:
    return _again(
        args,
        f"manyheads grade {args.assignment} --out {args.out} --undo {args.undo}",
        lambda before, gen: runs.undo(before, gen, args.undo, args.out),
    )


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


def options_table(command: str) -> str:
    """The Markdown table of a command's options, made from its parser (instructors/grading.md shows it; a test
    fails when the page's differs, and tools/grading_options.py writes it)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for action in sub._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flag = max(action.option_strings, key=len)
        shown = f"{flag} {action.metavar or action.dest.upper()}" if action.nargs != 0 else flag
        default = "off" if action.nargs == 0 else ("" if action.default in (None, "==SUPPRESS==") else action.default)
        if action.dest == "jobs":
            default = "the cores + 1"
        # Markdown: a "|" would end the cell; "<name>" would be taken for an HTML tag and vanish
        text = (action.help or "").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        lines.append(f"| `{shown}` | {default} | {text} |")
    return "\n".join(lines)
