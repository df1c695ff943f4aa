"""Chapter 7's evidence checks (tests/helpers/evidence/ch_07_grouped_query_attention.py) catch what issue 24's reader
found: a speed-up asserted against the page's own timing, uptraining with no from-scratch control, one random
grouping read as a ranking, the papers' figures missing, and quiz 4 crediting the KV cache with d_k."""

from __future__ import annotations

import nbformat
import pytest
from helpers.evidence import ch_07_grouped_query_attention as ch7

GOOD_QUIZ = """## Check yourself

**4.** Does the KV cache explain why head sizes stay at 64-128?

<details><summary>Answer</summary>

**b.** The cache grows with $g \\cdot d_k$, so 8 key/value heads of 128 cache as much as 16 of 64.

</details>
"""
OLD_QUIZ = """## Check yourself

**4.** Why do head sizes stay at 64-128 even in very large models?

- **b.** mostly the KV cache and the hardware's matrix units, more than expressiveness

<details><summary>Answer</summary>

**b.** The cache grows with $d_k$ per key/value head, and matrix units work on fixed-size tiles.

</details>
"""
BODY = (
    "Against 9 key/value heads, 1 key/value head was inconclusive here on this machine: a difference of +0.18 "
    "tokens per second, 95 % interval [-0.04, +0.44]. Where the interval contains 0, this machine cannot tell the "
    'versions apart, and the page says "inconclusive here" rather than quote a gain it did not measure.'
)


def _nb(*markdown: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(text) for text in markdown]
    return nb


def _glued(**changes):
    glued = {
        "bytes_long_9": 391.6,
        "bytes_long_1": 271.6,
        "predicted_long_1": 391.6 / 271.6,
        "toy0_sc5": 0.227,
        "toy1_sc5": 0.208,
        "toy_word_5": "ahead of",
        "toy_gap_5_low": 0.57,
        "toy_gap_5_high": 0.64,
        "toy_word_all": "level with",
        "toy_gap_all_low": 0.0,
        "toy_gap_all_high": 0.0,
        "grouping_word": "not measurably different from",
        "grouping_gap_low": -0.001,
        "grouping_gap_high": 0.007,
        "n_draws": 5,
        **ch7.PAPER_FIGURES,
        # each K/V variant's own parameters (B-1) and its 16-bit weights
        **{f"params_{g}": n for g, n in ((9, 147_786_048), (3, 134_515_008), (1, 130_091_328))},
        **{f"weights_long_{g}": 2 * n for g, n in ((9, 147_786_048), (3, 134_515_008), (1, 130_091_328))},
        # MiniLM's floor and the conversions' paired intervals against it (B-31)
        "base_rho_floor": 0.355,
        "below_floor_groups": "3, 2 and 1",
        "point_below_floor_groups": "3, 2 and 1",
        **{f"conv_mean_{g}_rho": r for g, r in ((6, 0.371), (4, 0.360), (3, 0.331), (2, 0.314), (1, 0.310))},
        **{f"rho_{g}_minus_floor_high": h for g, h in ((6, 0.05), (4, 0.01), (3, -0.004), (2, -0.02), (1, -0.03))},
    }
    for tag in ("short", "long"):
        for g in (3, 1):
            glued |= {
                f"speed_word_{tag}_{g}": "inconclusive here",
                f"diff_{tag}_{g}_low": -0.3,
                f"diff_{tag}_{g}_high": 0.4,
            }
    return glued | changes


def test_a_chapter_whose_words_follow_its_intervals_passes():
    assert ch7.check(_glued(), _nb(BODY, GOOD_QUIZ)) == []
    faster = _glued(speed_word_long_1="faster", diff_long_1_low=3.1, diff_long_1_high=3.5)
    assert ch7.check(faster, _nb("On this machine 1 key/value head was faster at 2,048 tokens.", GOOD_QUIZ)) == []


def test_a_speed_up_the_timing_contradicts_is_caught():
    # The reader's case: 9 / 3 / 1 K/V heads at 1.7 / 0.9 / 1.8 tokens per second, yet the text says sharing speeds it.
    said = _nb("Measured here, sharing keys and values speeds up decoding: 1 K/V head is faster than 9.", GOOD_QUIZ)
    problems = ch7.check(_glued(), said)
    assert problems and all("about this machine" in p for p in problems)
    # A verdict word that its own interval does not support.
    problems = ch7.check(_glued(speed_word_long_1="faster"), _nb(BODY, GOOD_QUIZ))
    assert problems == ["speed_word_long_1 says 'faster' but its interval [-0.3, 0.4] calls for 'inconclusive here'"]


def test_a_prediction_that_is_not_the_ratio_of_the_bytes_is_caught():
    assert ch7.check(_glued(predicted_long_1=2.3), _nb(BODY, GOOD_QUIZ))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"toy_word_5": "ahead of", "toy_gap_5_low": -0.1}, "toy_word_5 says 'ahead of'"),
        ({"toy0_sc5": None, "toy1_sc5": None}, "no from-scratch control"),
        ({"grouping_word": "higher than"}, "grouping_word says 'higher than'"),
        ({"grouping_word": "no different from"}, "grouping_word says 'no different from'"),
        ({"n_draws": 1}, "one draw"),
        ({"ainslie_gqa_time": 0.82}, "facts.md records 0.28"),
        ({"deepseek_mha_mmlu": None}, "deepseek_mha_mmlu is not glued"),
    ],
)
def test_uptraining_groupings_and_papers_are_checked(changes, expected):
    glued = {k: v for k, v in _glued(**changes).items() if v is not None}
    problems = ch7.check(glued, _nb(BODY, GOOD_QUIZ))
    assert any(expected in p for p in problems), problems


def test_averaging_beats_one_head_only_when_every_cell_says_so():
    summary = "## Summary\n\n- Averaging beats keeping one head; consecutive groups are no different from random ones."
    assert ch7.check(_glued(first_below=15, conv_cells=15), _nb(BODY, summary, GOOD_QUIZ)) == []
    problems = ch7.check(_glued(first_below=11, conv_cells=15), _nb(BODY, summary, GOOD_QUIZ))
    assert any("only 11 of 15 cells" in p for p in problems)


def test_one_draw_read_as_a_ranking_and_the_old_quiz_are_caught():
    ranking = _nb("**random groups** comes out on top here, with the best value in 12 of 15 cells.", GOOD_QUIZ)
    assert any("cells won" in p for p in ch7.check(_glued(), ranking))
    assert any("quiz 4" in p for p in ch7.check(_glued(), _nb(BODY, OLD_QUIZ)))


def test_a_byte_model_fed_one_parameter_count_for_variants_of_different_size_is_caught():
    """Issue 35, item 7 (B-1): the 3-K/V model's count given to all three variants."""
    n = 134_515_008
    one_count = _glued(**{f"params_{g}": n for g in (9, 3, 1)}, **{f"weights_long_{g}": 2 * n for g in (9, 3, 1)})
    problems = ch7.check(one_count, _nb(BODY, GOOD_QUIZ))
    assert any("one count for all of them is wrong" in p for p in problems), problems
    wrong_bytes = _glued(weights_long_9=2 * n)  # the right counts glued, but the bytes computed from one of them
    assert any("weights_long_9" in p for p in ch7.check(wrong_bytes, _nb(BODY, GOOD_QUIZ)))
    missing = {k: v for k, v in _glued().items() if not k.startswith("params_")}
    assert any("not glued" in p for p in ch7.check(missing, _nb(BODY, GOOD_QUIZ)))


def test_a_float32_timing_set_beside_the_16_bit_prediction_is_caught():
    """B-2: "a measured ratio of 1.83 against the 1.84 the byte model predicts" compared float32 with 16-bit."""
    like = (
        "It predicts {glue:text}`predicted_as_run_long_1:.2f` times; this run measured {glue:text}`ratio_long_1:.2f`."
    )
    assert ch7.check(_glued(), _nb(BODY, like, GOOD_QUIZ)) == []
    unlike = (
        "This run measured {glue:text}`ratio_long_1:.2f` times against the {glue:text}`predicted_long_1:.2f` predicted."
    )
    problems = ch7.check(_glued(), _nb(BODY, unlike, GOOD_QUIZ))
    assert any("16-bit prediction" in p for p in problems), problems


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"below_floor_groups": "2 and 1"}, "below_floor_groups says '2 and 1'"),
        ({"rho_6_minus_floor_high": -0.01}, "below_floor_groups says"),
        ({"base_rho_floor": None}, "floor (base_rho_floor) is not glued"),
        ({"point_below_floor_groups": "2 and 1"}, "mean-pooled ρ is below the floor (0.355) at ['3', '2', '1']"),
    ],
)
def test_the_conversions_below_the_floor_follow_their_intervals(changes, expected):
    glued = {k: v for k, v in _glued(**changes).items() if v is not None}
    problems = ch7.check(glued, _nb(BODY, GOOD_QUIZ))
    assert any(expected in p for p in problems), problems


def test_below_the_floor_is_not_claimed_when_no_interval_is_below_it():
    above = _glued(below_floor_groups="none", **{f"rho_{g}_minus_floor_high": 0.02 for g in (6, 4, 3, 2, 1)})
    assert ch7.check(above, _nb(BODY, GOOD_QUIZ)) == []
    said = _nb(BODY, "The converted model ranks pairs worse than no attention at all.", GOOD_QUIZ)
    assert any("no paired interval lies below 0" in p for p in ch7.check(above, said))
