"""Exercise notebooks for the tests: read the committed course through :class:`CourseLayout`, run a part's answer
and hidden tests in this process, and run real nbgrader in throw-away courses.

Nothing here writes into the repository: each nbgrader course lives in its own temporary folder, with its own
gradebook. Answers are given by the name of the student's function (:class:`~manyheads.course.exercises.CodePart`
``function``); notebooks are addressed by nbgrader grade_id (``answer_id``, ``check_id``, ``test_id``).
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from manyheads.course import release
from manyheads.course.exercises import CodePart, Exercise
from manyheads.course.layout import REPO, CourseLayout

ROOT = REPO.root
SOLUTION_DELIMITERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_DELIMITERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
IMPORTS_CELL = "imports"  # grade_id of every exercise's locked imports cell

# ------------------------------------------------------------------------------------------------------------------
# Reading notebooks


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def cells_by_id(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """The notebook's nbgrader cells by grade_id."""
    return {grade_id(c): c for c in nb.cells if grade_id(c) is not None}


def cell_source(path: Path, cell_id: str) -> str:
    [source] = [c.source for c in read(path).cells if grade_id(c) == cell_id]
    return source


def part_by_function(exercise: Exercise, function: str) -> CodePart:
    [part] = [p for p in exercise.code_parts if p.function == function]
    return part


def as_typed(source: str) -> str:
    """An answer cell's source as a student who solved it would type it: without nbgrader's solution delimiters."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in SOLUTION_DELIMITERS)


def solution_answers(exercise: Exercise, layout: CourseLayout = REPO) -> dict[str, str]:
    """{function: source} of the solution's answer cells, as typed."""
    cells = cells_by_id(read(layout.solution(exercise.stem)))
    return {p.function: as_typed(cells[p.answer_id].source) for p in exercise.code_parts}


def by_answer_id(exercise: Exercise, answers: Mapping[str, str]) -> dict[str, str]:
    """{function: source} → {answer cell grade_id: source}."""
    return {part_by_function(exercise, f).answer_id: source for f, source in answers.items()}


def with_answers(nb: nbformat.NotebookNode, answers: Mapping[str, str]) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cells (by grade_id) hold the given sources, as a student would type them."""
    nb = copy.deepcopy(nb)
    found = set()
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)].strip("\n")
            found.add(grade_id(cell))
    assert found == set(answers), f"no answer cells for {set(answers) - found}"
    return nb


def answered_release(
    exercise: Exercise, answers: Mapping[str, str] | None = None, layout: CourseLayout = REPO
) -> nbformat.NotebookNode:
    """The release notebook with the solution's answers, then ``answers`` ({function: source}) replacing some."""
    typed = {**solution_answers(exercise, layout), **(answers or {})}
    return with_answers(read(layout.release(exercise.stem)), by_answer_id(exercise, typed))


# ------------------------------------------------------------------------------------------------------------------
# One exercise in this process


def hidden_tests(exercise: Exercise, part: CodePart) -> str:
    """The hidden-test block of the part's test cell in the solution notebook."""
    source = cell_source(REPO.solution(exercise.stem), part.test_id)
    begin, end = HIDDEN_DELIMITERS
    return source.split(begin, 1)[1].split(end, 1)[0]


def student_namespace(exercise: Exercise, answers: Mapping[str, str] | None = None) -> dict:
    """The globals of a student's notebook: the locked imports cell, then every answer cell in notebook order, the
    solution's unless ``answers`` ({function: source}) replaces it."""
    typed = by_answer_id(exercise, {**solution_answers(exercise), **(answers or {})})
    namespace: dict = {}
    for cell in read(REPO.solution(exercise.stem)).cells:
        source = cell.source if grade_id(cell) == IMPORTS_CELL else typed.get(grade_id(cell))
        if source is not None:
            exec(compile(source, grade_id(cell), "exec"), namespace)
    return namespace


def run_hidden_tests(exercise: Exercise, part: CodePart, namespace: dict) -> None:
    """Run the part's hidden tests in ``namespace``, without the visible check the graded cell runs first: a wrong
    answer must fail them alone."""
    exec(compile(hidden_tests(exercise, part), part.test_id, "exec"), dict(namespace))


# ------------------------------------------------------------------------------------------------------------------
# Real nbgrader


def start_nbgrader(course: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start one nbgrader command in ``course`` (which holds a copy of the course's nbgrader_config.py).

    nbgrader creates a gradebook by running the ``alembic`` executable from PATH, so the venv's bin/ goes first
    there even when the tests run without an activated venv. ``env``: more variables for it.
    """
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        **(env or {}),
    }
    return subprocess.Popen(
        release.nbgrader_command(*args, root=course),
        cwd=course,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    """Wait for a started nbgrader command: (exit status, its output)."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        return -9, output
    return process.returncode, output


def run_nbgrader(course: Path, *args: str, timeout: float = 600) -> tuple[int, str]:
    """Run one nbgrader command in ``course`` to the end: (exit status, its output)."""
    return finish(start_nbgrader(course, *args), timeout)


def every_assignment(stems: list[str] | tuple[str, ...]) -> str:
    """nbgrader's assignment argument for every assignment of a course made by :func:`new_course`: the one id, or a
    glob (nbgrader matches the id against the folders, and such a course holds only these assignments), so that
    one nbgrader process handles them all, each as its own assignment."""
    return stems[0] if len(stems) == 1 else "*"


def new_course(root: Path, *stems: str) -> CourseLayout:
    """A course with the config and the assignments' sources, released *with* a gradebook (autograde needs it) by
    one ``generate_assignment`` over :func:`every_assignment`."""
    course = CourseLayout(root)
    course.solutions_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO.config_file, course.config_file)
    for stem in stems:
        shutil.copytree(REPO.solution(stem).parent, course.solution(stem).parent)
    status, output = run_nbgrader(course.root, "generate_assignment", every_assignment(stems), "--force")
    assert status == 0, output
    assert (course.root / "gradebook.db").is_file()
    for stem in stems:
        assert course.release(stem).is_file(), output
    return course


def submit(course: CourseLayout, student: str, stem: str, nb: nbformat.NotebookNode) -> None:
    folder = course.root / "submitted" / student / stem
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{stem}.ipynb")


def _gradebook(course: CourseLayout):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course.root / 'gradebook.db'}", "manyheads")


def grades(course: CourseLayout, stem: str) -> dict[str, dict[str, tuple]]:
    """{student: {grade_id: (auto_score, max_score, needs_manual_grade)}} from the course's gradebook."""
    result: dict[str, dict[str, tuple]] = {}
    with _gradebook(course) as gb:
        for submission in gb.assignment_submissions(stem):
            [notebook] = submission.notebooks
            result[submission.student_id] = {
                g.name: (g.auto_score, g.max_score, g.needs_manual_grade) for g in notebook.grades
            }
    return result


def max_score(course: CourseLayout, stem: str) -> float:
    """The assignment's maximum score, as nbgrader computed it from the released source."""
    with _gradebook(course) as gb:
        return float(gb.find_assignment(stem).max_score)


def errors(course: CourseLayout, student: str, stem: str) -> list[tuple[str, str, str]]:
    """(cell grade_id or index, exception name, message) for every error in a student's autograded notebook."""
    nb = read(course.root / "autograded" / student / stem / f"{stem}.ipynb")
    return [
        (grade_id(cell) or str(i), out.ename, out.evalue)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, compute: Callable[[], dict]
) -> dict:
    """Compute a JSON-able result once per pytest run, even when xdist spreads the tests over several workers.

    Workers share the run's base temporary folder: the first one to take the lock computes and stores the result,
    the others read it (the pattern from pytest-xdist's documentation, with a stdlib lock).
    """
    if worker_id == "master":
        return compute()
    shared = tmp_path_factory.getbasetemp().parent
    stored = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stored.is_file():
            stored.write_text(json.dumps(compute()), encoding="utf-8")
        return json.loads(stored.read_text(encoding="utf-8"))


@contextmanager
def forked_kernels(folder: Path, count: int) -> Iterator[list[tuple[list[str], dict[str, str]]]]:
    """``count`` (nbgrader arguments, environment) pairs, each naming a kernel spec whose kernels are forked from a
    template process of its own with torch and the course package imported (the kernels ``manyheads grade`` uses
    without its sandbox, here without the own-work rule too), so that each notebook does not spend seconds starting
    Python and importing torch. The kernel is still ipykernel, run by nbgrader as usual; tests/course compares the
    grades these kernels give with stock nbgrader's default kernel."""
    from manyheads_grader.execution import sandbox

    specs, templates, runtimes = [], [], []
    try:
        for i in range(count):
            rt, _ = sandbox.runtime_folder(folder / f"kernel-{i}")
            runtimes.append(rt)
            share = sandbox.prepare_plain(folder / f"kernel-{i}")
            templates.append(
                sandbox.start_template(
                    share, rt, sandbox.TemplateSettings(sandboxed=False), log=folder / f"template-{i}.log"
                )
            )
            args = [f"--Execute.kernel_name={sandbox.PLAIN_KERNEL_NAME}", sandbox.IN_MEMORY_HISTORY]
            specs.append((args, sandbox.environment(share, rt)))
        for rt, template in zip(runtimes, templates):
            sandbox.template_ready(rt, template)  # else its kernels start Python each, as stock nbgrader does
        yield specs
    finally:
        for template in templates:
            if template is not None:
                template.kill()
                template.wait()
        for rt in runtimes:
            shutil.rmtree(rt, ignore_errors=True)


def autograde_submissions(
    base: Path, answers: Mapping[Exercise, Mapping[str, Mapping[str, str]]], copies: int = 2
) -> dict[str, dict]:
    """Release the exercises with a gradebook, submit for each the solution, the blank release and one notebook per
    student (the release answered with the solution, then ``answers[exercise][student]`` ({function: source})
    replacing some parts), autograde them all with real nbgrader, and collect what it decided, by exercise.

    All the exercises are one nbgrader course, autograded by one ``nbgrader autograde`` per copy of the course with
    an assignment glob: the submissions are spread over ``copies`` copies autograded at the same time (nbgrader grades
    one submission after the other), so nbgrader and the kernels' template start once per copy, not once per exercise.
    Returns {stem: JSON-able dict}: returncode and log (the run's, shared by the exercises), max_score, grades
    {student: {grade_id: (auto, max, needs_manual)}}, errors {student: [(cell, exception name, message)]}.
    """
    stems = [exercise.stem for exercise in answers]
    course = new_course(base / "course-0", *stems)
    submissions = []  # (stem, student, notebook)
    for exercise, by_student in answers.items():
        stem = exercise.stem
        submissions += [(stem, "solution", read(course.solution(stem))), (stem, "blank", read(course.release(stem)))]
        submissions += [(stem, s, answered_release(exercise, replaced, course)) for s, replaced in by_student.items()]
    courses = [course] + [CourseLayout(base / f"course-{i}") for i in range(1, copies)]
    for other in courses[1:]:
        shutil.copytree(course.root, other.root)
    where = {}  # (stem, student) -> the copy that grades it
    for i, (stem, student, nb) in enumerate(submissions):
        where[stem, student] = courses[i % copies]
        submit(where[stem, student], student, stem, nb)
    with forked_kernels(base / "kernels", copies) as kernels:
        started = [
            start_nbgrader(c.root, "autograde", every_assignment(stems), "--force", *args, env=env)
            for c, (args, env) in zip(courses, kernels)
        ]
        finished = [finish(p, timeout=1500) for p in started]
    run = {"returncode": max(status for status, _ in finished), "log": "".join(out for _, out in finished)}
    found: dict[str, dict] = {}
    for stem in stems:
        graded = {}
        for c in courses:
            graded.update(grades(c, stem))
        found[stem] = {**run, "max_score": max_score(course, stem), "grades": graded, "errors": {}}
    for stem, student, _ in submissions:
        found[stem]["errors"][student] = errors(where[stem, student], student, stem)
    return found


# nbgrader's own log records look like "[AutogradeApp | ERROR] Timeout waiting for execute reply".
_NBGRADER_ERROR = re.compile(r"^\[\w+ \| (ERROR|CRITICAL)\]", re.MULTILINE)


def nbgrader_errors(log: str) -> list[str]:
    """The ERROR and CRITICAL records nbgrader itself logged (timeouts, dead kernels, failed submissions).

    Not every line with "ERROR" in it: ipykernel 6.31 sometimes prints "ERROR:tornado.general:Uncaught exception in
    ZMQStream callback ... Socket operation on non-socket" from a kernel that is shutting down after the notebook was
    graded and written (a race fixed in ipykernel 7.3, ipython/ipykernel#1518; 7.x itself is not used, see
    requirements.txt). That noise changes no grade, and the grades are checked separately.
    """
    return [line for line in log.splitlines() if _NBGRADER_ERROR.match(line)]


def full_marks(exercise: Exercise) -> dict[str, float]:
    """{test cell grade_id: points} of every autograded part."""
    return {p.test_id: float(p.points) for p in exercise.code_parts}


def auto_scores(autograded: dict, exercise: Exercise, student: str) -> dict[str, float]:
    """Points each autograded test cell gave ``student``, from :func:`autograde_submissions`."""
    found = autograded["grades"][student]
    return {test_id: found[test_id][0] for test_id in full_marks(exercise)}


def assert_autograde_ran_cleanly(autograded: dict, students: Iterable[str]) -> None:
    """nbgrader exited 0, logged no error of its own and graded the solution, the blank release and every student."""
    assert autograded["returncode"] == 0, autograded["log"]
    assert nbgrader_errors(autograded["log"]) == [], autograded["log"]
    assert set(autograded["grades"]) == {"solution", "blank", *students}


def assert_solution_gets_full_marks_and_written_answers_wait(autograded: dict, exercise: Exercise) -> None:
    """Full automatic marks and no error for the solution; each written answer waits for a person."""
    assert auto_scores(autograded, exercise, "solution") == full_marks(exercise)
    assert autograded["errors"]["solution"] == []
    for written in exercise.written_parts:
        _, max_points, needs_manual = autograded["grades"]["solution"][written.grade_id]
        assert needs_manual and max_points == written.points, written


def assert_blank_gets_zero_with_only_not_implemented_errors(autograded: dict, exercise: Exercise) -> None:
    """The untouched release scores 0 everywhere, and its test cells fail only because the answers raise
    NotImplementedError (in every check and test cell, and in any cell that uses the answers)."""
    blank = autograded["grades"]["blank"]
    # nbgrader gives an untouched written answer 0 by itself ("YOUR ANSWER HERE" as released): no person needed.
    assert {g: s[0] for g, s in blank.items()} == dict.fromkeys(blank, 0.0)
    assert not any(blank[w.grade_id][2] for w in exercise.written_parts)
    assert set(full_marks(exercise)) <= set(blank)
    found = autograded["errors"]["blank"]
    # An assignment graded only by hand (the capstone) has no answer that raises.
    assert {name for _, name, _ in found} == ({"NotImplementedError"} if exercise.code_parts else set()), found
    assert {i for p in exercise.code_parts for i in (p.check_id, p.test_id)} <= {cell for cell, _, _ in found}, found
