"""Instructor grading: ``manyheads grade ASSIGNMENT SUBMISSIONS --out OUT`` around nbgrader.

A distribution of its own (``grader/``), so that students never install it; it depends on the course package
(``manyheads``), never the other way round. One job per module, from the top of the import graph down:

* ``cli`` (the command line) -> ``runner`` (orchestration only: release, collect, grade, gather, report);
* ``preflight`` (the reference answers and a blank release graded first), ``cluster`` (chunks on dask), ``worker``
  (one copy of the course that autogrades chunks with nbgrader), ``kernel_fork`` (kernels forked from a template
  process) and ``sandbox`` (bubblewrap), ``kernel_client`` (nbgrader's kernel manager, without jupyter_client's
  fixed waits), ``budget`` (a time budget per notebook), ``progress`` (a line per student);
* ``submissions`` (each student's files from a folder or an LMS zip, with ``lms``), ``repair`` (check and repair a
  submission against the release), ``review_flags`` (what a human should look at), ``own_work`` (the evidence of the
  own-work rule, whose guard runs in the kernel: ``manyheads.checks.own_work``), ``versions`` (which release a
  notebook was written for), ``feedback`` and ``report`` (what students and the instructor read);
* at the bottom: ``records`` (``Row``, ``Options``, ``GradingError``), ``notebooks`` (all notebook reading),
  ``gradebook`` (the database, and the merge of the workers' gradebooks), ``nbgrader_command`` (one nbgrader run)
  and ``nbgrader_session`` (a worker's nbgrader commands in one process),
  ``processes`` (no student process outlives grading).

tests/grader/test_grader_layout.py keeps the graph acyclic with the runner on top.
"""
