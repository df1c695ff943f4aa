"""How nbgrader is driven: ``command`` (one nbgrader command as a child process), ``session`` (one nbgrader process
per worker, kept for all its commands) and ``inprocess`` (what runs inside that process).

(``import nbgrader`` anywhere still means nbgrader itself: imports are absolute.)
"""
