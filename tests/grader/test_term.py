"""A term of grading into one OUT (issue 37), the parts that need no kernel: the merge table's rows, the late
policy's arithmetic, the hand-graded points' two sources, the lock and the generations made current in one step."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from manyheads_grader import store
from manyheads_grader.records import (
    CLUSTER_LOST,
    STARTUP_DEATH,
    GradingError,
    Problem,
    ProblemKind,
    Row,
    RunFacts,
    not_graded,
)
from manyheads_grader.term import generations, late, lock, manual, merge, totals

POINTS = {"test_a": 2.0, "test_b": 3.0}


def _row(sid, score=5.0, status="graded", problems=(), manual_points=None, answers=None):
    tests = {"test_a": 2.0, "test_b": score - 2.0} if score is not None else {}
    row = Row(sid, status=status, score=score, max_score=None if score is None else 5.0, tests=tests)
    row.problems = list(problems)
    row.manual, row.answers = dict(manual_points or {}), dict(answers or {})
    return row


# ------------------------------------------------------------------------------------------------------------------
# the merge table (issue 37, item 1)


def test_a_student_graded_again_is_replaced_and_the_old_result_goes_to_history(tmp_path):
    old = [_row("ann", 5.0), _row("bob", 2.0)]
    merged = merge.merge(old, [_row("bob", 4.0)])
    assert [(r.student_id, r.score) for r in merged.rows] == [("ann", 5.0), ("bob", 4.0)]
    assert merged.replaced == {"bob": old[1]} and merged.carried == ["ann"]
    gen = tmp_path / "gen-1"
    gen.mkdir()
    [path] = merge.record(tmp_path / "history", merged.replaced, gen, "late work", gen)
    entry = json.loads(path.read_text())
    assert entry["student_id"] == "bob" and entry["reason"] == "late work" and entry["generation"] == "gen-1"
    assert entry["row"]["score"] == 2.0 and dt.datetime.strptime(entry["replaced_at"], "%Y-%m-%dT%H:%M:%S%z")
    assert merge.entries(tmp_path / "history", "bob") == [(path, entry)]


@pytest.mark.parametrize("why", [STARTUP_DEATH, f"{CLUSTER_LOST} (KilledWorker: x); grade it again"])
def test_a_re_grade_the_environment_failed_keeps_the_previous_grade_and_says_so(why):
    old = [_row("ann", 5.0)]
    merged = merge.merge(old, [_row("ann", None, "failed", [not_graded(why)])])
    [row] = merged.rows
    assert row.score == 5.0 and row.status == "graded" and not merged.replaced
    assert merged.kept_after_failure == ["ann"] and merged.carried == ["ann"]
    assert [p.text for p in row.problems] == [f"{merge.KEPT_NOTE}: {why}"]
    again = merge.merge(merged.rows, [_row("ann", None, "failed", [not_graded(why)])])  # one note, not two
    assert [p.text for p in again.rows[0].problems] == [f"{merge.KEPT_NOTE}: {why}"]


@pytest.mark.parametrize(
    "problem",
    [
        not_graded("the kernel died (e.g. the code killed it or ran out of memory)"),
        not_graded("a cell ran past the time limit and could not be interrupted"),
        Problem(ProblemKind.UNREADABLE, "not valid JSON"),
    ],
)
def test_a_re_grade_the_notebook_failed_replaces_the_old_result(problem):
    merged = merge.merge([_row("ann", 5.0)], [_row("ann", None, "failed", [problem])])
    assert merged.rows[0].status == "failed" and merged.rows[0].score is None
    assert merged.replaced["ann"].score == 5.0 and not merged.kept_after_failure


def test_students_not_in_the_run_are_untouched():
    ann = _row("ann", 5.0, manual_points={"essay": 3.0})
    merged = merge.merge([ann, _row("cy", 1.0)], [_row("bob", 3.0)])
    assert [r.student_id for r in merged.rows] == ["ann", "bob", "cy"]
    assert merged.rows[0] is ann and ann.manual == {"essay": 3.0} and merged.carried == ["ann", "cy"]


def test_hand_graded_points_stay_and_a_changed_answer_is_flagged():
    old = _row("ann", 5.0, manual_points={"essay": 3.0, "sketch": 1.0}, answers={"essay": "e1", "sketch": "s1"})
    new = _row("ann", 5.0, answers={"essay": "e2", "sketch": "s1"})
    [row] = merge.merge([old], [new]).rows
    assert row.manual == {"essay": 3.0, "sketch": 1.0}
    assert [p.text for p in row.problems] == [
        f"{merge.CHANGED_NOTE}: essay (the 3 points given are kept until you grade it again)"
    ]


# ------------------------------------------------------------------------------------------------------------------
# the late policy (item 5): the worked example of the issue and the docs


MONDAY = "2026-11-30T23:59:00-05:00"


def _final(policy, raw=8.0, maximum=10.0, at="2026-12-02T11:59:00-05:00", student="s"):
    return policy.verdict(student, raw, maximum, late.parse_time(at, "test"))


def test_the_worked_example_two_started_days_take_20_percent():
    penalty, final, why = _final(late.Policy(due=MONDAY, penalty=10))
    assert (penalty, final) == (2.0, 6.0) and why == "1.50 days late (2 started)"


def test_on_time_a_cap_a_cut_off_and_an_extension():
    assert _final(late.Policy(due=MONDAY, penalty=10), at="2026-11-30T23:59:00-05:00")[:2] == (0.0, 8.0)
    assert _final(late.Policy(due=MONDAY, penalty=10), at="2026-12-01T00:00:00-05:00")[:2] == (1.0, 7.0)
    assert _final(late.Policy(due=MONDAY, penalty=30, cap=50), at="2026-12-05T00:00:00-05:00")[:2] == (5.0, 3.0)
    assert _final(late.Policy(due=MONDAY, penalty=50), raw=3.0, at="2026-12-03T00:00:00-05:00")[:2] == (3.0, 0.0)
    cut = _final(late.Policy(due=MONDAY, penalty=10, cutoff=1))
    assert cut[:2] == (8.0, 0.0) and "after the cut-off of 1 days" in cut[2]
    extended = late.Policy(due=MONDAY, penalty=10, extensions={"s": "2026-12-03T23:59:00-05:00"})
    assert _final(extended)[:2] == (0.0, 8.0) and _final(extended, student="t")[:2] == (2.0, 6.0)
    # the same instant written in another zone is the same lateness
    assert _final(late.Policy(due=MONDAY, penalty=10), at="2026-12-02T16:59:00+00:00")[:2] == (2.0, 6.0)


def test_no_time_no_penalty_and_the_report_says_time_unknown():
    policy = late.Policy(due=MONDAY, penalty=10)
    assert policy.verdict("s", 8.0, 10.0, None) == (0.0, 8.0, "time unknown")
    facts = RunFacts("a", dict(POINTS))
    shown, lines = totals.apply([_row("ann", 4.0)], facts, policy, None)
    assert shown[0].score == 4.0 and any("time unknown" in line and "ann" in line for line in lines)


def test_a_due_date_without_an_offset_is_read_in_this_machine_s_zone():
    found = late.parse_time("2026-12-01T23:59:00", "--due")
    assert found.tzinfo is not None and found.utcoffset() == dt.datetime(2026, 12, 1, 23, 59).astimezone().utcoffset()
    with pytest.raises(GradingError, match="not an ISO 8601 time"):
        late.Policy(due="next monday")
    with pytest.raises(GradingError, match="percents"):
        late.Policy(due=MONDAY, penalty=120)


def test_late_policy_options_are_kept_and_overridden(tmp_path):
    class Args:
        due, late_penalty, late_cap, late_cutoff, extensions, times = MONDAY, 10.0, None, None, None, None

    first = late.policy(Args, None)
    Args.due, Args.late_penalty = None, None
    (tmp_path / "t.csv").write_text("student_id,submitted_at\nann,2026-12-02T11:59:00-05:00\n")
    Args.times = tmp_path / "t.csv"
    second = late.policy(Args, first.to_json())
    assert second.due == MONDAY and second.penalty == 10.0 and second.times == {"ann": "2026-12-02T11:59:00-05:00"}
    (tmp_path / "t.csv").write_text("student_id,submitted_at\nann,\n")
    with pytest.raises(GradingError, match="line 2"):
        late.policy(Args, None)


# ------------------------------------------------------------------------------------------------------------------
# hand-graded points (item 4)

ITEMS = {"essay": 4.0, "sketch": 2.0}


@pytest.mark.parametrize(
    "line, message",
    [
        ("ann,essay,5,", r"line 3: 5 points for essay, whose maximum is 4"),
        ("zed,essay,1,", r"line 3: no student 'zed'"),
        ("ann,poem,1,", r"line 3: no item 'poem'"),
        ("ann,essay,lots,", r"line 3: points 'lots' is not a number"),
    ],
)
def test_a_bad_csv_line_is_an_error_naming_it_and_nothing_is_applied(tmp_path, line, message):
    path = tmp_path / manual.CSV_NAME
    path.write_text(f"student_id,item,points,comment\nbob,essay,2,fine\n{line}\n")
    with pytest.raises(GradingError, match=message):
        manual.from_csv(path, [_row("ann"), _row("bob")], ITEMS, POINTS)


def test_the_csv_wins_over_the_formgrader_and_the_conflict_is_listed(tmp_path):
    path = tmp_path / manual.CSV_NAME
    path.write_text("student_id,item,points,comment\nann,essay,3,clear\nbob,essay,,\nbob,test_b,1,appeal\n")
    found = manual.from_csv(path, [_row("ann"), _row("bob")], ITEMS, POINTS)
    assert found == {("ann", "essay"): manual.Given(3.0, "clear"), ("bob", "test_b"): manual.Given(1.0, "appeal")}
    formgrader = {("ann", "essay"): manual.Given(2.0, "", "formgrader"), ("ann", "sketch"): manual.Given(1.0)}
    given, conflicts = manual.combine(formgrader, found)
    assert given[("ann", "essay")].points == 3.0 and given[("ann", "sketch")].points == 1.0
    assert conflicts == ["ann essay: 3 in manual-grades.csv, 2 in the formgrader: the CSV's value is used"]


def test_totals_count_the_hand_graded_points_given_and_say_what_is_left():
    facts = RunFacts("a", dict(POINTS), manual=dict(ITEMS))
    ann = _row("ann", 5.0, manual_points={"essay": 3.0, "sketch": None})
    bob = _row("bob", 2.0, manual_points={"essay": 4.0, "sketch": 2.0, "test_b": 3.0})  # test_b: a person's score
    shown, lines = totals.apply([ann, bob], facts, late.Policy(), None)
    assert [(r.score, r.max_score) for r in shown] == [(8.0, 11.0), (11.0, 11.0)]
    assert shown[0].tests["sketch"] is None and shown[1].tests["test_b"] == 3.0
    assert shown[0].pending == ["sketch"] and shown[0].problems == []
    assert lines == [
        "1 student(s) still have hand-graded answers to grade, leaving out 2 points in all; their "
        "totals so far count only what is graded"
    ]
    assert ann.score == 5.0 and ann.tests == {"test_a": 2.0, "test_b": 3.0}  # the kept record is not changed


def test_the_template_lists_every_student_s_items_and_never_the_instructor_s_file(tmp_path):
    manual.write_template(tmp_path / manual.TEMPLATE_NAME, [_row("ann", manual_points={"essay": 3.0})], ITEMS)
    assert (tmp_path / manual.TEMPLATE_NAME).read_text().splitlines() == [
        "student_id,item,points,comment,max_points",
        "ann,essay,3,,4",
        "ann,sketch,,,2",
    ]
    assert manual.TEMPLATE_NAME != manual.CSV_NAME


# ------------------------------------------------------------------------------------------------------------------
# one run at a time; outputs made current in one step (item 2)


def test_a_second_run_into_the_same_out_is_refused_naming_the_running_one(tmp_path):
    with lock.held(tmp_path, "manyheads grade a"):
        with pytest.raises(GradingError, match=rf"`manyheads grade a`, process {os.getpid()} on .* started 20"):
            with lock.held(tmp_path, "manyheads rescore a"):
                pass
    assert not (tmp_path / lock.LOCK).exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_note(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    holder = {"pid": int(dead.stdout), "host": socket.gethostname(), "command": "x", "started": "2026-11-29T10:00"}
    (tmp_path / lock.LOCK).write_text(json.dumps(holder))
    notes = []
    with lock.held(tmp_path, "manyheads grade a", notes):
        assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and f"process {holder['pid']}" in notes[0] and "no longer exists" in notes[0]


def test_outputs_switch_generation_in_one_rename_and_a_dead_run_s_folder_is_removed(tmp_path):
    first = generations.start(tmp_path)
    (first / "grades.csv").write_text("one\n")
    generations.make_current(tmp_path, first.with_name(first.name))
    assert (tmp_path / "grades.csv").read_text() == "one\n" and (tmp_path / "grades.csv").is_symlink()
    dead = generations.start(tmp_path)  # a run that dies: its folder is never made current
    (dead / "grades.csv").write_text("half\n")
    assert (tmp_path / "grades.csv").read_text() == "one\n"
    second = generations.start(tmp_path)
    assert not dead.exists(), "the dead run's generation is removed by the next run"
    (second / "grades.csv").write_text("two\n")
    done = generations.make_current(tmp_path, second)
    assert (tmp_path / "grades.csv").read_text() == "two\n" and generations.current(tmp_path) == done
    assert sorted(p.name for p in (tmp_path / generations.GENERATIONS).iterdir()) == [done.name]


def test_an_out_of_the_old_layout_becomes_the_first_generation(tmp_path):
    rows, facts = [_row("ann")], RunFacts("a", dict(POINTS))
    store.write_class(tmp_path, rows, facts)  # as 0.8.0 wrote it: plain files
    (tmp_path / "grades.csv").write_text("old\n")
    (tmp_path / manual.CSV_NAME).write_text("student_id,item,points,comment\n")  # the instructor's own file
    generations.adopt_old_layout(tmp_path)
    assert (tmp_path / "grades.csv").is_symlink() and (tmp_path / "grades.csv").read_text() == "old\n"
    assert store.read_class(tmp_path)[0][0].student_id == "ann"
    assert not (tmp_path / manual.CSV_NAME).is_symlink(), "the instructor's file stays where it is"


# ------------------------------------------------------------------------------------------------------------------
# a truthful report (item 6)


def test_a_syntax_error_is_reported_once_as_itself_not_as_the_name_errors_after_it():
    import nbformat

    from manyheads_grader.output import feedback

    def cell(source, meta, error=None):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["nbgrader"] = meta
        if error:
            c.outputs = [nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[error[2]])]
        return c

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        cell(
            "def softmax(x)\n    return x",
            {"solution": True, "grade_id": "answer"},
            ("SyntaxError", "expected ':' (2209.py, line 1)", "Cell In[3], line 1\n    def softmax(x)\n"),
        ),
        cell(
            "assert softmax(1) == 1",
            {"grade": True, "grade_id": "test_a", "points": 2, "score": 0},
            ("NameError", "name 'softmax' is not defined", ""),
        ),
        cell(
            "assert softmax(2) == 2",
            {"grade": True, "grade_id": "test_b", "points": 2, "score": 0},
            ("NameError", "name 'softmax' is not defined", ""),
        ),
    ]
    parts = {p.grade_id: p.message for p in feedback.parts_of(nb)}
    assert parts == {
        "test_a": "SyntaxError: expected ':' (line 1 of your answer: `def softmax(x)`)",
        "test_b": feedback.NOT_RUN,
    }
    nb.cells[0].outputs = []  # no syntax error: the tests' own messages
    assert {p.message for p in feedback.parts_of(nb)} == {"NameError: name 'softmax' is not defined"}


def test_the_feedback_page_shows_the_points_the_penalty_and_the_written_parts_graded_since(tmp_path):
    page = tmp_path / "feedback.html"
    page.write_text(
        "<html><body>\n<h4>a (Score: 5.0 / 5.0; 2 written part(s) not graded yet)</h4><ul>"
        '<li><a href="#essay">Written response</a> (not graded yet)</li>'
        '<li class="mh-waiting"><code>essay</code>: <b>– / 4</b>, waiting for a grader</li>'
        '<li class="mh-waiting"><code>sketch</code>: <b>– / 2</b>, waiting for a grader</li></ul></body></html>'
    )
    facts = RunFacts("a", dict(POINTS), manual=dict(ITEMS))
    row = _row("ann", 5.0, manual_points={"essay": 3.0, "sketch": None})
    row.feedback = page
    policy = late.Policy(due=MONDAY, penalty=10, times={"ann": "2026-12-02T11:59:00-05:00"})
    [shown], _ = totals.apply([row], facts, policy, None)
    for _ in range(2):  # a rescore marks it again: one block, not two
        totals.mark_feedback(shown, ITEMS)
    text = page.read_text()
    assert text.count("mh-totals") == 1 and "Points: 8 of 11; late penalty: -2.2; final: 5.8 of 11" in text
    assert '<li class="mh-graded"><code>essay</code>: <b>3 / 4</b>, graded' in text
    assert "<code>sketch</code>: <b>– / 2</b>, waiting for a grader" in text
    assert "written answers not hand-graded yet: sketch" in text
    assert "<h4>a (Score: 5.8 / 11; 1 written part(s) not graded yet)</h4>" in text
    assert '<a href="#essay">Written response</a> (Score: 3 / 4)' in text
