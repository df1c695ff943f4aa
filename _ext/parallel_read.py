"""A Sphinx extension for the book: the chapters can be read, and so executed, in parallel (tools/build_book.py).

Two extensions that Jupyter Book loads do not say whether they are safe for Sphinx's parallel read, so Sphinx assumes
they are not, warns, and reads one document at a time. Both are safe, and this says so on their behalf just before
Sphinx decides (upstream would need ``"parallel_read_safe": True`` in the dict their ``setup`` returns):

* sphinx-multitoc-numbering 0.1.3 only replaces ``TocTreeCollector.assign_section_numbers``, which Sphinx calls in
  the main process after the readers' environments are merged; it keeps nothing of its own per document.
* sphinx-jupyterbook-latex 1.0.0 adds transforms that annotate nodes inside the document being read, and sets its
  environment attributes at ``builder-inited`` (before the readers start) and only for the LaTeX builder.

It also creates jupyter-cache's database before the readers start. Each reader process opens the cache when its first
notebook executes, and jupyter-cache 1.0.1 creates the database's tables when the file is missing: two readers that
both find it missing both create them, and the second fails the build with ``sqlite3.OperationalError: table
nbproject already exists`` (seen once in a fresh build). Created here, in the main process, the readers find it.
"""

from __future__ import annotations

from pathlib import Path

UNDECLARED_BUT_SAFE = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _declare(app, env, docnames) -> None:
    for name in UNDECLARED_BUT_SAFE:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True
    _create_execution_cache(env)


def _create_execution_cache(env) -> None:
    config = getattr(env, "mystnb_config", None)  # set by myst-nb at builder-inited, with the cache's final path
    if config is None or config.execution_mode != "cache" or not config.execution_cache_path:
        return
    from jupyter_cache.cache.db import create_db

    path = Path(config.execution_cache_path)
    path.mkdir(parents=True, exist_ok=True)
    create_db(path).dispose()  # the tables and the version file, once, before any reader opens it


def setup(app):
    # env-before-read-docs comes right before Sphinx checks the extensions, after Jupyter Book has loaded them all
    app.connect("env-before-read-docs", _declare)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
