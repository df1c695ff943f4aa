"""``jupyter-book build`` with its chapters executed N at a time: the same command, options and configuration, with
Sphinx reading (and so myst-nb executing) N documents in parallel processes.

Jupyter Book 1 builds with one Sphinx process and has no option for more (``jupyter_book.sphinx.build_sphinx`` takes
``jobs`` but the command line never passes it). Executing the chapters is nearly all of a first build (each runs
alone for one to two minutes on 2 cores), and they are independent, so ``make book`` and the tests' build
(tests/book/conftest.py) run them two at a time. MyST-NB executes notebooks in Sphinx's parallel read, and every
extension the book loads declares itself safe for it (else Sphinx would warn, and ``-W`` fail the build; see
_ext/parallel_read.py).

Sphinx hands its reader processes documents in batches of about a dozen, in name order, which would put every chapter
in the first batch and execute them one after another in one process. Here each document is a batch of its own, the
chapters first, slowest first (benchmarks/results/chapters_solo.json, the committed solo timings), so that the two
slowest start at once and the rest fill in as processes free up.

Run: .venv/bin/python tools/build_book.py [--jobs N] [jupyter-book build's arguments...]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ROOT / "benchmarks" / "results" / "chapters_solo.json"


def slowest_first(docnames: list[str], nproc: int, maxbatch: int = 10) -> list[list[str]]:
    """Sphinx's ``make_chunks`` replaced: one document per batch, the slowest to execute first."""
    seconds = {}
    if TIMINGS.is_file():
        rows = json.loads(TIMINGS.read_text(encoding="utf-8"))["rows"]
        seconds = {f"chapters/{row['chapter']}": float(row["solo_s"]) for row in rows}
    return [[name] for name in sorted(docnames, key=lambda name: (-seconds.get(name, 0.0), name))]


def reader_traceback(result) -> str | None:
    """The traceback of a document that failed in a reader process, which the build's own message leaves out.

    Sphinx re-raises a reader process's exception as ``SphinxParallelError`` whose message is the exception's
    one-line text: for a chapter whose cell failed, myst-nb's ``ExecutionError`` names only the notebook, and the
    cell's error (its ``__cause__``) and myst-nb's warning stay in the reader process. Its formatted traceback, cause
    included, travels in the error's ``traceback``; a serial build would have shown it."""
    from sphinx.errors import SphinxParallelError

    if isinstance(result, SphinxParallelError) and result.traceback:
        return str(result.traceback)
    return None


def _showing_reader_tracebacks(build_sphinx):
    @functools.wraps(build_sphinx)
    def build(*args, **kwargs):
        result = build_sphinx(*args, **kwargs)
        found = reader_traceback(result)
        if found:
            print(f"\nThe document that failed, as its reader process reported it:\n{found}", file=sys.stderr)
        return result

    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MANYHEADS_BOOK_JOBS", "2")))
    args, rest = parser.parse_known_args(argv)
    import jupyter_book.sphinx
    import sphinx.builders
    from jupyter_book.cli import main as cli

    sphinx.builders.make_chunks = slowest_first  # the name Builder._read_parallel calls
    os.environ["MANYHEADS_STATIC_BUILD"] = "1"  # the chapters' kernels inherit it: no progress bars on static pages

    # the build command imports build_sphinx from jupyter_book.sphinx when it runs
    jupyter_book.sphinx.build_sphinx = _showing_reader_tracebacks(
        functools.partial(jupyter_book.sphinx.build_sphinx, jobs=max(1, args.jobs))
    )
    try:
        cli.main(["build", *rest], standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
