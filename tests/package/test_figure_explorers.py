"""manyheads.viz.explorers.figure_explorer: a figure explorer under a kernel whose states on its controls' grids are
saved with it for the book's pages (the page script is tested in tests/book/test_explorer_pages.py)."""

from __future__ import annotations

import importlib
import io
import json

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest
import torch
from ipywidgets.embed import dependency_state, embed_data

import manyheads as mh
from manyheads.viz import widgets as course
from manyheads.viz.explorers import MAX_GRID, control_grid, figure_explorer, panels_figure, state_key


def stored(view: widgets.VBox, n_controls: int) -> dict:
    """The JSON the explorer saved for the page (the hidden HTML widget after the controls)."""
    text = view.children[n_controls].value
    start = text.index(">") + 1
    return json.loads(text[start : text.rindex("</script>")])


def toy_state(a: float, pick: int, scale: float) -> dict:
    bars = {"kind": "bar", "x": ["p", "q"], "y": [a * scale, pick], "colors": ["#000"] * 2}
    return {"size": [4, 2], "panels": [bars]}


def png(spec: dict) -> bytes:
    fig = panels_figure(spec)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def test_a_figure_explorer_stores_every_state_of_its_grid_and_draws_the_same_under_a_kernel():
    a = widgets.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.25)
    pick = widgets.Dropdown(options=[("one", 1), ("three", 3)], value=3)
    view = figure_explorer("toy", toy_state, fixed={"scale": 2.0}, a=a, pick=pick)
    data = stored(view, 2)
    assert data["function"] == f"{__name__}.toy_state" and data["fixed"] == {"scale": 2.0}
    assert data["grids"] == {"a": [0.0, 0.25, 0.5, 0.75, 1.0], "pick": [1, 3]}
    assert data["labels"] == {"pick": ["one", "three"]}
    assert data["initial"] == "2,1" and len(data["states"]) == 10
    assert data["states"][state_key([3, 0])] == toy_state(0.75, 1, 2.0)
    image, message = view.children[3], view.children[-1]
    assert bytes(image.value) == png(toy_state(0.5, 3, 2.0)) and message.value == ""
    a.value = 0.75  # Python redraws from the same state function, as the page draws the stored state
    assert bytes(image.value) == png(data["states"]["3,1"])
    assert view._dom_classes == ("mh-explorer", "mh-explorer--toy")
    assert a._dom_classes == ("mh-control", "mh-control--a", "mh-kind--float")
    assert pick._dom_classes == ("mh-control", "mh-control--pick", "mh-kind--choice")
    assert image._dom_classes == ("mh-explorer-view",) and view.children[2]._dom_classes == ("mh-explorer-states",)
    # what the page reads travels with the saved state
    state = embed_data(views=[view], state=dependency_state(view))["manager_state"]["state"]
    assert "mh-states-data" in state[view.children[2].model_id]["state"]["value"]
    plt.close("all")


def test_a_figure_explorer_refuses_grids_it_cannot_store():
    with pytest.raises(ValueError, match=f"has 41 values; a stored-state explorer allows {MAX_GRID}"):
        control_grid("a", widgets.FloatSlider(value=0, min=-10, max=10, step=0.5))
    with pytest.raises(ValueError, match="must lie on the grid"):
        control_grid("a", widgets.FloatSlider(value=0.3, min=0, max=1, step=0.25))
    with pytest.raises(TypeError, match="control 'n' is a IntText"):
        control_grid("n", widgets.IntText())
    with pytest.raises(ValueError, match="identifier"):
        figure_explorer("two words", toy_state, a=widgets.FloatSlider())
    assert control_grid("a", widgets.FloatSlider(value=-90, min=-90, max=90, step=15)) == list(range(-90, 91, 15))


@pytest.mark.parametrize(
    ("build", "n_controls", "grids"),
    [
        (lambda: mh.one_softmax_widget(), 2, {"gap": 13, "other": 17}),
        (
            lambda: course.plane_projection_widget(torch.eye(3), ["x", "y", "z"], query=1, azimuth=90.0),
            3,
            {"azimuth": 13, "elevation": 13, "query_token": 3},
        ),
    ],
    ids=["one_softmax", "plane_projection"],
)
def test_the_chapters_figure_explorers_store_what_their_state_function_gives(build, n_controls, grids):
    view = build()
    data = stored(view, n_controls)
    assert {name: len(grid) for name, grid in data["grids"].items()} == grids
    assert all(len(grid) <= MAX_GRID for grid in data["grids"].values())
    module, _, function = data["function"].rpartition(".")
    state = getattr(importlib.import_module(module), function)
    keys = sorted(data["states"])
    for key in (keys[0], keys[len(keys) // 2], keys[-1]):
        values = {n: data["grids"][n][int(i)] for n, i in zip(data["controls"], key.split(","))}
        assert json.loads(json.dumps(state(**data["fixed"], **values))) == data["states"][key]
    assert data["states"][keys[0]] != data["states"][keys[1]]
    assert len(view.children[n_controls].value) < 2_000_000
    plt.close("all")


def test_panels_figure_draws_bars_and_scatters():
    spec = course.plane_projection_state(torch.eye(3).tolist(), ["x", "y", "z"], 30.0, 15.0, 0)
    fig = panels_figure(spec)
    left, right = fig.axes
    assert left.get_title().startswith("tokens projected") and right.get_ylabel() == "attention weight"
    assert len(right.patches) == 3 and len(left.texts) == 3
    plt.close(fig)


def test_the_one_softmax_explorer_fills_the_other_keys_with_tokens_it_does_not_want():
    # Review finding 1-3: a filler equal to a wanted token made the output's bar for it look like the head's choice.
    vocab = ["A", "B", "C", "D", "E", "F"]
    spec = course.one_softmax_state(0.0, -2.0, vocab, token_a=2, token_b=4)
    tokens = [note[2] for note in spec["panels"][0]["notes"]]
    assert tokens[3] == "C" and tokens[1] == "E" and not {"C", "E"} & {tokens[0], tokens[2], tokens[4]}
    output = dict(zip(vocab, spec["panels"][1]["y"]))
    assert output["C"] == output["E"] > max(v for k, v in output.items() if k not in "CE")  # gap 0: a tie
    with pytest.raises(ValueError):
        course.one_softmax_state(0.0, -2.0, ["A", "B"], token_a=0, token_b=1)  # no filler left
