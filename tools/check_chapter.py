"""Execute one chapter and run the book's claims and evidence checks on it, without building the book.

    .venv/bin/python tools/check_chapter.py chapters/01_single_head_bottleneck.ipynb [--reuse]

The executed notebook is written to ``_build/checked/<stem>.ipynb`` (``--reuse`` checks that file again without
executing). It prints every problem that tests/book/test_book.py would report for the chapter's glued values
(tests/helpers/claims.py, rules of CONTRIBUTING's "Claims follow from evidence") and its own evidence module
(tests/helpers/evidence/ch_<stem>.py), and exits 1 if there is one. A quick loop for the author of a chapter; the
tests still read the real build.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", type=Path)
    parser.add_argument("--reuse", action="store_true", help="check the last executed copy again")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (the book's limit)")
    args = parser.parse_args(argv)

    import nbformat
    from helpers import evidence
    from helpers.claims import check, glued_values, page_from_notebook

    chapter = args.chapter.resolve()
    out = ROOT / "_build" / "checked" / chapter.name
    out.parent.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        from nbclient import NotebookClient

        nb = nbformat.read(chapter, as_version=4)
        start = time.perf_counter()
        NotebookClient(
            nb, timeout=args.timeout, kernel_name="python3", resources={"metadata": {"path": str(chapter.parent)}}
        ).execute()
        nbformat.write(nb, out)
        print(f"executed {chapter.name} in {time.perf_counter() - start:.0f} s -> {out}")
    nb = nbformat.read(out, as_version=4)
    problems = [f"claims: {p}" for p in check(page_from_notebook(nb))]
    module = evidence.module_for(chapter.stem)
    if module is not None:
        problems += [f"evidence: {p}" for p in module.check(evidence.numbers(glued_values(nb)), nb)]
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
