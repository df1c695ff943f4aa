"""instructors/grading.md's tables of the options of ``manyheads grade`` and ``manyheads rescore``, made from the
commands' own parsers (``manyheads_grader.cli.options_table``), never typed: tests/grader/test_term_docs.py fails
when the page's tables differ from what this script writes.

Run: .venv/bin/python tools/grading_options.py          # rewrite the tables in instructors/grading.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from manyheads_grader.cli import options_table

PAGE = Path(__file__).resolve().parents[1] / "instructors" / "grading.md"
COMMANDS = ("grade", "rescore")


def markers(command: str) -> tuple[str, str]:
    return f"<!-- options:{command}:start -->", f"<!-- options:{command}:end -->"


def rewrite(text: str) -> str:
    for command in COMMANDS:
        start, end = markers(command)
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            sys.exit(f"{PAGE}: no {start} ... {end} markers")
        block = f"{start}\n{options_table(command)}\n{end}"
        text = pattern.sub(lambda _, block=block: block, text)
    return text


if __name__ == "__main__":
    PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the option tables of {', '.join(COMMANDS)} in {PAGE}")
