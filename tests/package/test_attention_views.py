"""bertviz views served from the book's own _static (manyheads.viz.attention_views): no CDN left, every referenced file
vendored, and the views really draw in headless Chromium with the network cut off."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from helpers.browser import chromium

from manyheads.viz import attention_views

ROOT = Path(__file__).resolve().parents[2]
TOKENS = ["[CLS]", "the", "zebra", "slept", ".", "[SEP]"]


def _attention(n_layers=2, n_heads=3):
    gen = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(n_layers, n_heads, len(TOKENS), len(TOKENS), generator=gen), dim=-1)


@pytest.mark.parametrize("view", [attention_views.head_view, attention_views.model_view])
def test_views_load_only_vendored_files(view):
    html = view(_attention(), TOKENS).data
    assert "cdnjs" not in html and not re.search(r'src="https?://', html)
    referenced = set(re.findall(r"\.\./_static/([\w./-]+)", html))
    assert {"requirejs/require.js", "d3/dist/d3.min", "jquery/dist/jquery.min"} <= referenced
    if not (ROOT / "_vendor").is_dir():
        pytest.skip("_vendor/ is missing: run `make vendor`")
    for path in referenced:  # require.js paths come without ".js"
        assert (ROOT / "_vendor" / path).is_file() or (ROOT / "_vendor" / f"{path}.js").is_file(), path


def test_views_embed_rounded_weights_to_stay_small():
    html = attention_views.head_view(_attention(6, 12), TOKENS).data
    assert not re.search(r"\d\.\d{5,}", html)  # 0.123, not 0.12300000339746475


def test_localize_refuses_a_remote_it_does_not_know():
    with pytest.raises(ValueError, match="network"):
        attention_views.localize('<script src="https://cdnjs.cloudflare.com/ajax/libs/d3/7.0.0/d3.min.js"></script>')


def test_colab_keeps_the_cdn(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert "cdnjs" in attention_views.head_view(_attention(), TOKENS).data


def test_static_head_view_draws_lines_for_each_head():
    import matplotlib

    matplotlib.use("Agg")  # tests only; the notebooks use the default backend
    ax = attention_views.static_head_view(_attention()[0], TOKENS, heads=[0, 2])
    assert len(ax.lines) > len(TOKENS)  # at least one line per token and head
    assert [t.get_text() for t in ax.texts[:2]] == ["[CLS]", "[CLS]"]


def test_static_head_view_lines_stay_solid_under_the_course_style():
    """The course style cycles line styles after eight colours; the head view's many lines came out dashed."""
    import matplotlib
    import matplotlib.pyplot as plt

    from manyheads.viz import style

    matplotlib.use("Agg")
    with matplotlib.rc_context():
        style.use_course_style()
        ax = attention_views.static_head_view(_attention()[0], TOKENS, heads=[0, 2], min_weight=0.0)
        assert len(ax.lines) > 8 and {line.get_linestyle() for line in ax.lines} == {"-"}
        plt.close(ax.figure)


@pytest.mark.slow
def test_head_view_draws_offline_in_chromium(tmp_path):
    if not (ROOT / "_vendor").is_dir():
        pytest.fail("_vendor/ is missing: run `make vendor`")
    shutil.copytree(ROOT / "_vendor", tmp_path / "_static")
    page = tmp_path / "chapters" / "view.html"
    page.parent.mkdir()
    html = attention_views.head_view(_attention(), TOKENS).data
    page.write_text(f"<!DOCTYPE html><html><body>{html}</body></html>", encoding="utf-8")
    dom = chromium("--allow-file-access-from-files", "--dump-dom", page.as_uri(), budget_ms=15000).stdout
    assert "<svg" in dom, "d3 drew nothing: the vendored d3/jQuery/require.js did not load"
    assert re.search(r"<text[^>]*>zebra</text>", dom), "the tokens were not drawn"
