"""The reviewed stage: the flags a human reviews on each scored notebook (cells run out of order, tampering) and
across the class (identical answers); no points change here.
"""

from __future__ import annotations

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.records import Release, Row
from manyheads_grader.review import flags as review_flags

__all__ = ["review_class"]


def review_class(rows: list[Row], graded: dict[str, nbformat.NotebookNode], release: Release) -> list:
    """The flags for a human on each scored row (out of order, tampering, identical answers); returns the groups of
    identical answers that are not the course's own code, for the report's one line per group."""
    for row in rows:
        if row.student_id in graded:
            row.flags = review_flags.out_of_order(row.submitted, graded[row.student_id], release.notebook)
            row.flags += review_flags.tampering(
                notebooks.student_cells(row.notebook, release.notebook), release.notebook, set(release.helpers)
            )
    by_student = {r.student_id: review_flags.answers(r.notebook) for r in rows}
    reference = review_flags.answers(release.solution)  # the published reference solution: marked when handed in
    copied = review_flags.identical_answers(by_student, release.notebook, reference)
    for row in rows:
        row.flags += copied.get(row.student_id, [])
    return [g for g in review_flags.identical_groups(by_student, release.notebook, reference) if not g.common]
