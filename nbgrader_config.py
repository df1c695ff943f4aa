"""nbgrader configuration for the course: solutions/ is nbgrader's source, exercises/ its release.

Run nbgrader from the repository root, e.g. ``nbgrader generate_assignment 01_single_head_bottleneck --force``.
The gradebook (gradebook.db) holds hidden tests and checksums: it is git-ignored and must never be published.
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "manyheads"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"

# Per-cell limit when autograding; an answer that loops forever is interrupted and loses that test's points.
c.Execute.timeout = 60
# Re-insert grade cells a student deleted (they then score 0 instead of "needs manual grading").
c.OverwriteCells.add_missing_cells = True

# Every release's header states the own-work rule and what each part must not call (manyheads.course.release).
from manyheads.course.release import nbgrader_preprocessors  # noqa: E402 (nbgrader runs this file in its venv)

c.GenerateAssignment.preprocessors = nbgrader_preprocessors()
