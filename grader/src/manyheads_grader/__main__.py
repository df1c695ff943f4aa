import sys

from manyheads_grader.cli import main

sys.exit(main())
