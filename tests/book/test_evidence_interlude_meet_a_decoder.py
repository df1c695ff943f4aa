"""The interlude's evidence checks (tests/helpers/evidence/ch_interlude_meet_a_decoder.py) catch what issue 24's
reader found:
"mat" read as copying with no control, "early layers tend to look at the previous token" against the measurements,
and a decoding speed from one run on a busy machine; and what issue 35's first-half review found (a mean loss that
hides a ramp, losses without the uniform-guess reference, "two induction heads", Clark's 1-based head names, a range
that spans every layer, figures without captions)."""

from __future__ import annotations

import math

import nbformat
from helpers.evidence import ch_interlude_meet_a_decoder as interlude

FIXED = (
    'With no earlier copy the model gives "mat" a probability of 0.005, and after one copy 0.147. In the 3 '
    "sentences nobody has written before, one earlier copy raises its probability. On this sentence 4 of the 270 "
    "heads put at least half of their weight on the previous token."
)


def _nb(*markdown: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(text) for text in markdown]
    return nb


def _glued(**changes):
    glued = {
        "cat_alone": 0.005,
        "cat_copy": 0.147,
        "control_alone_max": 8e-5,
        "control_copy_min": 0.208,
        "copy_word": "raises",
        "n_prev_heads": 4,
        "n_first_heads": 172,
        "prev_top_layer": 11,
        "n_layers": 30,
    }
    return {k: v for k, v in (glued | changes).items() if v is not None}


def test_the_fixed_interlude_passes():
    assert interlude.check(_glued(), _nb(FIXED)) == []


def test_mat_as_evidence_of_copying_without_a_control_is_caught():
    old = (
        'And after "The cat sat on the", the model\'s most likely next token is "mat": it can use the earlier copy '
        "of the phrase."
    )
    assert any("no control" in p for p in interlude.check(_glued(), _nb(old)))
    assert any("no control beside it" in p for p in interlude.check(_glued(control_alone_max=None), _nb(FIXED)))
    overlapping = _glued(control_alone_max=0.3, control_copy_min=0.2)
    assert any("controls overlap" in p for p in interlude.check(overlapping, _nb(FIXED)))


def test_early_layers_against_the_measurement_is_caught():
    old = "Early layers tend to look at the previous token or the current one."
    assert any("early layers" in p for p in interlude.check(_glued(prev_top_layer=11), _nb(FIXED, old)))
    assert interlude.check(_glued(prev_top_layer=2), _nb(FIXED, old)) == []


def test_a_speed_from_one_run_is_caught():
    old = "On this machine it produced 8 tokens at about 1 tokens per second on the CPU."
    assert any("without its spread" in p for p in interlude.check(_glued(), _nb(FIXED, old)))
    with_spread = "It decoded 8 tokens at 11.2 tokens per second, 95 % interval [10.1, 12.0], on an AMD EPYC."
    assert interlude.check(_glued(), _nb(FIXED, with_spread)) == []


# Issue 35: what the first-half review (D-1, D-2, D-3, D-5, I2) and item 2 found in the interlude.

RAMP = (
    "That average hides a ramp (the shaded stretch in the figure). From token 9 of the second copy on, it costs 2.2 "
    "nats per token, against 10.8 for uniform guessing."
)


def test_the_second_copy_s_mean_without_its_ramp_is_caught():
    old = _glued(rep_second=3.2, rep_length=64)
    assert any("without its ramp" in p for p in interlude.check(old, _nb(FIXED)))
    fixed = _glued(rep_second=3.2, rep_length=64, rep_ramp=9, rep_settled=2.2)
    assert interlude.check(fixed, _nb(FIXED, RAMP)) == []
    assert any("never says" in p for p in interlude.check(fixed, _nb(FIXED)))
    assert any("above the copy's mean" in p for p in interlude.check(fixed | {"rep_settled": 4.0}, _nb(FIXED, RAMP)))
    assert any("outside the copy" in p for p in interlude.check(fixed | {"rep_ramp": 64}, _nb(FIXED, RAMP)))


def test_a_loss_without_the_uniform_guess_reference_is_caught():
    uniform = math.log(49152)
    old = _glued(vocab=49152, real_loss=3.5, shuffled_loss=7.2)
    found = interlude.check(old, _nb(FIXED))
    assert any(p.startswith("real_loss is glued without") for p in found)
    assert any(p.startswith("shuffled_loss is glued without") for p in found)
    fixed = old | {"real_loss_floor": uniform, "shuffled_loss_floor": uniform}
    assert interlude.check(fixed, _nb(FIXED)) == []
    assert any("real_loss" in p for p in interlude.check(fixed | {"real_loss_floor": 12.79}, _nb(FIXED)))


def test_two_induction_heads_instead_of_a_previous_token_head_and_an_induction_head_is_caught():
    old = (
        "Chapter 6 finds the heads that do it (induction heads) and shows that it takes two of them, in different "
        "layers, working together."
    )
    assert any("not named" in p for p in interlude.check(_glued(), _nb(FIXED, old)))
    new = (
        "Chapter 6 finds the heads that do it, called induction heads, and shows that copying like this takes two "
        "heads in different layers working together: typically a previous-token head in an earlier layer, and an "
        "induction head in a later one."
    )
    assert interlude.check(_glued(), _nb(FIXED, new)) == []


def test_a_head_named_from_1_is_caught():
    assert any("1-based" in p for p in interlude.check(_glued(), _nb(FIXED, "Start at head 4-2 and compare.")))
    assert interlude.check(_glued(), _nb(FIXED, "Start at head 15.3; query heads 0–2 share one.")) == []
    assert any("not named layer.head" in p for p in interlude.check(_glued(prev_heads_list="2-3, 3-2"), _nb(FIXED)))
    assert interlude.check(_glued(prev_heads_list="1.2, 2.1, 11.1, 16.0"), _nb(FIXED)) == []


def test_a_range_over_every_layer_is_caught():
    old = "Far more heads, 172 of them, in layers 0 to 29, put at least half on the first token."
    assert any("every layer" in p for p in interlude.check(_glued(), _nb(FIXED, old)))
    assert interlude.check(_glued(), _nb(FIXED, old.replace("29", "11"))) == []


def test_a_figure_without_a_caption_is_caught():
    nb = _nb(FIXED)
    figure = nbformat.v4.new_code_cell("plt.show()")
    figure.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    ]
    nb.cells.append(figure)
    assert any("without a caption" in p for p in interlude.check(_glued(), nb))
    figure.metadata["mystnb"] = {"figure": {"caption": "The loss on each token.", "name": "fig-x"}}
    assert interlude.check(_glued(), nb) == []
