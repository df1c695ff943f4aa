"""The LMS round trip of ``manyheads grade``: whose file is whose in an LMS download, and grades and feedback back.

Taught on the instructors' page ``instructors/lms.md``. Three jobs, all on names and tables (nothing here runs a
notebook): read a download's file names (``download``: :func:`map_files`, used by ``submissions``), fill a gradebook
CSV the LMS imports (``upload``: :func:`write_grades`, on ``csv_files``) and name each student's feedback so that the
LMS can take it back (``upload``: :func:`write_feedback`). What is particular to one LMS is in its own module
(``canvas``, ``moodle``, ``blackboard``, ``generic``: download names, gradebook columns, feedback names; each module
has the same functions); ``identity`` holds what they share. A new LMS is a module like these, added to
``download.FORMATS``.

Download names (``tooling-notes.md`` §6.2, read in the LMSs' source, not tried on a live LMS):

* ``canvas``: ``<name>[_LATE]_<user id>_<attachment id>_<file>``; with anonymous grading ``anon_<id>`` and no name.
  The student id is the Canvas user id (or ``anon_<id>``).
* ``moodle``: a folder per student ``<Full Name>_<participant id>_assignsubmission_file[_]/<file>`` (Moodle 3.1 on;
  4.1 drops the last ``_``), or the old flat ``<Full Name>_<participant id>_assignsubmission_file_<file>``. The
  student id is the participant id (the download's, not the Moodle user id).
* ``blackboard``: ``<assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>``; the id is the username (one
  without ``_``: others need ``--pattern``). Of several attempts the latest is graded and the report says so.
* ``generic``: ``<student id>/<any>.ipynb`` or ``<student id>__<any>.ipynb``.

A display name found in a file name is kept for the report and the CSVs; it is never used as the id.

Gradebook CSV columns (``OUT/<lms>-grades.csv``; with ``--gradebook FILE`` that export is filled in instead, every
other row, column, delimiter and encoding kept):

* canvas: ``Student, ID, SIS User ID, SIS Login ID, Section, <Assignment> (<assignment id>)``, second row
  ``Points Possible``; students are matched on ``ID`` (the Canvas user id).
* moodle: the assignment's grading worksheet, ``Identifier`` (``Participant <id>``), ``Full name``, ``Grade``,
  ``Maximum Grade``, ``Last modified (grade)``, matched on ``Identifier``; or, as template, a gradebook export
  (``First name``, ``Last name``/``Surname``, ``Email address``...), matched on the full name.
* blackboard: ``Username, <column>`` as in the Grade Center export, matched on ``Username``.
* generic: ``student_id, name, score, max_score, status`` and one column per graded part.

Feedback for upload (``OUT/lms-feedback/`` and ``OUT/lms-feedback.zip``, see :func:`feedback_name`): Canvas
``<download prefix>_<assignment>_feedback.html`` (its "Re-Upload Submissions"), Moodle the download's folder or flat
prefix (its "Upload multiple feedback files in a zip"), Blackboard named like the attempt (no bulk upload known),
generic ``<student id>/<assignment>_feedback.html``. Not verified against a live LMS: Canvas's CSV import rules,
Moodle's worksheet columns in other languages than English, everything about Blackboard (third-party parsers only).
"""

from manyheads_grader.output.lms.csv_files import Table, Template
from manyheads_grader.output.lms.download import CHOICES, LABEL, LMS_NAMES, SHAPE, Plan, detect, map_files, read_name
from manyheads_grader.output.lms.identity import STUDENT_ID, Identity, LmsError
from manyheads_grader.output.lms.upload import (
    BY_HAND_DIR,
    FEEDBACK_DIR,
    Into,
    Result,
    export,
    feedback_name,
    report_section,
    template,
    write_feedback,
    write_grades,
)

__all__ = [
    "BY_HAND_DIR",
    "CHOICES",
    "FEEDBACK_DIR",
    "LABEL",
    "LMS_NAMES",
    "SHAPE",
    "STUDENT_ID",
    "Identity",
    "Into",
    "LmsError",
    "Plan",
    "Result",
    "Table",
    "Template",
    "detect",
    "export",
    "feedback_name",
    "map_files",
    "read_name",
    "report_section",
    "template",
    "write_feedback",
    "write_grades",
]
