"""A Sphinx extension for the book: the chapters can be read, and so executed, in parallel (tools/build_book.py).

Two extensions that Jupyter Book loads do not say whether they are safe for Sphinx's parallel read, so Sphinx assumes
they are not, warns, and reads one document at a time. Both are safe, and this says so on their behalf just before
Sphinx decides (upstream would need ``"parallel_read_safe": True`` in the dict their ``setup`` returns):

* sphinx-multitoc-numbering 0.1.3 only replaces ``TocTreeCollector.assign_section_numbers``, which Sphinx calls in
  the main process after the readers' environments are merged; it keeps nothing of its own per document.
* sphinx-jupyterbook-latex 1.0.0 adds transforms that annotate nodes inside the document being read, and sets its
  environment attributes at ``builder-inited`` (before the readers start) and only for the LaTeX builder.
"""

from __future__ import annotations

UNDECLARED_BUT_SAFE = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _declare(app, env, docnames) -> None:
    for name in UNDECLARED_BUT_SAFE:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True


def setup(app):
    # env-before-read-docs comes right before Sphinx checks the extensions, after Jupyter Book has loaded them all
    app.connect("env-before-read-docs", _declare)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
