"""manyheads.viz.explorers: a live view under a kernel whose parts carry the class names book_static/explorers.js
reads on the book's pages (the JavaScript itself is tested in tests/book/test_head_budget_port.py and
tests/book/test_head_budget_explorer_pages.py)."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
from ipywidgets.embed import dependency_state, embed_data

import manyheads as mh
from manyheads.course.layout import REPO
from manyheads.viz.explorers import CONTROL_KINDS, explorer_widget


def test_an_explorer_renders_under_a_kernel_and_marks_its_parts_for_the_page_script():
    a, b = widgets.IntText(2, description="a"), widgets.BoundedIntText(3, min=0, max=9, description="b")
    view = explorer_widget("product", lambda a, b: f"<b>{a * b}</b>", a=a, b=b)
    assert view.children[2].value == "<b>6</b>" and view.children[-1].value == ""
    b.value = 5
    assert view.children[2].value == "<b>10</b>"  # Python re-renders, as any live view
    assert view._dom_classes == ("mh-explorer", "mh-explorer--product")
    assert a._dom_classes == ("mh-control", "mh-control--a", "mh-kind--int")
    assert view.children[2]._dom_classes == ("mh-explorer-view",)
    assert view.children[3]._dom_classes == ("mh-explorer-message",)
    # the classes travel with the saved state, which is all a page without a kernel has
    state = embed_data(views=[view], state=dependency_state(view))["manager_state"]["state"]
    assert list(state[view.model_id]["state"]["_dom_classes"]) == ["mh-explorer", "mh-explorer--product"]


def test_an_explorer_refuses_what_the_page_script_cannot_read():
    with pytest.raises(TypeError, match=r"control 'x' is a FloatSlider, which the book's explorers.js cannot read"):
        explorer_widget("s", lambda x: "", x=widgets.FloatSlider())
    with pytest.raises(ValueError, match="identifier"):
        explorer_widget("head budget", lambda x: "", x=widgets.IntText())
    assert set(CONTROL_KINDS) == {"int"}  # a new kind needs its reader in book_static/explorers.js (READERS)
    assert "int: function (control)" in (REPO.root / "book_static" / "explorers.js").read_text(encoding="utf-8")


def test_the_head_budget_calculator_is_an_explorer_whose_port_the_book_loads():
    view = mh.head_budget_widget()
    assert "mh-explorer--head_budget" in view._dom_classes
    assert [c._dom_classes[1] for c in view.children[:6]] == [
        f"mh-control--{name}" for name in ("d_model", "n_heads", "n_kv_heads", "seq_len", "n_layers", "batch")
    ]
    port = (REPO.root / "book_static" / "head_budget.js").read_text(encoding="utf-8")
    assert "registry.head_budget = headBudgetHtml" in port
    config = (REPO.root / "_config.yml").read_text(encoding="utf-8")
    assert '"explorers.js", "head_budget.js"' in config  # html_js_files: every page loads both
