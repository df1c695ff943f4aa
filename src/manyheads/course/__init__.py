"""The course as a set of files, for maintainers and instructors (no chapter imports it).

:mod:`~manyheads.course.layout` (where chapters, solutions, exercises and the nbgrader config live),
:mod:`~manyheads.course.exercises` (the one description of every exercise), :mod:`~manyheads.course.hygiene`
(canonical notebooks, the Colab set-up cell), :mod:`~manyheads.course.release` (regenerating exercises/ with
nbgrader), :mod:`~manyheads.course.delivery` (which commit is a release), :mod:`~manyheads.course.colab` (what the
Colab set-up cell installs), :mod:`~manyheads.course.package_names` (which names of the package a notebook takes,
and whether a release has them), :mod:`~manyheads.course.chapter_places` (every file a chapter must appear in).
Grading a class (``manyheads grade``) is the separate distribution in ``grader/`` (``manyheads_grader``), which
students never install.
"""
