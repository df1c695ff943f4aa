"""A term of grading into one OUT: one run at a time (``lock``), each run's outputs made current in one step
(``generations``), the class merged with the runs before it (``merge``), the late policy (``late``)."""
