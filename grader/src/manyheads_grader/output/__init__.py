"""What the class result becomes: ``report`` (grades.csv, report.md, report.html), ``feedback`` (the students'
pages), ``lms`` (the LMS round trip, one module per LMS), ``gradebook`` (the merged nbgrader database) and
``progress`` (a line per student while grading runs). The report's and the feedback's pages are Jinja2 templates in
``templates/``, filled by ``pages`` (which also renders Markdown with markdown-it-py).
"""
