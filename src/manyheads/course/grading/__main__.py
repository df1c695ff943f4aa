import sys

from manyheads.course.grading.cli import main

sys.exit(main())
