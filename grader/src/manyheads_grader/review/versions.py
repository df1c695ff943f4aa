"""Which release of the course a notebook was written for, and whether the class and the grader agree on it.

Every chapter and exercise starts with the set-up cell (``manyheads.course.hygiene.setup_cell_source``), whose
``COURSE_PACKAGE = "manyheads[colab] @ git+<url>@vX.Y.Z"`` line names the release the student installed in Colab.
Released notebooks may also carry ``metadata.manyheads.version = "X.Y.Z"``; Colab and other editors may drop
notebook metadata, so the set-up cell comes first and the metadata is only a fallback.

``manyheads grade`` compares each submission's version with the release notebook of the course it grades
(``exercises/ASSIGNMENT``'s set-up cell) and with the instructor's package (``manyheads.__version__``); the report
lists the students who worked on another version, with both versions, and those whose version cannot be told.
No score depends on it: a notebook from an older release is graded like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

UNKNOWN = "version unknown"
# The release tag at the end of the set-up cell's pip requirement: ...@v0.2.0" (a branch or commit is no version).
_SETUP_LINE = re.compile(r"""^\s*COURSE_PACKAGE\s*=\s*["'][^"'\n]*@v(\d+\.\d+\.\d+)["']""", re.MULTILINE)
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def from_setup_cell(nb: nbformat.NotebookNode) -> str | None:
    """The version in the notebook's set-up cell (the first code cell with a ``COURSE_PACKAGE`` line), or None."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str) and "COURSE_PACKAGE" in cell.source:
            found = _SETUP_LINE.search(cell.source)
            if found:
                return found.group(1)
    return None


def without_version(source: str) -> str:
    """A cell's source with its set-up line's release tag blanked: another release's set-up cell is still the
    course's cell, not the student's (runner.student_cells)."""
    return _SETUP_LINE.sub(lambda m: m.group(0).replace(f"@v{m.group(1)}", "@v*"), source)


def from_metadata(nb: nbformat.NotebookNode) -> str | None:
    """``metadata.manyheads.version`` when it is an X.Y.Z version, else None."""
    meta = nb.get("metadata", {}).get("manyheads")
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) and _VERSION.fullmatch(version) else None


def written_for(nb: nbformat.NotebookNode | None) -> str | None:
    """The release a notebook was written for: its set-up cell's, else its metadata's; None when neither says."""
    if nb is None:
        return None
    return from_setup_cell(nb) or from_metadata(nb)


@dataclass
class Course:
    """The versions on the grader's side: the release notebook's and the installed package's."""

    release: str | None
    package: str

    @property
    def expected(self) -> str:
        """What the students were handed: the release notebook's version, else the package's."""
        return self.release or self.package

    def disagreement(self) -> str | None:
        """One line when the release notebooks and the grader's package are not the same version."""
        if self.release is None:
            return f"the release notebook names no version; compared with the grader's package (v{self.package})"
        if self.release != self.package:
            return (
                f"the release notebooks are v{self.release} but the grader's package is v{self.package}: "
                "install the release's version to grade with the code the students had"
            )
        return None


def course(release_notebook: Path | nbformat.NotebookNode) -> Course:
    """The course's side: ``release_notebook`` (a path or a notebook) and ``manyheads.__version__``."""
    import manyheads

    nb = release_notebook
    if isinstance(nb, Path):
        nb = nbformat.read(nb, as_version=4) if nb.is_file() else None
    return Course(written_for(nb), manyheads.__version__)


@dataclass
class Mismatches:
    """The students whose notebook names another version (student -> theirs) or none at all."""

    other: dict[str, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)


def compare(by_student: dict[str, str | None], expected: str) -> Mismatches:
    """Sort the students whose notebook version (None: unknown) is not ``expected``."""
    found = Mismatches()
    for student, version in sorted(by_student.items()):
        if version is None:
            found.unknown.append(student)
        elif version != expected:
            found.other[student] = version
    return found


def report_lines(facts, label=lambda student: student) -> list[str]:
    """The report's Markdown section on versions (empty when every student worked on the course's version);
    ``facts`` is the run's :class:`~manyheads_grader.records.RunFacts`; ``label`` names a student (name and id)."""
    info = facts.versions
    if info is None:
        return []
    expected, other, unknown = info.expected, info.other, info.unknown
    if not other and not unknown and not info.disagreement:
        return []
    lines = ["## Versions", ""]
    lines.append(
        f"The course is at v{expected} (release notebook v{info.release or '?'}, grader's package "
        f"v{info.package}). No points change: this says who may have seen other instructions or helpers."
    )
    lines.append("")
    if info.disagreement:
        lines += [f"- grader: {info.disagreement}"]
    lines += [f"- {label(s)}: worked on v{v}, the course is at v{expected}" for s, v in sorted(other.items())]
    lines += [
        f"- {label(s)}: {UNKNOWN} (no set-up cell with a COURSE_PACKAGE line, no version in the metadata)"
        for s in unknown
    ]
    return lines


def version_summary(facts) -> str:
    """A clause for the run's summary line, e.g. "2 on another version, 1 version unknown" ("" when none)."""
    info = facts.versions
    parts = []
    if info is not None and info.other:
        parts.append(f"{len(info.other)} on another version than v{info.expected}")
    if info is not None and info.unknown:
        parts.append(f"{len(info.unknown)} {UNKNOWN}")
    return ", ".join(parts)
