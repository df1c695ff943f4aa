"""Chapter 2's evidence check (tests/helpers/evidence/ch_02_subspaces.py) on planted values: each contradiction
must be reported, and a consistent chapter must pass."""

from __future__ import annotations

import nbformat
import pytest
from helpers.evidence import ch_02_subspaces as ch2

GOOD = {
    "circuit_gap": 5e-17,
    "sum_gap": 3e-17,
    "toy_head_rank": 4.0,
    "toy_d_head": 4.0,
    "toy_full_rank": 12.0,
    "ch2_min_acc_2h": 1.0,
    "pair_share_min": 1.0,
    "num_rank_2h_max": 16.0,
    "ch2_d_head": 16.0,
    "eff_rank_2h_max": 6.0,
    "eff_rank_init_2h_min": 9.0,
    "eff_rank_1h_max": 6.0,
    "eff_rank_init_1h_min": 12.0,
    "angle_full_random_mean": 45.0,
    "angle_q_trained_mean": 37.5,
    "angle_k_trained_mean": 38.7,
    "angle_n_seeds_below": 3.0,
    "angle_top_first_max": 45.9,
    "angle_top_random_first": 63.4,
    "ch2_role_orders": 2.0,
    "ch2_steps": 300.0,
    "ch2_n_seeds": 3.0,
    **{f"{v}_outcome": "holds" for v in ("verdict_ch2_roles", "verdict_ch2_closer", "verdict_ch2_few")},
    **{f"{v}_steps": 300.0 for v in ("verdict_ch2_roles", "verdict_ch2_closer", "verdict_ch2_few")},
    "pos_share_most_min": 0.85,
    "pos_share_n_above": 3.0,
}
BODY = "## Ranks\nThe circuits use {glue:text}`eff_rank_2h_min` to {glue:text}`eff_rank_2h_max` directions."
BOX = """```{admonition} Common misconceptions
:class: warning

**"A head uses all of d_k."** Only {glue:text}`eff_rank_2h_min`–{glue:text}`eff_rank_2h_max` directions.
```"""


def _nb(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources]
    return nb


def test_a_consistent_chapter_passes():
    assert ch2.check(GOOD, _nb(BODY, BOX)) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"angle_q_trained_mean": 47.0}, "closer than random"),
        ({"angle_n_seeds_below": 1.0}, "lucky seed"),
        ({"angle_top_first_max": 70.0}, "effective subspaces"),
        ({"eff_rank_init_2h_min": 5.0}, "something training did"),
        ({"ch2_min_acc_2h": 0.6}, "solves both relations"),
        ({"pair_share_min": 0.55}, "pair-score order"),
        ({"num_rank_2h_max": 12.0}, "numerical rank"),
        ({"circuit_gap": 1e-3}, "disagree"),
        ({"ch2_role_orders": 1.0}, "decide which head"),
        ({"eff_rank_2h_max": 12.0, "eff_rank_init_2h_min": 13.0}, "a few directions"),
        ({"verdict_ch2_closer_outcome": "does not hold"}, "finds the same"),
        ({"verdict_ch2_few_steps": 200.0}, "the chapter trains 300"),
        ({"pos_share_most_min": 0.4}, "read mostly position"),
        ({"pos_share_n_above": 2.0}, "read mostly position"),
    ],
)
def test_a_claim_its_numbers_do_not_support_is_caught(change, found):
    problems = ch2.check({**GOOD, **change}, _nb(BODY, BOX))
    assert any(found in p for p in problems), problems


def test_a_box_quoting_a_value_the_body_never_shows_is_caught():
    assert ch2.check(GOOD, _nb("## Ranks\nNothing quoted.", BOX)) == [
        "the summary, box or quiz quotes eff_rank_2h_max, which the body never shows",
        "the summary, box or quiz quotes eff_rank_2h_min, which the body never shows",
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "a symmetric head like this one always\nfavours tokens that look like the query",
        "with a matrix that is neither symmetric nor positive definite",
    ],
)
def test_the_wordings_the_review_found_false_are_caught(sentence):
    problems = ch2.check(GOOD, _nb(BODY + "\n" + sentence, BOX))
    assert any("review 2-1, 2-2" in p for p in problems), problems
