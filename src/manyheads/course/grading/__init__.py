"""Instructor grading: ``manyheads grade ASSIGNMENT SUBMISSIONS --out OUT`` around nbgrader.

One job per module: ``collect`` (find each student's notebook in a folder or zip), ``integrity`` (check and repair a
submission against the release), ``sandbox`` (a bubblewrap kernel for student code), ``runner`` (nbgrader autograde
and feedback in parallel worker courses, gradebook merge), ``feedback`` (students' feedback without hidden tests or
reference code), ``report`` (grades.csv, report.md and report.html) and ``cli``.
"""
