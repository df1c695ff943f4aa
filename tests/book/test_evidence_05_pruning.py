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
    "sent_floor_side": "above",
    "lm_base": 5.07,
    "lm_floor": 12.51,
    "lm_gradient_10": 40.0,
    "lm_random_10": 0.0,
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
    "toy_pairs_worse_word": "about half",
    "toy_pair_word": "costs more than",
    "toy_pair_high": -0.01,
}

BOX = """```{admonition} Common misconceptions
:class: warning

- *"70-90 % of attention heads can be removed."* Not as a rule. On SmolLM2's next-token loss, gradient importance
  removed {glue:text}`lm_gradient_10:.0f` % of the heads before the loss rose 10 % of the way to its floor.
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
The pair {glue:text}`toy_pair_word` the sum."""


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
        ({"lee_worst_high": 0.004}, (BODY,), "reaches 0"),
        ({"n_holm": 30.0}, (SUMMARY,), "more than"),
        ({"n_chance": 5.0}, (SUMMARY,), "chance alone"),
        ({"lee_last_grad": 11.0}, (SUMMARY,), "disagree"),
        ({"toy_pairs_worse": 0.0, "toy_pairs_worse_word": "none"}, (SUMMARY,), "cost more together"),
        ({"toy_pairs_worse_word": "a minority"}, (SUMMARY,), "'a minority'"),
        ({"toy_pair_high": 0.02}, (BODY,), "strongest pair"),
        ({"lm_floor": 5.5}, (BOX,), "floor"),
        ({"lm_gradient_10": 80.0}, (BOX,), "not a rule"),
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
