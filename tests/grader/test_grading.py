"""``manyheads grade``: collect, check and repair, and the CLI's misuse handling (fast), then the whole corpus of
broken and hostile submissions through the real command, sandboxed, two jobs (slow).
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest
from helpers import grading_corpus as corpus
from helpers import unprivileged
from helpers.grading_corpus import run_grade

from manyheads_grader import submissions as collect
from manyheads_grader.execution import sandbox
from manyheads_grader.output import report
from manyheads_grader.output.gradebook import normalise_db
from manyheads_grader.review import repair

EX1 = corpus.EX1


def tree_digest(folder: Path) -> dict[str, tuple[str, int, float]]:
    """Every path under ``folder`` with its content hash, mode and modification time."""
    found = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[path.relative_to(folder).as_posix()] = (digest, st.st_mode, st.st_mtime)
    return found


# ------------------------------------------------------------------------------------------------------------------
# collect (fast)


def test_collect_reads_folders_flat_names_zips_and_patterns(tmp_path):
    nb = corpus.dump(corpus.release())
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "hw.ipynb").write_bytes(nb)
    (tmp_path / "subs" / "ben__anything.ipynb").write_bytes(nb)
    (tmp_path / "subs" / "orphan.ipynb").write_bytes(nb)
    (tmp_path / "subs" / "ann" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "subs" / "ann" / ".ipynb_checkpoints" / "hw-checkpoint.ipynb").write_bytes(nb)
    subs, skipped = collect.collect(tmp_path / "subs")
    assert [s.student_id for s in subs] == ["ann", "ben"]
    assert list(subs[0].files) == ["ann/hw.ipynb"] and skipped == ["orphan.ipynb"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("export/Doe, Jan_jd42_attempt_2026-01-09.ipynb", nb)
        archive.writestr("export/Roe, Ed_er7_attempt_2026-01-09.ipynb", nb)
        archive.writestr("export/readme.txt", "not a notebook")
    (tmp_path / "lms.zip").write_bytes(buffer.getvalue())
    subs, skipped = collect.collect(tmp_path / "lms.zip", pattern=r"_(?P<student_id>[a-z]+\d+)_attempt")
    assert [s.student_id for s in subs] == ["er7", "jd42"] and skipped == []
    assert subs[1].files["export/Doe, Jan_jd42_attempt_2026-01-09.ipynb"][0] == nb


@pytest.mark.parametrize("bad, message", [("missing", "no such file"), ("pattern", "student_id")])
def test_collect_refuses_misuse(tmp_path, bad, message):
    with pytest.raises(collect.CollectError, match=message):
        collect.collect(tmp_path / "nothing") if bad == "missing" else collect.collect(tmp_path, pattern="(.*)")


# ------------------------------------------------------------------------------------------------------------------
# checks and repairs (fast)


def _check(nb_or_bytes) -> repair.FileCheck:
    data = nb_or_bytes if isinstance(nb_or_bytes, bytes) else corpus.dump(nb_or_bytes)
    return repair.check(data, corpus.release(), EX1)


def _meta(nb) -> list[tuple[str, dict]]:
    return [(c.cell_type, c.metadata["nbgrader"]) for c in nb.cells if "nbgrader" in c.metadata]


def test_untouched_release_and_answers_need_no_repair():
    for nb in (corpus.release(), corpus.answered()):
        checked = _check(nb)
        assert checked.fatal is None and checked.repairs == [] and checked.notes == []
        assert _meta(checked.notebook) == _meta(corpus.release())


@pytest.mark.parametrize("colab", [False, True])
def test_stripped_metadata_is_reattached_exactly(colab):
    nb = corpus.strip_nbgrader(corpus.answered())
    checked = _check(corpus.colab(nb) if colab else nb)
    assert _meta(checked.notebook) == _meta(corpus.release())
    assert any(("by alignment" if colab else "by id") in r for r in checked.repairs), checked.repairs
    nbformat.validate(checked.notebook)
    assert checked.notebook.nbformat_minor == 5 and len({c.id for c in checked.notebook.cells}) == len(
        checked.notebook.cells
    )


def test_deleted_cells_come_back_in_place_and_answers_come_back_empty():
    nb = corpus.answered()
    for gid in ("test_softmax", "scaled_dot_product_attention", "one_head_two_targets"):
        del nb.cells[corpus.cell_index(nb, gid)]
    checked = _check(nb)
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in checked.notebook.cells]
    want = [c.metadata.get("nbgrader", {}).get("grade_id") for c in corpus.release().cells]
    assert [g for g in order if g] == [g for g in want if g]
    answer = checked.notebook.cells[order.index("scaled_dot_product_attention")]
    assert "def " not in answer.source and "raise" not in answer.source  # empty: cannot shadow the student's code
    joined = "; ".join(checked.repairs)
    assert "test cell test_softmax deleted" in joined and "answer cell scaled_dot_product_attention deleted" in joined
    assert "written answer one_head_two_targets deleted" in joined


def test_forged_points_and_edited_tests_are_restored_and_forged_cells_ungraded():
    nb = corpus.answered()
    i = corpus.cell_index(nb, "test_softmax")
    nb.cells[i].source = "pass"
    nb.cells[i].metadata.nbgrader["points"] = 100
    bonus = nbformat.v4.new_code_cell(
        "pass",
        metadata={
            "nbgrader": {
                "grade": True,
                "solution": False,
                "locked": True,
                "points": 50,
                "grade_id": "bonus",
                "schema_version": 3,
            }
        },
    )
    nb.cells.append(bonus)
    checked = _check(nb)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in checked.notebook.cells}
    assert cells["test_softmax"].source == corpus.release().cells[i].source
    assert cells["test_softmax"].metadata.nbgrader["points"] == 2
    assert "bonus" not in cells
    total = sum(c.metadata["nbgrader"].get("points", 0) for c in checked.notebook.cells if "nbgrader" in c.metadata)
    assert total == sum(
        c.metadata["nbgrader"].get("points", 0) for c in corpus.release().cells if "nbgrader" in c.metadata
    )
    assert any("unknown graded cell with grade id bonus" in r for r in checked.repairs)


def test_duplicated_grade_ids_leave_one_graded_cell_each():
    nb = corpus.answered()
    i = corpus.cell_index(nb, "test_attention_entropy")
    nb.cells.insert(0, copy.deepcopy(nb.cells[i]))
    nb.cells[0].id = "copied"
    checked = _check(nb)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in checked.notebook.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)) and "test_attention_entropy" in ids


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x89PNG\r\n", "not valid JSON"),
        (b'{"cells": 3}', "not a Jupyter notebook"),
        (b"[1, 2]", "not a Jupyter"),
        (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"source": 1}]}', "not a readable"),
    ],
)
def test_unreadable_files_fail_with_a_reason(data, why):
    assert why in _check(data).fatal


def test_other_assignments_and_unrelated_notebooks_are_refused():
    nb = corpus.answered()
    nb.metadata["manyheads"]["exercise"] = "02_other"
    assert "wrong assignment" in _check(nb).fatal
    unrelated = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    assert "does not look like" in _check(unrelated).fatal


def test_choose_takes_the_newest_gradable_notebook_and_says_so():
    good, bad = repair.FileCheck(nbformat.v4.new_notebook()), repair.FileCheck(None, fatal="not valid JSON")
    pick, repairs, notes = repair.choose({"a.ipynb": (good, 2.0), "b.ipynb": (good, 5.0), "c.ipynb": (bad, 9.0)})
    assert pick == "b.ipynb" and "graded b.ipynb (the newest), not a.ipynb" in repairs[0]
    assert notes == ["c.ipynb also handed in: not valid JSON, ignored"]


# ------------------------------------------------------------------------------------------------------------------
# the command's misuse handling (fast: it stops before nbgrader runs)


def test_unknown_assignment_and_unreadable_input_are_misuse(tmp_path):
    (tmp_path / "subs").mkdir()
    done = run_grade("99_nope", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-sandbox")
    assert done.returncode == 2 and "unknown assignment '99_nope'" in done.stderr
    done = run_grade(EX1, str(tmp_path / "missing"), "--out", str(tmp_path / "out"), "--no-sandbox")
    assert done.returncode == 2 and "no such file" in done.stderr
    done = run_grade(EX1, str(tmp_path / "subs"), "--out", str(tmp_path / "subs" / "out"), "--no-sandbox")
    assert done.returncode == 2 and "outside SUBMISSIONS" in done.stderr


def test_refuses_without_bubblewrap_and_says_how_to_install_it(tmp_path):
    (tmp_path / "subs").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("prlimit", "setpriv"):  # everything but bwrap
        if found := __import__("shutil").which(tool):
            (bin_dir / tool).symlink_to(found)
    done = run_grade(
        EX1,
        str(tmp_path / "subs"),
        "--out",
        str(tmp_path / "out"),
        env={"PATH": f"{Path(sys.executable).parent}{os.pathsep}{bin_dir}"},
    )
    assert done.returncode == 2 and "apt-get install bubblewrap" in done.stderr and "--no-sandbox" in done.stderr
    assert not (tmp_path / "out").exists()


def test_sandbox_kernel_spec_hides_the_course(tmp_path):
    share = sandbox.prepare(tmp_path / "sb")
    spec = json.loads((share / "kernels" / sandbox.KERNEL_NAME / "kernel.json").read_text())
    assert spec["interrupt_mode"] == "message"
    script = (share / "kernels" / sandbox.KERNEL_NAME / "run-kernel.sh").read_text()
    for needed in (
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        "--clearenv",
        "--as=",
        "--nproc=",
        "--fsize=",
        "--cpu=",
    ):
        assert needed in script
    assert f"--bind {corpus.ROOT}" not in script and f"--ro-bind {corpus.ROOT} " not in script
    assert str(corpus.ROOT / "solutions") not in script


# A grader who is not root, with more threads running than the sandbox's process limit (a desktop has hundreds):
# the kernel must still start and start threads of its own. Run as that grader: as an unprivileged user of its own
# when the tests run as root, else as whoever runs them.
NOT_ROOT_GRADER = r"""
import os, sys, threading
from pathlib import Path
import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient
from manyheads_grader.execution import sandbox

folder = Path(sys.argv[1])
assert os.geteuid() != 0
hold = threading.Event()
for _ in range(sandbox.Limits().processes + 50):
    threading.Thread(target=hold.wait, daemon=True).start()
share = sandbox.prepare(folder / "sb")
rt, scratch = sandbox.runtime_folder(folder / "worker")
os.environ.update(sandbox.environment(share, rt, scratch))
km = KernelManager(kernel_name=sandbox.KERNEL_NAME, transport="ipc", ip=str(rt / "kernel"))
code = "import os, threading\nt = threading.Thread(target=print, args=('thread started',))\nt.start(); t.join()"
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
NotebookClient(nb, km=km, timeout=60, startup_timeout=60).execute()
print("".join(o.get("text", "") for o in nb.cells[0].outputs))
"""


def test_visible_to_all_reaches_a_project_inside_a_folder_other_users_cannot_enter(tmp_path):
    """`make test` as root from a clone in a 0700 folder (a home folder, mktemp -d): the unprivileged grader of the
    test below must still reach the clone's virtual environment and package."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a command as another user")
    closed = tmp_path / "closed"
    venv_like = closed / "clone" / ".venv" / "lib"
    venv_like.mkdir(parents=True)
    (venv_like / "module.py").write_text("print('reached')\n")
    closed.chmod(0o700)
    uid = sandbox.worker_uid(901)
    command = [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--",
        "cat",
        str(venv_like / "module.py"),
    ]
    blocked = subprocess.run(command, capture_output=True, text=True)
    assert blocked.returncode != 0 and "Permission denied" in blocked.stderr  # the situation the helper fixes
    done = subprocess.run([*unprivileged.visible_to_all([venv_like]), *command], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "print('reached')\n", done.stderr


def test_sandbox_works_for_a_grader_who_is_not_root_and_runs_many_threads():
    folder = Path(tempfile.mkdtemp(prefix="mh-notroot-"))  # not under pytest's tmp_path: root-only there
    try:
        command = [sys.executable, "-c", NOT_ROOT_GRADER, str(folder)]
        env = {**os.environ, "HOME": str(folder), "TMPDIR": str(folder)}
        uid = sandbox.worker_uid(900)
        if os.geteuid() == 0:
            os.chown(folder, uid, uid)
        # as root: this clone seen from a 0700 folder, as an unprivileged user of its own (helpers.unprivileged)
        done = unprivileged.run_as_user(command, uid, env=env, cwd=folder, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        assert "thread started" in done.stdout, done.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------------------------------------------------
# the whole corpus through the real command (slow)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.available():  # a reason string when bubblewrap is missing; `make test` installs it
        pytest.fail(sandbox.available())
    base = tmp_path_factory.mktemp("grading")
    subs, out = base / "submissions", base / "out"
    marker = f"mh-pwned-{os.getpid()}-{base.name}"
    cases = corpus.build(subs, out, marker)
    before = tree_digest(subs)
    done = run_grade(EX1, str(subs), "--out", str(out), "--jobs", "2", "--timeout", "20")
    return {
        "cases": {c.student: c for c in cases},
        "done": done,
        "out": out,
        "subs": subs,
        "before": before,
        "marker": marker,
        "rows": report.read_csv(out / "grades.csv") if (out / "grades.csv").is_file() else {},
    }


@pytest.mark.slow
def test_batch_runs_to_the_end_and_writes_everything(graded):
    done, out = graded["done"], graded["out"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(graded["cases"]) >= 20 and set(graded["rows"]) == set(graded["cases"])
    header = (out / "grades.csv").read_text().splitlines()[0]
    assert header == (
        "student_id,score,max_score,status,problems,"
        "test_softmax,test_scaled_dot_product_attention,test_attention_entropy,one_head_two_targets"
    )
    report_md = (out / "report.md").read_text()
    for student, case in graded["cases"].items():
        if case.status != "graded":
            assert f"| {student} | {case.status} |" in report_md
    assert not (out / ".work").exists(), "scratch is removed at the end"
    assert (out / "course" / "gradebook.db").is_file()
    if os.geteuid() == 0:  # every notebook's kernel was forked from a worker's template process (kernel_template.py)
        graded_rows = sum(1 for r in graded["rows"].values() if r["score"] != "")
        forked = int(re.search(r"(\d+) kernel\(s\) forked from a template process", report_md).group(1))
        assert forked >= graded_rows, report_md


STUDENTS = [
    "correct",
    "partial",
    "blank",
    "colab",
    "stripped",
    "stripped_colab",
    "duplicated",
    "deleted_test",
    "edited_test",
    "extra_cells",
    "two_notebooks",
    "wrong_assignment",
    "truncated",
    "not_notebook",
    "infinite_loop",
    "memory_bomb",
    "kills_kernel",
    "huge_output",
    "network",
    "fork_bomb",
    "reads_secrets",
    "writes_outside",
    "monkeypatch",
    *(f"hands_over_{route}" for route in corpus.HANDING_OVER),
    "hands_over_gc",
]


@pytest.mark.slow
@pytest.mark.parametrize("student", STUDENTS)
def test_each_submission_gets_the_right_status_score_and_feedback(graded, student):
    case, row, out = graded["cases"][student], graded["rows"][student], graded["out"]
    assert row["status"] == case.status, row
    if case.score is None:
        assert row["score"] == "" and row["max_score"] == ""
        assert not (out / "feedback" / student).exists()
    else:
        assert float(row["score"]) == case.score and float(row["max_score"]) == corpus.MAXIMUM, row
        assert row[corpus.WRITTEN] == "", row  # a person has not graded the written answer yet
        per_test = [
            float(row[g]) for g in ("test_softmax", "test_scaled_dot_product_attention", "test_attention_entropy")
        ]
        assert sum(per_test) == case.score
    for text in case.problems_have:
        assert text in row["problems"], row["problems"]
    if case.status == "graded" and case.problems_have == ():  # at most a note about the student's own cells
        assert all("extra cell" in p for p in row["problems"].split("; ") if p), row["problems"]
    feedback = out / "feedback" / student / f"{EX1}.html"
    if case.score is not None:
        html = feedback.read_text(encoding="utf-8")
        for text in case.feedback_has:
            assert text in html, (student, text)
        for text in case.feedback_lacks:
            assert text not in html, (student, text)
        assert len(html) < 5_000_000, "outputs are cut"


@pytest.mark.slow
def test_submissions_untouched_and_nothing_written_outside(graded):
    assert tree_digest(graded["subs"]) == graded["before"]
    marker = graded["marker"]
    for place in (graded["out"], graded["subs"], Path("/tmp"), corpus.ROOT, Path.home()):
        assert not (place / f"{marker}.txt").exists(), place


@pytest.mark.slow
def test_stock_nbgrader_reads_the_merged_gradebook(graded):
    from nbgrader.api import Gradebook

    course = graded["out"] / "course"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "manyheads") as gb:
        scores = {s.student_id: s.score for s in gb.assignment_submissions(EX1)}
    for student, row in graded["rows"].items():
        if row["status"] != "failed":
            assert scores[student] == pytest.approx(float(row["score"])), student


# What stock nbgrader gives the same notebooks: its own course, its default kernel (not the sandbox or the template
# process), one ``nbgrader autograde``. Every part gets the same points, except those the own-work rule zeroed, which
# the report lists (issue 15).
SAME_AS_STOCK = ["correct", "partial", "blank", "colab", "extra_cells", "hands_over_direct"]


@pytest.mark.slow
def test_grades_equal_stock_nbgrader_s_except_the_parts_the_own_work_rule_zeroed(graded, tmp_path):
    from nbgrader.api import Gradebook

    from manyheads.course import release

    course = tmp_path / "stock"
    course.mkdir()
    shutil.copy2(corpus.ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(corpus.ROOT / "solutions" / EX1, course / "solutions" / EX1)
    for student in SAME_AS_STOCK:  # the notebooks manyheads grade graded (after its repairs)
        target = course / "submitted" / student / EX1
        target.mkdir(parents=True)
        shutil.copy2(graded["out"] / "course" / "submitted" / student / EX1 / f"{EX1}.ipynb", target)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    for args in (["generate_assignment", EX1, "--force"], ["autograde", EX1, "--force"]):
        done = subprocess.run(
            release.nbgrader_command(*args, root=course), cwd=course, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        stock = {
            student: {g.name: g.auto_score for g in gb.find_submission_notebook(EX1, EX1, student).grades}
            for student in SAME_AS_STOCK
        }
    test_ids = ("test_softmax", "test_scaled_dot_product_attention", "test_attention_entropy")
    zeroed_seen = 0
    for student in SAME_AS_STOCK:
        row = graded["rows"][student]
        for test in test_ids:
            if f"own work: {test} got no points" in row["problems"]:
                zeroed_seen += 1
                # stock may give 0 too: the visible check that the test cell runs first applies the rule anywhere
                assert float(row[test]) == 0.0 <= stock[student][test], (student, test)
            else:
                assert float(row[test]) == stock[student][test], (student, test, row[test], stock[student][test])
    assert zeroed_seen == 1, "hands_over_direct: exactly its Part 2 is zeroed, and the report says so"


# ------------------------------------------------------------------------------------------------------------------
# --db postgresql://… against a real PostgreSQL server on loopback (slow). In this file, after the corpus, so that the
# two batches do not compete for the two cores. The fixture initdb's a throw-away cluster in a temporary folder (as
# ``nobody`` when the tests run as root: PostgreSQL refuses root), starts it on a free port and stops it afterwards.
# Two ``manyheads grade`` commands share the one gradebook at the same time, as two machines grading one class would.


@pytest.mark.slow
def test_two_graders_share_one_postgresql_gradebook(postgres_url, tmp_path):
    if sandbox.available():  # a reason string when bubblewrap is missing; `make test` installs it
        pytest.fail(sandbox.available())
    good, partial = corpus.answered(), corpus.answered({"scaled_dot_product_attention": corpus.NO_SCALE})
    halves = {
        "a": {"pg_correct": good, "pg_partial": partial},
        "b": {"pg_blank": corpus.release(), "pg_stripped": corpus.strip_nbgrader(good)},
    }
    expected = {
        "pg_correct": ("graded", 8.0),
        "pg_partial": ("graded", 4.0),
        "pg_blank": ("graded", 0.0),
        "pg_stripped": ("repaired", 8.0),
    }
    for half, notebooks in halves.items():
        for student, nb in notebooks.items():
            (tmp_path / half / student).mkdir(parents=True)
            (tmp_path / half / student / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
    # the first grader releases the assignment into the shared gradebook; the second joins while it grades
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "manyheads_grader",
            "grade",
            EX1,
            str(tmp_path / "a"),
            "--out",
            str(tmp_path / "out-a"),
            "--jobs",
            "2",
            "--db",
            postgres_url,
        ],
        cwd=corpus.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )
    second = run_grade(EX1, str(tmp_path / "b"), "--out", str(tmp_path / "out-b"), "--jobs", "1", "--db", postgres_url)
    first_out, _ = first.communicate(timeout=1200)
    assert first.returncode == 0, first_out
    assert second.returncode == 0, second.stdout + second.stderr
    rows = {**report.read_csv(tmp_path / "out-a" / "grades.csv"), **report.read_csv(tmp_path / "out-b" / "grades.csv")}
    got = {s: (r["status"], float(r["score"] or "nan")) for s, r in rows.items()}
    assert got == expected, {s: r["problems"] for s, r in rows.items()}
    assert not (tmp_path / "out-a" / "course" / "gradebook.db").exists(), "no sqlite gradebook with --db"
    assert normalise_db(postgres_url) in (tmp_path / "out-a" / "course" / "nbgrader_config.py").read_text()

    from nbgrader.api import Gradebook

    with Gradebook(normalise_db(postgres_url), "manyheads") as gb:
        in_db = {s.student_id: s.score for s in gb.assignment_submissions(EX1)}
    assert in_db == {s: score for s, (_, score) in expected.items()}


# ------------------------------------------------------------------------------------------------------------------
# An assignment graded only by hand (the capstone): the command runs it like any other, and every written answer
# waits for a person in formgrader.


@pytest.mark.slow
def test_a_hand_graded_assignment_runs_and_every_part_waits_for_a_person(tmp_path):
    from manyheads.course.exercises import exercise

    capstone = exercise("08_capstone")
    nb = nbformat.read(corpus.ROOT / "exercises" / capstone.stem / f"{capstone.stem}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in {w.grade_id for w in capstone.written_parts}:
            cell.source = "My own words: a hypothesis, a design and what could refute it."
    (tmp_path / "subs" / "ada").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "subs" / "ada" / f"{capstone.stem}.ipynb")
    done = run_grade(capstone.stem, str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    row = report.read_csv(tmp_path / "out" / "grades.csv")["ada"]
    # grades.csv counts the written answers' points in the maximum (issue 37: the LMS sees the assignment's whole
    # maximum); none is given until a person grades them in the formgrader or in OUT/manual-grades.csv
    assert row["status"] == "graded" and float(row["score"]) == 0.0 == capstone.auto_points
    assert float(row["max_score"]) == capstone.points
    assert row["problems"] == ""
    assert all(row[w.grade_id] == "" for w in capstone.written_parts)
    # OUT/course is the nbgrader course where formgrader shows each written answer to a person.
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'out' / 'course' / 'gradebook.db'}") as gb:
        grades = {g.name: g for g in gb.find_submission_notebook(capstone.stem, capstone.stem, "ada").grades}
    assert {w.grade_id for w in capstone.written_parts} == {n for n, g in grades.items() if g.needs_manual_grade}
