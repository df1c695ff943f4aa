"""Pages that moved keep their old address (_ext/redirects.py and _config.yml's manyheads_redirects)."""

from __future__ import annotations

import importlib.util
import sys

import yaml

from manyheads.course.layout import REPO

_spec = importlib.util.spec_from_file_location("redirects", REPO.root / "_ext" / "redirects.py")
redirects = sys.modules.setdefault("redirects", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(redirects)


def _configured() -> dict[str, str]:
    config = yaml.safe_load((REPO.root / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["manyheads_redirects"]


def test_the_redirect_is_relative_so_the_book_works_under_any_base_url():
    page = redirects.redirect_page("chapters/06_meet_a_decoder", "chapters/interlude_meet_a_decoder")
    assert 'content="0; url=interlude_meet_a_decoder.html"' in page
    assert '<a href="interlude_meet_a_decoder.html">' in page
    assert 'url=../chapters/b.html"' in redirects.redirect_page("exercises/a", "chapters/b")


def test_every_redirect_leads_to_a_page_of_the_book_and_no_old_page_is_still_there():
    toc = (REPO.root / "_toc.yml").read_text(encoding="utf-8")
    for old, new in _configured().items():
        assert f"file: {new}\n" in toc, f"{old} redirects to {new}, which is not in _toc.yml"
        assert not any((REPO.root / f"{old}{suffix}").exists() for suffix in (".ipynb", ".md")), old


def test_the_interlude_s_old_address_is_kept():
    assert _configured()["chapters/06_meet_a_decoder"] == "chapters/interlude_meet_a_decoder"


def test_a_second_build_rewrites_its_redirects_and_a_real_page_still_stops_it(tmp_path):
    """make book twice: the first build's redirect file is there, and it is not a real page (it once stopped the
    second build)."""
    import pytest

    moved = {"chapters/old": "chapters/new"}
    redirects.write_redirects(tmp_path, moved, {"chapters/new"})
    redirects.write_redirects(tmp_path, moved, {"chapters/new"})
    assert (tmp_path / "chapters/old.html").read_text(encoding="utf-8") == redirects.redirect_page(*moved.popitem())
    with pytest.raises(RuntimeError, match="chapters/old is a real page"):
        redirects.write_redirects(tmp_path, {"chapters/old": "chapters/new"}, {"chapters/old", "chapters/new"})
