"""mh.benchmark_result: chapters 5-7 read the committed full-size benchmarks from the clone, and nothing in Colab."""

from __future__ import annotations

import json

import pytest

import manyheads as mh
from manyheads import runtime


def _result(folder, name="pruning", text=None):
    path = folder / "benchmarks" / "results" / f"{name}.json"
    path.parent.mkdir(parents=True)
    path.write_text(text if text is not None else json.dumps({"meta": {"when": "2026-11-27"}, "rows": [{"a": 1}]}))
    return path


def test_a_chapter_folder_finds_the_clone_s_result(tmp_path):
    _result(tmp_path)
    (tmp_path / "chapters").mkdir()
    got = mh.benchmark_result("pruning", start=tmp_path / "chapters")
    assert got == {"meta": {"when": "2026-11-27"}, "rows": [{"a": 1}]}


def test_without_a_clone_there_is_nothing_to_show(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "__file__", str(tmp_path / "site-packages" / "manyheads" / "runtime.py"))
    assert mh.benchmark_result("pruning", start=tmp_path / "content") is None


@pytest.mark.parametrize("text", ["{not json", json.dumps([1, 2]), json.dumps({"rows": []})])
def test_a_broken_result_names_the_file_and_the_script(tmp_path, text):
    path = _result(tmp_path, text=text)
    with pytest.raises(ValueError, match=rf"{path}.*benchmarks/pruning.py"):
        mh.benchmark_result("pruning", start=tmp_path)


def test_the_repository_s_committed_results_are_found_from_anywhere(tmp_path):
    got = mh.benchmark_result("chapters_solo", start=tmp_path)  # falls back to this checkout
    assert got is not None and got["rows"]
