"""Instructor grading: ``manyheads grade ASSIGNMENT SUBMISSIONS --out OUT`` around nbgrader.

A distribution of its own (``grader/``), so that students never install it; it depends on the course package
(``manyheads``), never the other way round. A submission moves through stages; the folders show them:

* ``cli`` (the command line) -> ``runner`` (orchestration only: it wires the stages, nothing else);
* the stages: ``submissions`` (found), ``review.checking`` (checked), ``execution.executing`` (executed),
  ``scoring`` (scored), ``review.reviewing`` (reviewed); ``store`` keeps the class result under OUT as JSON;
* ``execution/``: the workers, the cluster, forked kernels, the sandbox, the time budget, the preflight;
* ``nbgrader/``: how nbgrader is driven (one command, one process per worker);
* ``review/``: repairs against the release, which release a notebook was written for, the own-work evidence, the
  integrity flags;
* ``output/``: grades.csv and the report, the students' feedback, the LMS round trip (one module per LMS), the
  merged gradebook, the progress lines; the pages are Jinja2 templates (``output/templates``);
* at the bottom: ``records`` (the records every stage passes on) and ``notebooks`` (all notebook reading).

tests/grader/test_grader_layout.py keeps the graph acyclic with the runner on top and the folders as listed.
"""
