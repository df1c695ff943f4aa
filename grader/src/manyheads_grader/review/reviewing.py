"""The reviewed stage: the flags a human reviews on each scored notebook (cells run out of order, tampering) and
across the class (identical answers); no points change here.
"""

from __future__ import annotations

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.records import Checked, Release, Reviewed
from manyheads_grader.review import flags as review_flags

__all__ = ["review_class"]


def review_class(
    checked: list[Checked], graded: dict[str, nbformat.NotebookNode], release: Release
) -> tuple[dict[str, Reviewed], list]:
    """The flags for a human on each scored student (out of order, tampering; ``graded``: their graded notebooks)
    and across the class (identical answers); returns each student's Reviewed and the groups of identical answers
    that are not the course's own code, for the report's one line per group."""
    flags: dict[str, list[str]] = {c.student_id: [] for c in checked}
    for student in checked:
        if student.student_id in graded:
            ran = graded[student.student_id]
            flags[student.student_id] += review_flags.out_of_order(student.submitted, ran, release.notebook)
            flags[student.student_id] += review_flags.tampering(
                notebooks.student_cells(student.notebook, release.notebook), release.notebook, set(release.helpers)
            )
    by_student = {c.student_id: review_flags.answers(c.notebook) for c in checked}
    reference = review_flags.answers(release.solution)  # the published reference solution: marked when handed in
    copied = review_flags.identical_answers(by_student, release.notebook, reference)
    reviewed = {s: Reviewed(s, tuple(found + copied.get(s, []))) for s, found in flags.items()}
    groups = [g for g in review_flags.identical_groups(by_student, release.notebook, reference) if not g.common]
    return reviewed, groups
