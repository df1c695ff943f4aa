"""The reviewed stage: the flags a human reviews on each scored notebook (cells run out of order, with the cells
behind the flag; tampering) and across the class (identical answers); no points change here.

The identical answers are a property of the whole class, not of one run: after a re-grade of some students the merged
class is compared again (``term.runs.compare_again``, with the answer key each run keeps).
"""

from __future__ import annotations

import nbformat

from manyheads_grader import notebooks
from manyheads_grader.records import AnswerKey, Checked, Release, Reviewed, answer_code
from manyheads_grader.review import flags as review_flags

__all__ = ["answer_key", "review_class"]


def answer_key(release: Release) -> AnswerKey:
    """The release's answer cells and the reference solution's, which the class's answers are compared against."""
    return AnswerKey(answer_code(release.notebook), answer_code(release.solution))


def review_class(
    checked: list[Checked], graded: dict[str, nbformat.NotebookNode], release: Release
) -> tuple[dict[str, Reviewed], list]:
    """The flags for a human on each scored student (out of order with its cells, tampering; ``graded``: their
    graded notebooks) and across the class (identical answers); returns each student's Reviewed and the groups of
    identical answers that are not the course's own code, for the report's one line per group."""
    reviewed: dict[str, Reviewed] = {}
    copied, groups = review_flags.in_class(
        {c.student_id: answer_code(c.notebook) for c in checked}, answer_key(release)
    )
    for student in checked:
        sid, own, cells = student.student_id, [], []
        if sid in graded:
            cells = review_flags.out_of_order_cells(student.submitted, graded[sid], release.notebook)
            own = review_flags.out_of_order_flag(cells, student.submitted)
            own += review_flags.tampering(
                notebooks.student_cells(student.notebook, release.notebook), release.notebook, set(release.helpers)
            )
        reviewed[sid] = Reviewed(sid, tuple(own), tuple(cells), tuple(copied.get(sid, [])))
    return reviewed, groups
