"""tools/build_book.py on a small book of its own: a chapter whose cell fails in one of the parallel reader
processes fails the build, and the output says which cell error made it fail (Sphinx's own message names only the
notebook: the reason stays in the reader process)."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from manyheads.course.layout import REPO

pytestmark = pytest.mark.slow

CONFIG = """title: a failing book
execute:
  execute_notebooks: force
  timeout: 60
  raise_on_error: true    # as the course's _config.yml: a chapter that fails to run fails the build
sphinx:
  local_extensions:
    parallel_read: {ext}
"""


def _book(folder, failing: bool):
    folder.mkdir()
    (folder / "_config.yml").write_text(CONFIG.format(ext=REPO.root / "_ext"), encoding="utf-8")
    pages = [f"page_{i}" for i in range(6)]  # Sphinx reads in parallel only when there are more than 5 documents
    toc = "format: jb-book\nroot: index\nchapters:\n" + "".join(f"- file: {p}\n" for p in [*pages, "chapter"])
    (folder / "_toc.yml").write_text(toc, encoding="utf-8")
    (folder / "index.md").write_text("# Index\n", encoding="utf-8")
    for page in pages:
        (folder / f"{page}.md").write_text(f"# {page}\n\nSome text.\n", encoding="utf-8")
    source = "raise ValueError('a planted failure in the chapter')" if failing else "print('fine')"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Chapter"), nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "chapter.ipynb")


def _build(folder):
    return subprocess.run(
        [sys.executable, str(REPO.root / "tools" / "build_book.py"), "--jobs", "2", str(folder), "-W", "-n"]
        + ["--keep-going"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_cell_that_fails_in_a_reader_process_is_named_with_its_error(tmp_path):
    _book(tmp_path / "failing", failing=True)
    done = _build(tmp_path / "failing")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Sphinx parallel build error" in out, out[-3000:]  # it did execute the chapter in a reader process
    assert "The document that failed, as its reader process reported it" in out, out[-3000:]
    assert "a planted failure in the chapter" in out, out[-3000:]


def test_the_same_book_without_the_failure_builds(tmp_path):
    _book(tmp_path / "fine", failing=False)
    done = _build(tmp_path / "fine")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (tmp_path / "fine" / "_build" / "html" / "chapter.html").is_file()


def _parallel_read_extension():
    import importlib.util

    spec = importlib.util.spec_from_file_location("parallel_read", REPO.root / "_ext" / "parallel_read.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_execution_cache_exists_before_the_readers_open_it(tmp_path, monkeypatch):
    # Two reader processes that both find no database both create its tables, and the second fails the build
    # ("table nbproject already exists"): the main process creates it first, so a reader never has to.
    from types import SimpleNamespace

    from jupyter_cache import get_cache
    from jupyter_cache.cache.db import OrmBase
    from myst_nb.core.config import NbParserConfig

    cache = tmp_path / "_build" / ".jupyter_cache"
    env = SimpleNamespace(mystnb_config=NbParserConfig(execution_mode="cache", execution_cache_path=str(cache)))
    app = SimpleNamespace(extensions={})
    extension = _parallel_read_extension()
    extension._declare(app, env, [])
    extension._declare(app, env, [])  # a rebuild finds it there and keeps it

    def a_reader_creating_tables(*args, **kwargs):
        raise AssertionError("a reader process created the cache's tables: two readers can race to do it")

    monkeypatch.setattr(OrmBase.metadata, "create_all", a_reader_creating_tables)
    assert get_cache(str(cache)).list_project_records() == []


def test_no_execution_cache_is_made_when_the_book_does_not_cache(tmp_path):
    from types import SimpleNamespace

    from myst_nb.core.config import NbParserConfig

    cache = tmp_path / "cache"
    env = SimpleNamespace(mystnb_config=NbParserConfig(execution_mode="force", execution_cache_path=str(cache)))
    _parallel_read_extension()._declare(SimpleNamespace(extensions={}), env, [])
    assert not cache.exists()
