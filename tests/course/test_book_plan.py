"""make book's first line (tools/book_plan.py): how many chapters it will execute and about how long."""

from __future__ import annotations

import importlib.util
import json
import sys

import nbformat

from manyheads.course.layout import REPO

_spec = importlib.util.spec_from_file_location("book_plan", REPO.root / "tools" / "book_plan.py")
plan = sys.modules.setdefault("book_plan", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(plan)


def test_the_line_counts_the_chapters_and_sums_their_solo_times(tmp_path):
    timings = tmp_path / "chapters_solo.json"
    rows = [{"chapter": "01_a", "solo_s": 60.0}, {"chapter": "02_b", "solo_s": 120.0}]
    meta = {"cpu": "AMD EPYC", "cpu_threads": 2, "when": "2026-11-27T00:00:00+00:00"}
    timings.write_text(json.dumps({"benchmark": "chapters_solo", "meta": meta, "rows": rows}))
    seconds, where = plan.solo_seconds(timings)
    assert seconds == {"01_a": 60.0, "02_b": 120.0} and "AMD EPYC" in where and "2026-11-27" in where
    stale = [tmp_path / "01_a.ipynb", tmp_path / "02_b.ipynb", tmp_path / "03_c.ipynb"]
    line = plan.plan_line(stale, 3, seconds, where)
    assert line.startswith("make book: executing 3 of 3 chapters, about 3 min") and "03_c (not timed yet)" in line
    assert plan.plan_line([], 3, seconds, where) == "make book: all 3 chapters are cached; nothing to execute."
    assert "no timings yet" in plan.plan_line(stale, 3, {}, "")
    # two at a time (tools/build_book.py): the total shared out, but never less than the slowest chapter
    assert plan.plan_line(stale, 3, seconds, where, jobs=2).startswith(
        "make book: executing 3 of 3 chapters, 2 at a time, about 2 min"
    )
    assert "about 2 min" in plan.plan_line(stale, 3, seconds, where, jobs=8)


def test_a_chapter_is_stale_until_its_run_is_cached(tmp_path):
    from jupyter_cache import get_cache

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "01_a.ipynb"
    nbformat.write(nb, path)
    cache_dir = tmp_path / "cache"
    assert plan.stale_chapters(cache_dir, [path]) == [path]  # no cache at all: every chapter runs
    cache = get_cache(str(cache_dir))
    assert plan.stale_chapters(cache_dir, [path]) == [path]
    cache.cache_notebook_file(str(path), check_validity=False)
    assert plan.stale_chapters(cache_dir, [path]) == []
    nb.cells[0].source = "2 + 2"  # the code changed: its cached run no longer matches
    nbformat.write(nb, path)
    assert plan.stale_chapters(cache_dir, [path]) == [path]


def test_the_makefile_prints_the_line_before_the_build():
    makefile = (REPO.root / "Makefile").read_text()
    book = makefile.split("\nbook:", 1)[1].split("\n\n", 1)[0]
    assert book.index("tools/book_plan.py") < book.index("tools/build_book.py")
