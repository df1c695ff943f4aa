"""The LMS round trip of ``manyheads grade`` (``lms.py``): download names in, gradebook CSV and feedback names out.

The sample downloads are built here by the naming rules each LMS's source applies (tooling-notes.md §6.2: Canvas's
``content_zipper.rb``, Moodle's ``mod/assign``, Blackboard's third-party parsers), and the feedback names are read
back by the rules of Canvas's and Moodle's bulk upload, re-implemented from their source. Fast, names only; then
one real ``manyheads grade`` run on a small Canvas zip (slow).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import pytest
from helpers import grading_corpus as corpus
from helpers.grading_corpus import run_grade

from manyheads_grader import submissions as collect
from manyheads_grader.output import lms
from manyheads_grader.records import RunFacts

EX1 = corpus.EX1

# ------------------------------------------------------------------------------------------------------------------
# the LMSs' naming rules, as their source writes and reads names


ATTACHMENT_UNSAFE = r'[\x00/\\:*?"<>|]+'


def canvas_name(sortable: str, user_id: int, attachment_id: int, display: str, late=False, anonymous=None) -> str:
    """``ContentZipper#get_filename`` + ``sanitize_user_name`` + ``sanitize_attachment_filename``."""
    users_name = None
    if anonymous is None:
        users_name = re.sub(r"^(\d+)$", r"\1", re.sub(r"_(\d+)_", r"\1", sortable)).lower()
    ident = f"anon_{anonymous}" if anonymous is not None else str(user_id)
    prefix = "_".join(p for p in (users_name, "LATE" if late else None, ident) if p is not None)
    prefix = re.sub(r"[^\w]", "", prefix)  # Ruby's [^[[:word:]]]: Unicode letters, digits and _ stay
    return f"{prefix}_{attachment_id}_{re.sub(ATTACHMENT_UNSAFE, '_', display)}"


def canvas_upload_target(name: str) -> tuple[str, str] | None:
    """``Assignment#infer_comment_context_from_filename``: the first two all-digit ``_`` parts of the base name."""
    digits = [p for p in PurePosixPath(name).name.split("_") if re.fullmatch(r"\d+", p)]
    return (digits[0], digits[1]) if len(digits) >= 2 else None


def moodle_name(fullname: str, participant: int, filename: str, mode: str = "folder") -> str:
    """``mod/assign`` download: the prefix, then a folder (3.1 to 4.0 end it with ``_``, 4.1 on without) or flat."""
    prefix = f"{fullname.replace('_', ' ')}_{participant}_assignsubmission_file"
    return {"folder": f"{prefix}_/{filename}", "folder41": f"{prefix}/{filename}", "flat": f"{prefix}_{filename}"}[mode]


def moodle_upload_target(name: str) -> str | None:
    """``assignfeedback_file_zip_importer::is_valid_filename_for_import``: the participant id of the first path part
    shaped ``name_id_plugintype_pluginname``."""
    for part in name.split("/"):
        info = part.split("_", 4)
        if len(info) >= 4 and info[1].isdigit() and (info[2], info[3]) == ("assignsubmission", "file"):
            return info[1]
    return None


def blackboard_name(assignment: str, username: str, stamp: str, filename: str) -> str:
    return f"{assignment}_{username}_attempt_{stamp}_{filename}"


# ------------------------------------------------------------------------------------------------------------------
# reading download names (fast)


@pytest.mark.parametrize(
    "name, student, display, late",
    [
        (canvas_name("Smith, Bob", 12345, 67890, "hw1.ipynb"), "12345", "smithbob", False),
        (canvas_name("Smith, Bob", 12345, 67890, "hw1.ipynb", late=True), "12345", "smithbob", True),
        (canvas_name("Müller, Zoë", 34567, 89012, f"{EX1}.ipynb"), "34567", "müllerzoë", False),
        (canvas_name("Doe, Jane", 23456, 78901, "hw1 (final)_v2_3.ipynb"), "23456", "doejane", False),
        (canvas_name("Agent_007_, Bond", 7, 11, "a.ipynb"), "7", "agent007bond", False),
        (canvas_name("", 0, 45678, "hw1.ipynb", anonymous="aB3xZ"), "anon_aB3xZ", "", False),
        (canvas_name("", 0, 45679, "hw1.ipynb", late=True, anonymous="q9Wp2"), "anon_q9Wp2", "", True),
    ],
)
def test_canvas_names_give_the_user_id_the_flag_and_the_name(name, student, display, late):
    ident = lms.read_name("canvas", name)
    assert (ident.student_id, ident.name, ident.late) == (student, display, late)
    assert name.startswith(ident.upload + "_")


@pytest.mark.parametrize("mode", ["folder", "folder41", "flat"])
@pytest.mark.parametrize("fullname", ["Jan van der Berg", "Zoë Ñúñez-Łukasz", "Mary_Ann O'Brien", "Participant"])
def test_moodle_names_give_the_participant_id_in_every_layout(mode, fullname):
    name = moodle_name(fullname, 4821, f"{EX1}.ipynb", mode)
    ident = lms.read_name("moodle", name)
    assert ident.student_id == "4821" and ident.folder == (mode != "flat")
    assert ident.name == ("" if fullname == "Participant" else fullname.replace("_", " "))  # blind marking: none
    assert lms.read_name("moodle", f"wrapper/{name}").student_id == "4821"


def test_blackboard_names_give_the_username_and_the_attempt():
    name = blackboard_name("Exercise 1", "jdoe42", "2026-01-09-20-50-44", f"{EX1}.ipynb")
    ident = lms.read_name("blackboard", name)
    assert (ident.student_id, ident.attempt, ident.name) == ("jdoe42", "2026-01-09-20-50-44", "")
    assert ident.upload == "Exercise 1_jdoe42_attempt_2026-01-09-20-50-44"


def _downloads() -> dict[str, list[str]]:
    return {
        "canvas": [
            canvas_name("Smith, Bob", 12345, 67890, f"{EX1}.ipynb", late=True),
            canvas_name("Doe, Jane", 23456, 78901, f"{EX1}.ipynb"),
        ],
        "moodle": [moodle_name("Zoë Ñúñez", 11, f"{EX1}.ipynb"), moodle_name("Jan Berg", 12, f"{EX1}.ipynb")],
        "blackboard": [
            blackboard_name("Ex1", "jdoe", "2026-01-09-20-50-44", f"{EX1}.ipynb"),
            blackboard_name("Ex1", "bsmith", "2026-01-10-08-00-00", f"{EX1}.ipynb"),
        ],
        "generic": ["ann/hw.ipynb", "ben__anything.ipynb"],
    }


@pytest.mark.parametrize("expected", ["canvas", "moodle", "blackboard", "generic"])
def test_each_layout_is_detected_from_the_names(expected):
    found, why = lms.detect(_downloads()[expected])
    assert found == expected, why
    layout = lms.map_files(_downloads()[expected] + ["stray.ipynb"])
    assert layout.lms == expected and len(layout.students()) == 2
    assert "--lms" in layout.unmatched["stray.ipynb"] and "--pattern" in layout.unmatched["stray.ipynb"]


def test_a_tie_is_broken_by_the_zip_name_or_refused_with_what_to_do():
    names = _downloads()["canvas"][:1] + _downloads()["blackboard"][:1]
    with pytest.raises(lms.LmsError, match="--lms canvas/blackboard"):
        lms.detect(names, "download.zip")
    assert lms.detect(names, "gradebook_C101_Ex1_2026-01-11-09-00-00.zip")[0] == "blackboard"
    assert lms.detect(names, "c101-exercise_1_submissions.zip")[0] == "canvas"
    layout = lms.map_files(names, source_name="c101-exercise_1_submissions.zip")
    assert "Blackboard's" in layout.unmatched[names[1]]  # never dropped silently: said what it looks like


def test_a_forced_layout_that_does_not_fit_says_so_for_each_file():
    layout = lms.map_files(_downloads()["canvas"], "moodle")
    assert not layout.files and all("looks like Canvas's" in why for why in layout.unmatched.values())
    with pytest.raises(lms.LmsError, match="choose one of auto, canvas"):
        lms.map_files([], "sakai")


def test_the_latest_blackboard_attempt_is_graded_and_the_report_says_which():
    names = [
        blackboard_name("Ex1", "jdoe", "2026-01-09-20-50-44", f"{EX1}.ipynb"),
        blackboard_name("Ex1", "jdoe", "2026-01-10-07-15-00", f"{EX1}.ipynb"),
        blackboard_name("Ex1", "jdoe", "2026-01-08-10-00-00", f"{EX1}.ipynb"),
        blackboard_name("Ex1", "bsmith", "2026-01-09-10-00-00", f"{EX1}.ipynb"),
    ]
    layout = lms.map_files(names)
    assert sorted(layout.files) == sorted([names[1], names[3]])
    [note] = layout.notes("jdoe")
    assert "3 attempts: graded the latest (2026-01-10-07-15-00)" in note and "2026-01-08-10-00-00" in note
    assert layout.notes("bsmith") == []


def test_a_pattern_gives_the_id_and_the_lms_name_still_names_the_feedback():
    names = _downloads()["canvas"]
    layout = lms.map_files(names, "canvas", re.compile(r"^(?P<student_id>[a-z]+)_"))
    assert sorted(layout.students()) == ["doejane", "smithbob"]
    assert lms.feedback_name(layout, "smithbob", EX1).startswith("smithbob_LATE_12345_67890_")
    with pytest.raises(collect.CollectError, match="student_id"):
        collect.plan(Path("."), pattern="(?P<name>x)")


def test_ids_nbgrader_cannot_use_are_refused_with_a_reason():
    layout = lms.map_files(["bad id!/hw.ipynb", "ok/hw.ipynb"], "generic")
    assert list(layout.students()) == ["ok"] and "letters, digits" in layout.unmatched["bad id!/hw.ipynb"]


def _zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_collect_reads_a_moodle_zip_with_names_and_lists_what_it_skips(tmp_path):
    nb = corpus.dump(corpus.release())
    files = {moodle_name("Zoë Ñúñez", 11, f"{EX1}.ipynb"): nb, moodle_name("Jan Berg", 12, "x.ipynb", "flat"): nb}
    files["Jan Berg_12_assignsubmission_onlinetext_/onlinetext.html"] = b"<p>hi</p>"
    files["loose.ipynb"] = nb
    subs, skipped = collect.collect(_zip(tmp_path / "download.zip", files))
    assert [(s.student_id, s.name) for s in subs] == [("11", "Zoë Ñúñez"), ("12", "Jan Berg")]
    assert skipped == ["loose.ipynb"] and subs[0].files[next(iter(files))][0] == nb


# ------------------------------------------------------------------------------------------------------------------
# grades out (fast)

FACTS = RunFacts(EX1, {"test_a": 2.0, "test_b": 6.0})


def _row(student: str, score: float | None, feedback: Path | None = None):
    tests = {} if score is None else {"test_a": min(score, 2.0), "test_b": max(score - 2.0, 0.0)}
    status = "failed" if score is None else "graded"
    return SimpleNamespace(
        student_id=student, score=score, max_score=8.0, status=status, tests=tests, feedback=feedback
    )


def _csv(path: Path, encoding: str = "utf-8-sig", delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode(encoding), newline=""), delimiter=delimiter))


def test_canvas_csv_without_a_template_has_canvas_columns_and_no_anonymous_rows(tmp_path):
    names = _downloads()["canvas"] + [canvas_name("", 0, 5, "a.ipynb", anonymous="aB3xZ")]
    layout = lms.map_files(names)
    rows = [_row("12345", 8.0), _row("23456", 4.5), _row("anon_aB3xZ", 2.0)]
    result = lms.write_grades(rows, FACTS, layout, tmp_path, column="Exercise 1 (4242)")
    table = _csv(result.grades)
    assert table[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Exercise 1 (4242)"]
    assert table[1] == ["Points Possible", "", "", "", "", "8"]
    assert table[2:] == [["smithbob", "12345", "", "", "", "8"], ["doejane", "23456", "", "", "", "4.5"]]
    assert any("anon_aB3xZ" in n and "SpeedGrader" in n for n in result.notes)


CANVAS_EXPORT = [
    ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"Ex 1 {EX1} (4242)", "Quiz 1 (77)", "Current Score"],
    ["    Points Possible", "", "", "", "", "10", "5", "(read only)"],
    ["Smith, Bob", "12345", "S1", "bsmith", "C101", "", "4", "80"],
    ["Doe, Jane", "23456", "S2", "jdoe", "C101", "7", "5", "90"],
    ["Student, Test", "99999", "", "", "C101", "", "", ""],
    ["Roe, Ed", "34567", "S3", "eroe", "C101", "", "3", "60"],
]


def _write(path: Path, rows, encoding="utf-8-sig", delimiter=",", quoting=csv.QUOTE_MINIMAL, newline="\n") -> Path:
    buffer = io.StringIO(newline="")
    csv.writer(buffer, delimiter=delimiter, quoting=quoting, lineterminator=newline).writerows(rows)
    path.write_bytes(buffer.getvalue().encode(encoding))
    return path


def test_a_canvas_gradebook_is_filled_in_and_everything_else_kept(tmp_path):
    template = _write(tmp_path / "export.csv", CANVAS_EXPORT)
    layout = lms.map_files(_downloads()["canvas"] + [canvas_name("Ghost, Al", 55555, 9, "a.ipynb")])
    rows = [_row("12345", 8.0), _row("23456", None), _row("55555", 1.0)]
    result = lms.write_grades(rows, FACTS, layout, tmp_path, template)
    filled = _csv(result.grades)
    assert result.grades.read_bytes().startswith(b"\xef\xbb\xbf")  # the export's BOM is kept
    expected = [list(r) for r in CANVAS_EXPORT]
    expected[2][5] = "8"  # Bob graded; Jane failed (her cell untouched); the test student and Ed untouched
    assert filled == expected and result.column == f"Ex 1 {EX1} (4242)"
    notes = " ".join(result.notes)
    assert "not in export.csv" in notes and "55555" in notes and "23456" in notes  # Jane: no score
    assert "worth 10 points, the assignment 8" in notes and "same course" not in notes
    other = [list(r) for r in CANVAS_EXPORT]
    other[2][0] = "Roe, Ed"  # Bob's user id under another name: a gradebook from another course?
    result = lms.write_grades(rows, FACTS, layout, tmp_path, _write(tmp_path / "other.csv", other))
    assert any("ID 12345 is 'Roe, Ed'" in n and "'smithbob' in the download" in n for n in result.notes)


@pytest.mark.parametrize(
    "column, message",
    [(None, "none has its name"), ("Nope", "no column has that name"), ("77", None), ("Quiz 1", None)],
)
def test_the_column_is_found_by_name_or_by_column_and_else_refused(tmp_path, column, message):
    rows = [r[:5] + r[6:7] for r in CANVAS_EXPORT]  # only "Quiz 1 (77)": not the exercise's name
    template = _write(tmp_path / "export.csv", rows)
    layout = lms.map_files(_downloads()["canvas"])
    if message:
        with pytest.raises(lms.LmsError, match=message) as caught:
            lms.write_grades([_row("12345", 8.0)], FACTS, layout, tmp_path, template, column)
        assert "--column" in str(caught.value) and "Quiz 1 (77)" in str(caught.value)
    else:
        result = lms.write_grades([_row("12345", 8.0)], FACTS, layout, tmp_path, template, column)
        assert result.column == "Quiz 1 (77)" and _csv(result.grades)[2][5] == "8"


def test_a_file_that_is_not_the_lms_export_is_refused_with_how_to_export(tmp_path):
    template = _write(tmp_path / "mine.csv", [["name", "grade"], ["bob", "1"]])
    for name in ("canvas", "blackboard", "moodle"):
        layout = lms.map_files(_downloads()[name])
        with pytest.raises(lms.LmsError, match=f"not a {lms.LABEL[name]} gradebook export") as caught:
            lms.write_grades([_row("x", 1.0)], FACTS, layout, tmp_path, template)
        assert "Export" in str(caught.value) or "Download" in str(caught.value)
    with pytest.raises(lms.LmsError, match="--gradebook needs --lms"):
        lms.write_grades([_row("ann", 1.0)], FACTS, lms.map_files(_downloads()["generic"]), tmp_path, template)


def test_moodle_worksheet_without_and_with_a_template(tmp_path):
    layout = lms.map_files(_downloads()["moodle"])
    result = lms.write_grades([_row("11", 8.0), _row("12", 3.0)], FACTS, layout, tmp_path)
    table = _csv(result.grades)
    assert table[0] == ["Identifier", "Full name", "Grade", "Maximum Grade", "Last modified (grade)"]
    assert [r[:4] for r in table[1:]] == [
        ["Participant 11", "Zoë Ñúñez", "8", "8"],
        ["Participant 12", "Jan Berg", "3", "8"],
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r[4]) for r in table[1:])
    worksheet = [
        ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Last modified (grade)"],
        ["Participant 11", "Zoë Ñúñez", "z@x.org", "Submitted", "", "10.00", "-"],
        ["Participant 13", "Al Other", "a@x.org", "No submission", "", "10.00", "-"],
        ["Participant 12", "Jan Berg", "j@x.org", "Submitted", "", "10.00", "-"],
    ]
    template = _write(tmp_path / "worksheet.csv", worksheet, encoding="utf-8", quoting=csv.QUOTE_ALL)
    result = lms.write_grades([_row("11", 8.0), _row("12", 3.0)], FACTS, layout, tmp_path, template)
    expected = [list(r) for r in worksheet]
    expected[1][4], expected[3][4] = "8", "3"
    assert _csv(result.grades, "utf-8") == expected and result.column == "Grade"
    assert result.grades.read_text(encoding="utf-8").startswith('"Identifier","Full name"')  # quoting kept


def test_moodle_gradebook_export_is_matched_on_names_and_refuses_twins(tmp_path):
    layout = lms.map_files(_downloads()["moodle"])
    export = [
        ["First name", "Last name", "ID number", "Email address", f"Assignment: {EX1} (Real)", "Last downloaded"],
        ["Zoe", "Nunez", "", "z@x.org", "-", "1"],
        ["Jan", "Berg", "42", "j@x.org", "-", "1"],
    ]
    result = lms.write_grades(
        [_row("11", 8.0), _row("12", 3.0)], FACTS, layout, tmp_path, _write(tmp_path / "g.csv", export)
    )
    assert [r[4] for r in _csv(result.grades)[1:]] == ["8", "3"] and not result.notes
    twins = lms.map_files([moodle_name("Jan Berg", 12, "a.ipynb"), moodle_name("Jan  Berg", 14, "a.ipynb")])
    with pytest.raises(lms.LmsError, match="grading worksheet"):
        lms.write_grades([_row("12", 1.0), _row("14", 2.0)], FACTS, twins, tmp_path, tmp_path / "g.csv")


def test_blackboard_export_in_utf16_tabs_is_filled_and_written_back_alike(tmp_path):
    layout = lms.map_files(_downloads()["blackboard"])
    export = [
        [
            "Last Name",
            "First Name",
            "Username",
            "Student ID",
            "Last Access",
            "Availability",
            "Ex1 [Total Pts: 8 Score] |880",
        ],
        ["Doe", "Jane", "JDoe", "1", "2026-01-09", "Available", ""],
        ["Smith", "Bob", "bsmith", "2", "2026-01-10", "Available", ""],
    ]
    template = _write(tmp_path / "bb.xls", export, encoding="utf-16", delimiter="\t", quoting=csv.QUOTE_ALL)
    result = lms.write_grades([_row("jdoe", 6.0), _row("bsmith", 8.0)], FACTS, layout, tmp_path, template, "Ex1")
    assert result.grades.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    filled = _csv(result.grades, "utf-16", "\t")
    assert [r[6] for r in filled[1:]] == ["6", "8"] and [r[:6] for r in filled] == [r[:6] for r in export]
    plain = lms.write_grades([_row("jdoe", 6.0)], FACTS, layout, tmp_path)
    assert _csv(plain.grades) == [["Username", f"{EX1} [Total Pts: 8 Score]"], ["jdoe", "6"]]


def test_generic_csv_has_ids_names_scores_and_parts(tmp_path):
    layout = lms.map_files(_downloads()["generic"])
    result = lms.write_grades([_row("ann", 5.0), _row("ben", None)], FACTS, layout, tmp_path)
    assert _csv(result.grades) == [
        ["student_id", "name", "score", "max_score", "status", "test_a", "test_b"],
        ["ann", "", "5", "8", "graded", "2", "3"],
        ["ben", "", "", "8", "failed", "", ""],
    ]
    assert "ben" in result.notes[0]


# ------------------------------------------------------------------------------------------------------------------
# feedback out (fast)


def _feedback(tmp_path: Path, students: list[str]) -> list:
    rows = []
    for s in students:
        html = tmp_path / "feedback" / s / f"{EX1}.html"
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(f"<p>feedback of {s}</p>")
        rows.append(_row(s, 1.0, html))
    return rows


def test_canvas_feedback_names_map_back_to_the_user_and_the_attachment(tmp_path):
    names = _downloads()["canvas"] + [canvas_name("", 0, 45678, "a.ipynb", anonymous="aB3xZ")]
    layout = lms.map_files(names)
    result = lms.export(_feedback(tmp_path, ["12345", "23456", "anon_aB3xZ"]), FACTS, layout, tmp_path)
    with zipfile.ZipFile(result.feedback_zip) as archive:
        uploaded = {canvas_upload_target(n): archive.read(n).decode() for n in archive.namelist()}
    assert uploaded == {("12345", "67890"): "<p>feedback of 12345</p>", ("23456", "78901"): "<p>feedback of 23456</p>"}
    assert (tmp_path / lms.BY_HAND_DIR / "anon_aB3xZ.html").is_file()  # anonymous names carry no user id
    assert any("by hand" in n for n in result.notes)


@pytest.mark.parametrize("mode", ["folder", "folder41", "flat"])
def test_moodle_feedback_names_map_back_to_the_participant(tmp_path, mode):
    layout = lms.map_files(
        [moodle_name("Zoë Ñúñez", 11, "a.ipynb", mode), moodle_name("Jan Berg", 12, "b.ipynb", mode)]
    )
    result = lms.export(_feedback(tmp_path, ["11", "12"]), FACTS, layout, tmp_path)
    with zipfile.ZipFile(result.feedback_zip) as archive:
        assert sorted(moodle_upload_target(n) for n in archive.namelist()) == ["11", "12"]
        assert all(n.endswith(f"{EX1}_feedback.html") for n in archive.namelist())
    assert result.by_hand is None


def test_full_feedback_is_never_prepared_for_upload(tmp_path):
    layout = lms.map_files(_downloads()["generic"])
    result = lms.export(_feedback(tmp_path, ["ann", "ben"]), FACTS, layout, tmp_path, feedback=False)
    assert result.feedback_zip is None and not (tmp_path / lms.FEEDBACK_DIR).exists()
    assert any("--feedback full" in n for n in result.notes)


# ------------------------------------------------------------------------------------------------------------------
# one real run: a Canvas zip of three notebooks, with the instructor's gradebook export (slow)


@pytest.mark.slow
def test_grade_a_canvas_zip_fills_the_gradebook_and_names_feedback_for_upload(tmp_path):
    notebooks = {
        (12345, 67890, "Smith, Bob", True): (corpus.answered(), 8.0),
        (23456, 78901, "Doe, Jane", False): (corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE}), 4.0),
        (34567, 89012, "Müller, Zoë", False): (corpus.release(), 0.0),
    }
    files = {
        canvas_name(n, u, a, f"{EX1}.ipynb", late=late): corpus.dump(nb)
        for (u, a, n, late), (nb, _) in notebooks.items()
    }
    download = _zip(tmp_path / "c101-exercise_1_submissions.zip", files)
    export = [list(r) for r in CANVAS_EXPORT]
    export[5] = ["Müller, Zoë", "34567", "S3", "zm", "C101", "", "3", "60"]
    template = _write(tmp_path / "export.csv", export)
    out = tmp_path / "out"
    done = run_grade(
        EX1, str(download), "--out", str(out), "--jobs", "2", "--timeout", "20", "--gradebook", str(template)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Canvas (detected: 3 of 3 notebooks have Canvas's download names" in done.stdout
    filled = _csv(out / "canvas-grades.csv")
    assert {r[1]: r[5] for r in filled[2:]} == {"12345": "8", "23456": "4", "99999": "", "34567": "0"}
    assert [r[:5] + r[6:] for r in filled] == [r[:5] + r[6:] for r in export]
    with zipfile.ZipFile(out / "lms-feedback.zip") as archive:
        targets = {canvas_upload_target(n) for n in archive.namelist()}
        assert targets == {(str(u), str(a)) for u, a, _, _ in notebooks}
    report_md = (out / "report.md").read_text(encoding="utf-8")
    assert "## LMS: Canvas" in report_md and "| 34567 | müllerzoë |" in report_md
    assert "Canvas marked it late" in report_md  # Bob's LATE flag is kept for a human


def test_every_lms_is_one_module_with_the_same_functions():
    """Issue 36, item 3: what is particular to one LMS lives in its module, and each module answers the same
    questions (so a new LMS is one module added to ``download.FORMATS``, and none is half done)."""
    from manyheads_grader.output.lms import download

    needed = {"NAME", "LABEL", "SHAPE", "EXPORT_HOW", "read_name", "zip_hint", "grades_table", "template"}
    needed |= {"row_notes", "other_row_notes", "feedback_name"}
    assert set(download.FORMATS) == {"canvas", "moodle", "blackboard", "generic"}
    for name, module in download.FORMATS.items():
        assert needed <= set(vars(module)), (name, needed - set(vars(module)))
        assert module.NAME == name and module.__name__.endswith(f".lms.{name}")
