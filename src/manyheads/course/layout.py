"""Where a course's files live: one object that every maintainer and instructor tool asks (no chapter teaches it).

A course folder holds ``nbgrader_config.py``, ``chapters/NN_topic.ipynb``, ``solutions/NN_topic/NN_topic.ipynb``
(nbgrader's source: solutions and hidden tests) and ``exercises/NN_topic/NN_topic.ipynb`` (nbgrader's release,
generated). :data:`REPO` is this checkout; the grading command and the tests make :class:`CourseLayout` objects
for their own copies of a course.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CourseLayout", "REPO", "REPO_ROOT", "CourseNotFound"]

REPO_ROOT = Path(__file__).resolve().parents[3]


class CourseNotFound(LookupError):
    """No course (or no such assignment) where one was expected; the message says what was looked for."""


@dataclass(frozen=True)
class CourseLayout:
    """The folders and files of the course rooted at ``root``; the same stem names a chapter, exercise and solution."""

    root: Path

    CONFIG_FILE = "nbgrader_config.py"
    CHAPTERS = "chapters"
    SOURCE = "solutions"  # nbgrader's source folder
    RELEASE = "exercises"  # nbgrader's release folder

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def config_file(self) -> Path:
        return self.root / self.CONFIG_FILE

    @property
    def chapters_dir(self) -> Path:
        return self.root / self.CHAPTERS

    @property
    def solutions_dir(self) -> Path:
        return self.root / self.SOURCE

    @property
    def exercises_dir(self) -> Path:
        return self.root / self.RELEASE

    def is_course(self) -> bool:
        """Whether ``root`` holds an nbgrader course: the config file and a solutions/ folder."""
        return self.config_file.is_file() and self.solutions_dir.is_dir()

    def assignments(self) -> list[str]:
        """Names of all assignments: the folders of solutions/ that hold a notebook."""
        if not self.solutions_dir.is_dir():
            return []
        return sorted(p.name for p in self.solutions_dir.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))

    def chapters(self) -> list[Path]:
        """Every chapter notebook: the numbered chapters, then the interlude (_toc.yml holds the reading order)."""
        return sorted(self.chapters_dir.glob("*.ipynb"))

    def chapter(self, name: str) -> Path:
        return self.chapters_dir / f"{name}.ipynb"

    def solution(self, name: str) -> Path:
        """The nbgrader source notebook of assignment ``name``."""
        return self.solutions_dir / name / f"{name}.ipynb"

    def release(self, name: str) -> Path:
        """The generated student notebook of assignment ``name``."""
        return self.exercises_dir / name / f"{name}.ipynb"

    def edited_notebooks(self) -> list[Path]:
        """The hand-edited notebooks: chapters/ and solutions/ (exercises/ is generated)."""
        folders = (self.chapters_dir, self.solutions_dir)
        return sorted(p for d in folders for p in d.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)

    def require(self, assignment: str) -> CourseLayout:
        """This layout if it holds ``assignment``'s source notebook; else :class:`CourseNotFound` naming what it has."""
        if not self.is_course():
            raise CourseNotFound(f"no nbgrader course ({self.CONFIG_FILE} + {self.SOURCE}/) in {self.root}")
        if not self.solution(assignment).is_file():
            raise CourseNotFound(
                f"unknown assignment {assignment!r}: {self.solutions_dir} has "
                f"{', '.join(self.assignments()) or 'no assignments'}"
            )
        return self


REPO = CourseLayout(REPO_ROOT)
