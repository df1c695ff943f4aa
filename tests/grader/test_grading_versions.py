"""Student and grader agree on the version (versions.py): which release a submission was written for, read from its
set-up cell (else its metadata), compared with the course's release notebook and the grader's package. Fast; the
real command's report and summary are checked in ``test_instructor_report.py``'s class."""

from __future__ import annotations

import copy

import pytest
from helpers import grading_corpus as corpus

import manyheads
from manyheads_grader.output import report
from manyheads_grader.records import Row, RunFacts, VersionFacts
from manyheads_grader.review import versions


def with_version(nb, version: str):
    """The notebook as release ``version`` handed it out: its set-up cell names that tag."""
    nb = copy.deepcopy(nb)
    setup = nb.cells[0]
    assert "COURSE_PACKAGE" in setup.source
    setup.source = versions._SETUP_LINE.sub(
        lambda m: m.group(0).replace(f"@v{m.group(1)}", f"@v{version}"), setup.source
    )
    return nb


def test_the_release_names_the_course_s_version_and_the_package_agrees():
    release = versions.course(corpus.RELEASE)
    assert release.release is not None and release.package == manyheads.__version__
    assert release.expected == release.release


def test_the_set_up_cell_comes_first_then_the_metadata():
    nb = with_version(corpus.answered(), "0.0.1")
    nb.metadata.setdefault("manyheads", {})["version"] = "9.9.9"
    assert versions.written_for(nb) == "0.0.1"  # what the student installed wins over metadata
    del nb.cells[0]
    assert versions.written_for(nb) == "9.9.9"  # Colab kept the metadata but the cell is gone
    nb.metadata["manyheads"]["version"] = "main"
    assert versions.written_for(nb) is None


@pytest.mark.parametrize(
    "line",
    [
        'COURSE_PACKAGE = "manyheads[colab] @ git+https://example.org/x@main"',  # a branch is no version
        "# COURSE_PACKAGE was here",
        "print('hello')",
    ],
)
def test_no_recognisable_set_up_cell_is_unknown_not_an_error(line):
    nb = corpus.answered()
    nb.cells[0].source = line
    nb.metadata.get("manyheads", {}).pop("version", None)
    assert versions.written_for(nb) is None


def test_students_on_another_version_are_listed_with_both_versions(tmp_path):
    course = versions.course(corpus.RELEASE)
    older = "0.0.1" if course.expected != "0.0.1" else "0.0.2"
    by_student = {
        "ada": versions.written_for(corpus.answered()),
        "bob": versions.written_for(with_version(corpus.answered(), older)),
        "cy": None,
    }
    found = versions.compare(by_student, course.expected)
    assert found.other == {"bob": older} and found.unknown == ["cy"]
    facts = RunFacts(
        corpus.EX1,
        {"test_softmax": 2.0},
        jobs=1,
        sandbox=True,
        db="sqlite",
        seconds=1.0,
        versions=VersionFacts(course.expected, course.release, course.package, None, found.other, found.unknown),
    )
    rows = [Row(s, status="graded", tests={"test_softmax": 2.0}, score=2.0, max_score=2.0) for s in by_student]
    rows[1].name = "Bob Roe"
    report.write_report(tmp_path / "report.md", rows, facts)
    report.write_html(tmp_path / "report.html", rows, facts)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    assert f"- Bob Roe (bob): worked on v{older}, the course is at v{course.expected}" in md
    assert "- cy: version unknown" in md and "- ada" not in md.split("## Versions", 1)[1]
    assert 'id="versions"' in page and f"worked on v{older}, the course is at v{course.expected}" in page
    assert versions.version_summary(facts) == f"1 on another version than v{course.expected}, 1 version unknown"


def test_nothing_is_said_when_everyone_agrees(tmp_path):
    info = VersionFacts("1.0.0", "1.0.0", "1.0.0", None, {}, [])
    assert versions.report_lines(RunFacts(corpus.EX1, {}, versions=info)) == []
    assert versions.version_summary(RunFacts(corpus.EX1, {}, versions=info)) == ""


def test_a_grader_on_another_package_version_is_told():
    assert "install the release's version" in versions.Course("0.3.0", "0.2.0").disagreement()
    assert versions.Course("0.2.0", "0.2.0").disagreement() is None
