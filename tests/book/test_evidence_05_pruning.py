"""Chapter 5's evidence check (tests/helpers/evidence/ch_05_pruning.py) on planted pages: each contradiction the reader
found in the chapter (issue 24) must be caught, and wording consistent with its numbers must pass."""

from __future__ import annotations

import nbformat
import pytest
from helpers.evidence import ch_05_pruning as ch5
from nbformat.v4 import new_markdown_cell, new_notebook

# Values of the kind the chapter glues (MiniLM's floors as the reader measured them; SmolLM2 and the toy model).
MEASURED = {
    "lee_base": 0.398,
    "lee_floor": 0.355,
    "sent_base": 0.186,
    "sent_floor": 0.219,
    "sent_floor_side": "about the same as",
    "lm_base": 5.07,
    "lm_floor": 12.51,
    "lm_uniform": 10.8,
    "lm_gradient_small": 20.0,
    "lm_gradient_large": 40.0,
    "lm_random_small": 0.0,
    "sent_floor_diff_low": -0.05,
    "sent_floor_diff_high": 0.12,
    "sym_one_d_head": 8.0,
    "sym_d_head": 8.0,
    "toy_pairs_clear": 1.0,
    "lee_n_lowers": 45.0,
    "n_tests": 288.0,
    "n_chance": 14.4,
    "n_uncorrected": 22.0,
    "n_holm": 5.0,
    "n_helpful_holm": 0.0,
    "lee_worst_word": "lowers",
    "lee_worst_low": -0.03,
    "lee_worst_high": -0.005,
    "sentiment_worst_word": "does not measurably change",
    "sentiment_worst_low": -0.09,
    "sentiment_worst_high": 0.02,
    "lee_last_loo": 11.0,
    "lee_last_grad": 1.0,
    "toy_pairs_worse": 4.0,
    "toy_n_pairs": 6.0,
    "toy_pairs_worse_word": "most",
    "toy_pair_word": "costs more than",
    "toy_pair_high": -0.01,
}

BOX = """```{admonition} Common misconceptions
:class: warning

- *"70-90 % of attention heads can be removed."* Not as a rule. On SmolLM2's next-token loss, gradient importance
  removed {glue:text}`lm_gradient_small:.0f` % of the heads before the loss rose by 0.1 nats per token.
- *"If no single head matters, most heads can go together."* In the toy model, {glue:text}`toy_pairs_worse` of
  {glue:text}`toy_n_pairs` pairs of quiet heads cost more together than their single costs add up to.
```
"""
SUMMARY = """## Summary

- Every experiment on heads needs its floor: MiniLM keeps ρ = {glue:text}`lee_floor:.3f` of
  {glue:text}`lee_base:.3f`, and its sentiment $R^2$ with no heads is {glue:text}`sent_floor_side` the unpruned one.
- Over {glue:text}`n_tests` tests, {glue:text}`n_uncorrected` uncorrected intervals exclude 0 where chance alone
  gives about {glue:text}`n_chance:.0f`; {glue:text}`n_holm` effects survive Holm's correction.
- its absolute value ignores the sign: leave-one-out puts {glue:text}`lee_last_loo` heads in the half it removes
  first, the gradient {glue:text}`lee_last_grad`.
- in the toy model {glue:text}`toy_pairs_worse` of {glue:text}`toy_n_pairs` pairs of quiet heads cost more together
  than apart ({glue:text}`toy_pairs_worse_word`).
"""
BODY = """Removing it {glue:text}`lee_worst_word` ρ. On sentiment removing it {glue:text}`sentiment_worst_word` $R^2$.
The pair {glue:text}`toy_pair_word` the sum. One explanation, which this experiment does not test, is that the two
heads partly do the same work.

On the CPU, removing half of the heads changes throughput by {glue:text}`speed_b1:+.0f` % at batch 1 (95 % interval
{glue:text}`speed_b1_low:+.0f` to {glue:text}`speed_b1_high:+.0f` %).

With all heads the loss is {glue:text}`lm_base:.2f`, with none {glue:text}`lm_floor:.2f`; gradient importance removes
{glue:text}`lm_gradient_large:.0f` % of the heads before the loss rises by 0.5 nats per token.

Four identical heads score {glue:text}`sym_acc_identical:.3f`, one head of their width {glue:text}`sym_acc_one:.3f`."""


def page(*texts: str):
    return new_notebook(cells=[new_markdown_cell("## Body\n\nMeasurements."), *map(new_markdown_cell, texts)])


def run(texts=(BODY, BOX, SUMMARY), **changes):
    return ch5.check({**MEASURED, **changes}, page(*texts))


def test_the_chapters_wording_with_its_numbers_passes():
    assert run() == []


@pytest.mark.parametrize(
    ("changes", "texts", "caught"),
    [
        # the reader's findings, as the chapter had them
        (
            {"lee_grad_10": 89.0},
            (
                "## Summary\n\n- within 10 %, gradient importance removes {glue:text}`lee_grad_10:.0f` % of "
                "MiniLM's heads",
            ),
            "similarity",
        ),
        ({}, ("```{note}\nTo run in about two minutes on a laptop CPU, the chapter keeps ...\n```",), "time claim"),
        ({}, ("## Summary\n\n- a few heads' removal even helps.",), "helps"),
        ({"sent_floor_side": "below"}, (SUMMARY,), "sentiment's floor"),
        # review B-12: R² on 32 sentences: "above" needs the paired interval above 0
        ({"sent_floor_side": "above"}, (SUMMARY,), "paired interval"),
        # review B-7: a tolerance as a share of the gap to a floor above ln V
        (
            {},
            ("Gradient importance removes {glue:text}`lm_gradient_large:.0f` % before 10 % of the way to the floor.",),
            "nats per token",
        ),
        # review B-9: a speed-up without its interval
        ({}, ("Removal changes throughput by {glue:text}`speed_b16:+.0f` % at batch 16.",), "without its interval"),
        # review B-13: four identical heads of width 8 against one head of width 32
        ({"sym_one_d_head": 32.0}, (BODY,), "width"),
        # review B-10: the redundancy reading stated as fact
        ({}, ("A head looks unimportant alone only because another head does the same work.",), "untested mechanism"),
        ({"toy_pairs_clear": 5.0}, (SUMMARY,), "clearly"),
        ({"lee_worst_high": 0.004}, (BODY,), "reaches 0"),
        ({"n_holm": 30.0}, (SUMMARY,), "more than"),
        ({"n_chance": 5.0}, (SUMMARY,), "chance alone"),
        ({"lee_last_grad": 11.0}, (SUMMARY,), "disagree"),
        (
            {"lee_n_lowers": 0.0},
            ("## Summary\n\n- its absolute value ignores the sign: {glue:text}`lee_n_lowers` heads lower the loss.",),
            "no head's removal",
        ),
        ({"toy_pairs_worse": 0.0, "toy_pairs_worse_word": "none"}, (SUMMARY,), "cost more together"),
        ({"toy_pairs_worse_word": "a minority"}, (SUMMARY,), "'a minority'"),
        ({"toy_pair_high": 0.02}, (BODY,), "strongest pair"),
        ({"lm_floor": 5.5}, (BOX,), "floor"),
        ({"lm_gradient_small": 80.0}, (BOX,), "not a rule"),
        ({"sentiment_worst_low": 0.01}, (BODY,), "excludes 0"),
    ],
)
def test_a_planted_contradiction_is_caught(changes, texts, caught):
    problems = run(texts, **changes)
    assert problems and any(caught in p for p in problems), problems


def test_helpful_removals_may_be_named_when_one_survives_the_correction():
    assert run(("## Summary\n\n- a few heads' removal even helps.",), n_helpful_holm=2.0) == []


def test_glue_roles_are_filled_in_with_their_format():
    nb = page("## Summary\n\nloss {glue:text}`lm_base:.2f` nats in {glue:text}`n_tests` tests")
    assert "loss 5.07 nats in 288 tests" in ch5.restating_text(nb, {"lm_base": 5.07, "n_tests": 288.0})
    assert ch5.restating_text(nbformat.v4.new_notebook(), {}) == ""
