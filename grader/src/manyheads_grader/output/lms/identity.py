"""Who handed in a file, as its LMS download name says; the error every LMS module raises."""

from __future__ import annotations

import re
from dataclasses import dataclass

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # what nbgrader accepts as a folder name, safely
TO_DO = "use --lms to choose the layout, or --pattern with a (?P<student_id>...) group for other names"


class LmsError(Exception):
    """A layout or gradebook that cannot be used as asked: the message says what is wrong and what to do."""


@dataclass(frozen=True)
class Identity:
    """Who handed in one file, as its LMS name says."""

    student_id: str
    name: str = ""  # display name from the file name: for the report and CSVs, never the id
    late: bool = False  # Canvas's LATE flag (Canvas computes lateness; nbgrader does not see it)
    attempt: str = ""  # Blackboard's attempt stamp, YYYY-MM-DD-HH-MM-SS, so it sorts in time order
    upload: str = ""  # the part of the download name the LMS matches when the feedback goes back
    folder: bool = False  # Moodle: one folder per student (else the old flat names)


def valid(ident: Identity | None) -> bool:
    """Whether an identity was read and its id is one nbgrader can use."""
    return ident is not None and bool(STUDENT_ID.match(ident.student_id))
