"""A term of grading into one OUT: one run at a time (``lock``), each run's outputs made current in one step
(``generations``), the class as the last run left it and what a new run carries over from it (``runs``), a run's rows
merged into it with the replaced ones kept in history (``merge``), hand-graded points from the formgrader or a CSV
(``manual``), the late policy (``late``), and the totals the outputs show (``totals``)."""
