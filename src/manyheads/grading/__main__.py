import sys

from manyheads.grading.cli import main

sys.exit(main())
