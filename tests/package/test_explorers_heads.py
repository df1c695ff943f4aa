"""Figure explorers with integer and selection sliders, heatmap and line panels (issue 27): chapter 5's pruning
explorer and the attention explorers of manyheads.viz.head_explorers (chapters 4 and 6, the interlude). The page
script that draws the same states is tested on the built book (tests/book/test_explorer_pages.py)."""

from __future__ import annotations

import json

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import manyheads as mh
from manyheads.viz import head_explorers
from manyheads.viz.explorers import (
    MAX_DISCRETE_GRID,
    MAX_STATES_BYTES,
    control_grid,
    dequantised,
    heatmap_panel,
    panels_figure,
)


def stored(view: widgets.VBox, n_controls: int) -> dict:
    text = view.children[n_controls].value
    return json.loads(text[text.index(">") + 1 : text.rindex("</script>")])


def test_integer_and_selection_sliders_have_their_own_values_as_grid():
    assert control_grid("layer", widgets.IntSlider(3, 0, 29)) == list(range(30))
    assert control_grid("step", widgets.IntSlider(1500, 0, 1500, step=100)) == list(range(0, 1501, 100))
    fractions = widgets.SelectionSlider(options=[("0%", 0.0), ("15%", 0.15)], value=0.15)
    assert control_grid("fraction", fractions) == [0.0, 0.15]
    with pytest.raises(ValueError, match="must lie on the grid"):
        control_grid("step", widgets.IntSlider(50, 0, 1450, step=100))
    with pytest.raises(ValueError, match=f"allows {MAX_DISCRETE_GRID}"):
        control_grid("layer", widgets.IntSlider(0, 0, MAX_DISCRETE_GRID))


def test_a_heatmap_is_stored_as_uint8_levels_and_read_back_within_half_a_level():
    values = np.random.default_rng(0).random((5, 7))
    panel = heatmap_panel(values, xticks=list("abcdefg"))
    assert panel["shape"] == [5, 7] and len(panel["values"]) == 4 * ((35 + 2) // 3)  # base64: one byte a cell
    assert np.abs(dequantised(panel) - values).max() <= 0.5 / 255 + 1e-12
    shifted = heatmap_panel(values * 4 - 2, vmin=-2, vmax=2)
    assert np.abs(dequantised(shifted) - (values * 4 - 2)).max() <= 2 / 255 + 1e-12
    with pytest.raises(ValueError, match="cmap"):
        heatmap_panel(values, cmap="jet")


def test_panels_figure_draws_heatmaps_and_lines_with_the_legend_below_the_curves():
    spec = {
        "size": [8, 6],
        "columns": 2,
        "panels": [
            heatmap_panel(np.eye(3), boxes=[[0, 1]], crosses=[[2, 2]], colorbar="attention", title="a"),
            heatmap_panel(np.eye(3), cmap="Blues", title="b"),
            {
                "kind": "line",
                "span": 2,
                "series": [{"x": [0, 1, 2], "y": [3, 2, 1], "color": "#000", "label": "loss", "marker": True}],
                "vline": 1,
                "point": [1, 2],
                "title": "c",
            },
        ],
    }
    fig = panels_figure(spec)
    fig.canvas.draw()
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in axes] == ["a", "b", "c"]
    assert len(fig.axes) == 5  # two colour bars
    line = axes[2]
    assert line.get_position().width > 1.5 * axes[0].get_position().width  # the line spans both columns
    assert not line.get_legend().get_window_extent().overlaps(line.get_window_extent())
    plt.close(fig)


def _fake_importances():
    g = torch.Generator().manual_seed(0)
    return {"gradient": torch.rand(2, 3, generator=g), "leave-one-out": torch.randn(2, 3, generator=g)}


def test_the_pruning_explorer_stores_every_method_and_fraction_as_its_state_function_gives():
    importances = _fake_importances()
    view = mh.pruning_explorer(
        importances, lambda keep: float(keep.sum()), fractions=(0.0, 0.5, 1.0), metric="ρ", progress=False
    )
    data = stored(view, 2)
    assert data["function"] == "manyheads.viz.widgets.pruning_state"
    assert data["labels"]["fraction"] == ["0%", "50%", "100%"] and len(data["states"]) == 6
    for key, state in data["states"].items():
        m, f = (int(i) for i in key.split(","))
        values = {"method": data["grids"]["method"][m], "fraction": data["grids"]["fraction"][f]}
        assert mh.pruning_state(**data["fixed"], **values) == state
        heatmap, curves = state["panels"]
        removed = int(np.floor(values["fraction"] * 6))
        assert len(heatmap["crosses"]) == removed and curves["point"] == [values["fraction"], 6.0 - removed]
    assert "mh-kind--selection" in view.children[1]._dom_classes


@pytest.fixture(scope="module")
def minilm():
    return mh.load_encoder(device="cpu")


def test_chapter_4s_explorer_is_reproducible_from_its_fixed_data_and_within_budget(minilm):
    view = head_explorers.sentence_head_explorer(*minilm, [0, 320], 2, 8, "det", mh.RELATIONS)
    data = stored(view, 4)
    assert data["fixed"] == {} and data["grids"]["sentence"] == [0, 320] and len(data["states"]) == 2 * 6 * 12 * 7
    assert len(view.children[4].value) < MAX_STATES_BYTES / 2  # five sentences (the chapter's) stay under 2 MB
    head_explorers._sentence_attention.cache_clear()  # recomputed, as a test in a fresh process would
    state = head_explorers.sentence_head_state(sentence=320, layer=3, head=4, relation="amod")
    assert data["states"]["1,3,4,1"] == json.loads(json.dumps(state))
    panel = state["panels"][0]
    words = mh.natural_sentences()[0].words
    assert panel["xticks"] == list(words) and panel["boxes"] == [
        list(a) for a in mh.natural_sentences()[0].arcs("amod")
    ]
    # relation changes only the boxes; layer and head the map
    other = head_explorers.sentence_head_state(sentence=320, layer=3, head=4, relation="det")["panels"][0]
    assert other["values"] == panel["values"] and other["boxes"] != panel["boxes"]
    # pobj is scored from the preposition to its object, so its boxes are (preposition row, object column)
    pobj = head_explorers.sentence_head_state(sentence=2, layer=1, head=7, relation="pobj")["panels"][0]
    assert mh.grammar_sentences()[2].arcs("pobj") == [(5, 2)] and pobj["boxes"] == [[2, 5]]
    # the sliders name layers and heads from 1, as the chapter and its title do, and pass 0-based indices
    layer, head = view.children[1], view.children[2]
    assert (layer.description, head.description) == ("layer (from 1)", "head (from 1)")
    assert (layer.label, layer.value, head.label, head.value) == ("3", 2, "9", 8)
    assert data["labels"]["layer"] == [str(i) for i in range(1, 7)] and data["grids"]["layer"] == list(range(6))
    assert "head 3-9" in head_explorers.sentence_head_state(0, 2, 8, "det")["panels"][0]["title"]
    assert not any(":" in label for label in data["labels"]["sentence"])  # no internal indices in the dropdown


def test_chapter_6s_head_picker_reads_layers_and_heads_past_a_model_s_last_as_its_last(minilm):
    metrics = {k: [[0.5] * 12 for _ in range(6)] for k in ("distance", "entropy", "sink", "previous")}
    views = {"MiniLM": {"model": "encoder", "text": "A fine film ."}}
    head_explorers._share_model("encoder", *minilm)
    state = head_explorers.picked_head_state(views, {"MiniLM": metrics}, "MiniLM", 29, 11)
    assert state == head_explorers.picked_head_state(views, {"MiniLM": metrics}, "MiniLM", 5, 11)
    assert state["panels"][0]["title"].startswith("MiniLM: layer 5, head 11\n")
    assert state["panels"][0]["xticks"][0] == "[CLS]"


def test_chapter_6s_training_explorer_stores_one_state_per_snapshot():
    from dataclasses import replace

    run = mh.train_induction_model(
        seed=99, config=replace(mh.INDUCTION_RECIPE, steps=100), snapshot_every=50, progress=False
    )
    view = head_explorers.induction_checkpoint_explorer(run, snapshot_every=50, probe_half=4)
    data = stored(view, 1)
    assert data["grids"] == {"step": [0, 50, 100]} and data["initial"] == "2"
    state = head_explorers.induction_checkpoint_state(**data["fixed"], step=50)
    assert data["states"]["1"] == json.loads(json.dumps(state))
    before, induction, curves = state["panels"]
    assert before["shape"] == induction["shape"] == [9, 9] and before["xticks"][0] == "BOS"
    assert curves["vline"] == 50 and curves["title"] == "seed 99, step 50" and curves["span"] == 2
    assert data["states"]["0"]["panels"][1]["values"] != data["states"]["2"]["panels"][1]["values"]


@pytest.fixture(scope="module")
def smollm2():
    return mh.load_decoder(device="cpu")


def test_the_interlude_s_explorer_titles_each_layer_and_query_head_with_its_key_value_head(smollm2):
    text = "The cat sat on the mat."
    view = head_explorers.decoder_head_explorer(*smollm2, text, layer=15, head=3)
    data = stored(view, 2)
    assert data["fixed"] == {"text": text} and len(data["grids"]["layer"]) == 30 and len(data["states"]) == 270
    titles = {key: state["panels"][0]["title"] for key, state in data["states"].items()}
    assert (
        titles["3,4"] == "layer 3, query head 4 (K/V head 1)" and titles["4,8"] == "layer 4, query head 8 (K/V head 2)"
    )
    # nearly every head its own map (a few heads that only look at the first token coincide in uint8)
    assert len({state["panels"][0]["values"] for state in data["states"].values()}) > 250
    head_explorers._decoder_attention.cache_clear()
    assert head_explorers.decoder_head_state(text, 3, 4) == data["states"]["3,4"]
