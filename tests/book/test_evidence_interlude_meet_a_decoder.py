"""The interlude's evidence checks (tests/helpers/evidence/ch_interlude_meet_a_decoder.py) catch what issue 24's
reader found:
"mat" read as copying with no control, "early layers tend to look at the previous token" against the measurements,
and a decoding speed from one run on a busy machine."""

from __future__ import annotations

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
