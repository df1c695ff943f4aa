"""Regenerate the student versions (exercises/) from the nbgrader sources (solutions/) with real nbgrader.

``python -m manyheads.course.release``               regenerates every assignment (every folder in solutions/);
``python -m manyheads.course.release NAME [NAME…]``  only those (``make exercises`` runs the first form).

This is a thin wrapper around ``nbgrader generate_assignment NAME --force --no-db`` run with the course's
``nbgrader_config.py`` (source → solutions/, release → exercises/), so the result is exactly what nbgrader itself
produces; the instructor's own ``nbgrader generate_assignment`` (with the gradebook, before grading) writes the same
bytes. The configuration replaces nbgrader's header step by :func:`own_work_header` (see
:func:`nbgrader_preprocessors`): the exercise's header states the own-work rule and names, per part, the package
functions an answer must not call (from the exercises' descriptions: ``own_work.rule_paragraph``). ``--no-db``
keeps the gradebook, which holds the hidden tests, out of the way. After nbgrader has written a release, this module
checks what the course relies on (canonical JSON, no outputs, no solution or hidden-test text, the Colab set-up cell
first, a note that the notebook is generated) and fails loudly otherwise.

:func:`generate_into` does the same in another course root, which is how the tests compare a fresh release with the
committed exercises/ without touching the repository.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat

from manyheads.course import hygiene
from manyheads.course.layout import REPO_ROOT, CourseLayout

SOURCE_DIR = CourseLayout.SOURCE
RELEASE_DIR = CourseLayout.RELEASE
CONFIG_FILE = CourseLayout.CONFIG_FILE
# Text that must never reach a student: nbgrader's solution and hidden-test delimiters and mark schemes.
FORBIDDEN_IN_RELEASE = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "MARK SCHEME")
# Notebook metadata (written in the source, copied by nbgrader) that says the release is generated and from what.
GENERATED_NOTE_KEY = "manyheads"


OWN_WORK_MARK = "**Your own work.**"
HOW_TO_WORK_MARK = "**How to work.**"


def add_own_work_rule(nb: nbformat.NotebookNode, stem: str) -> bool:
    """Put the own-work paragraph of exercise ``stem`` in the header (after "How to work", else at the end of the
    first markdown cell), replacing an older one. False if ``stem`` is not a known exercise."""
    from manyheads.checks.own_work import rule_paragraph
    from manyheads.course.exercises import exercise

    try:
        paragraph = rule_paragraph(exercise(stem))
    except KeyError:
        return False
    cells = [c for c in nb.cells if c.cell_type == "markdown"]
    if not cells:
        return False
    cell = next((c for c in cells if HOW_TO_WORK_MARK in c.source or OWN_WORK_MARK in c.source), cells[0])
    blocks = [b for b in cell.source.split("\n\n") if not b.startswith(OWN_WORK_MARK)]
    at = next((i + 1 for i, b in enumerate(blocks) if b.startswith(HOW_TO_WORK_MARK)), len(blocks))
    blocks.insert(at, paragraph)
    cell.source = "\n\n".join(blocks)
    return True


@functools.cache
def own_work_header() -> type:
    """The class ``OwnWorkHeader`` (built on first use, so that nbgrader loads only in the processes that run it)."""
    from nbgrader.preprocessors import IncludeHeaderFooter

    class OwnWorkHeader(IncludeHeaderFooter):
        """nbgrader's header/footer step, then the own-work rule in the exercise's header."""

        def preprocess(self, nb, resources):
            nb, resources = super().preprocess(nb, resources)
            meta = nb.metadata.get(GENERATED_NOTE_KEY, {})
            stem = meta.get("exercise") if isinstance(meta, dict) else None
            add_own_work_rule(nb, stem or resources.get("nbgrader", {}).get("assignment", ""))
            return nb, resources

    OwnWorkHeader.__module__, OwnWorkHeader.__qualname__ = __name__, "OwnWorkHeader"
    return OwnWorkHeader


def nbgrader_preprocessors() -> list:
    """nbgrader's ``GenerateAssignment.preprocessors`` with its header step replaced by :class:`OwnWorkHeader`
    (``c.GenerateAssignment.preprocessors = nbgrader_preprocessors()`` in nbgrader_config.py)."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import IncludeHeaderFooter

    steps = list(GenerateAssignment.class_traits()["preprocessors"].default())
    return [own_work_header() if step is IncludeHeaderFooter else step for step in steps]


def assignments(root: Path = REPO_ROOT) -> list[str]:
    """Names of all assignments: the folders of solutions/ that hold a notebook."""
    return CourseLayout(root).assignments()


def nbgrader_command(*args: str, root: Path) -> list[str]:
    """An nbgrader command line for the course rooted at ``root`` (its nbgrader_config.py is read from the cwd)."""
    return [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}"]


def release_problems(path: Path) -> list[str]:
    """What is wrong with one generated release notebook, as human-readable lines (empty when it is fine).

    Everything a committed notebook must satisfy (:func:`manyheads.course.hygiene.problems`), plus what only a release
    must: no solution or hidden-test text, and the note saying it is generated.
    """
    found = hygiene.problems(path)
    raw = path.read_text(encoding="utf-8")
    found += [f"{path}: contains {text!r}" for text in FORBIDDEN_IN_RELEASE if text in raw]
    try:
        nb = nbformat.reads(raw, as_version=4)
    except Exception:  # already reported by hygiene.problems
        return found
    if "generated" not in str(nb.metadata.get(GENERATED_NOTE_KEY, {}).get("note", "")):
        found.append(f"{path}: no metadata.{GENERATED_NOTE_KEY}.note saying that the release is generated")
    return found


def generate(root: Path = REPO_ROOT, names: Sequence[str] | None = None) -> list[Path]:
    """Run ``nbgrader generate_assignment NAME --force --no-db`` in the course at ``root`` for each assignment.

    ``root`` must hold the course's nbgrader_config.py and solutions/. Returns the release notebooks written.
    Raises ``RuntimeError`` if nbgrader fails or a release breaks the rules in :func:`release_problems`.
    """
    root = Path(root).resolve()
    if not (root / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{root / CONFIG_FILE} not found: nbgrader needs the course's configuration")
    names = list(names) if names else assignments(root)
    unknown = sorted(set(names) - set(assignments(root)))
    if unknown:
        raise ValueError(f"no such assignment in {root / SOURCE_DIR}: {', '.join(unknown)}")
    written: list[Path] = []
    for name in names:
        done = subprocess.run(
            nbgrader_command("generate_assignment", name, "--force", "--no-db", root=root),
            cwd=root,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {name} failed:\n{done.stdout}{done.stderr}")
        written += sorted((root / RELEASE_DIR / name).glob("*.ipynb"))
    found = [line for path in written for line in release_problems(path)]
    if found:
        raise RuntimeError("generated release breaks the course's rules:\n" + "\n".join(found))
    return written


def generate_into(course_root: Path, names: Sequence[str] | None = None, source_root: Path = REPO_ROOT) -> list[Path]:
    """Copy the nbgrader config and solutions/ from ``source_root`` into a fresh ``course_root`` and generate there.

    The copied nbgrader_config.py sets the course root to its own folder, so nothing is read from or written to
    ``source_root`` afterwards. Returns the release notebooks written under ``course_root / "exercises"``.
    """
    course_root = Path(course_root)
    names = list(names) if names else assignments(source_root)
    course_root.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source_root / CONFIG_FILE, course_root / CONFIG_FILE)
    for name in names:
        shutil.copytree(source_root / SOURCE_DIR / name, course_root / SOURCE_DIR / name, dirs_exist_ok=True)
    return generate(course_root, names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m manyheads.course.release", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="ASSIGNMENT", help="assignments to regenerate (default: all)")
    args = parser.parse_args(argv)
    for path in generate(REPO_ROOT, args.names or None):
        print(f"generated {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
