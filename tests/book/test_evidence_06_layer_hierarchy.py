"""Chapter 6's evidence check (tests/helpers/evidence/ch_06_layer_hierarchy.py) on planted pages: each contradiction
the reader found in the chapter (issue 24) must be caught, and the chapter's present wording, with consistent
numbers, must pass."""

from __future__ import annotations

import nbformat
import pytest
from helpers.evidence import ch_06_layer_hierarchy as ch6
from nbformat.v4 import new_markdown_cell, new_notebook

# The chapter's glued values, as they were measured (toy seeds 0 and 1, SmolLM2), plus the controls of issue 24.
MEASURED = {
    "toy0_ind": 0.73,
    "toy1_ind": 0.79,
    "toy0_max_dup": 0.05,
    "toy1_max_dup": 0.08,
    "toy0_max_prev": 0.09,
    "toy1_max_prev": 0.79,
    "toy0_k_all": 0.73,
    "toy0_q_all": 0.14,
    "toy1_k_all": 0.07,
    "toy1_q_all": 0.83,
    "toy0_jump_share": 0.27,
    "toy1_jump_share": 0.62,
    "dec_distance_argmin": 11.0,
    "dec_entropy_argmax": 0.0,
    "dec_small_layers": 23.0,
    "dec_layers": 30.0,
    "n_sink_layers": 14.0,
    "n_sink_layers_cheap": 12.0,
    "top_copy_word": "raises",
    "top_copy": 5.1,
    "top_copy_low": 4.2,
    "top_copy_high": 6.0,
    "top_news_word": "raises",
    "top_news": 0.08,
    "top_news_low": 0.03,
    "top_news_high": 0.14,
    "random_copy_min": -0.1,
    "random_copy_max": 0.4,
    "control_verdict": "far below the chosen heads' change",
    "content_min": 0.46,
    "offset_max": 0.004,
    # issue 35: the layer removal's floor and intervals (B-20, B-21), the budget checks' outcomes (item 1)
    "lee_base": 0.398,
    "lee_base_floor": 0.355,
    "sent_base": 0.186,
    "sent_base_floor": 0.219,
    "sink_cheap_low": 0.64,
    "sink_cheap_high": 0.97,
    "other_cheap_low": 0.39,
    "other_cheap_high": 0.84,
    "dec_worst_layer": 1.0,
    "mean_worst_layer": 1.0,
    "verdict_one_layer_outcome": "holds",
    "verdict_needs_layer0_outcome": "holds",
    "verdict_routes_outcome": "holds",
    "verdict_sharpness_outcome": "holds",
}

BOX = """```{admonition} Common misconceptions
:class: warning

- *"Early layers do syntax, late layers do semantics."* SmolLM2's most local layer is layer
  {glue:text}`dec_distance_argmin`, {glue:text}`dec_local_where`; of its {glue:text}`n_sink_layers` layers whose
  attention goes mostly to the BOS token, {glue:text}`sink_cheap_word` cost less than 0.1 nats when removed.
- *"An induction head is one head."* In this chapter's toy models, {glue:text}`toy_circuit`.
```
"""
SUMMARY = """## Summary

- The most local layer is {glue:text}`dec_distance_argmin`, {glue:text}`dec_local_where`.
- A 2-layer model forms an induction head ({glue:text}`toy_change_summary`).
- Ablating them {glue:text}`top_copy_word` the held-out loss by {glue:text}`top_copy:+.2f`, and
  {glue:text}`top_news_word` the loss on news text; on shifted copies {glue:text}`content_verdict`.
"""
CONSISTENT = {
    "sink_cheap_word": "most",
    "toy_circuit": "in seed 0 it reads layer-0 heads that neither the previous-token nor the duplicate-token score "
    "singles out, through its queries; in seed 1 it reads a previous-token head, through its keys",
    "toy_change_summary": "in seed 0 gradually; in seed 1 suddenly",
    "dec_local_where": "above the bottom third of the model",
    "content_verdict": "all of them find the target by its content",
}


def page(*texts: str):
    return new_notebook(cells=[new_markdown_cell("## Body\n\nMeasurements."), *map(new_markdown_cell, texts)])


def run(texts=(BOX, SUMMARY), **changes):
    glued = {**MEASURED, **CONSISTENT, **changes}
    return ch6.check(glued, page(*texts))


def test_the_chapters_wording_with_its_numbers_passes():
    assert run() == []


@pytest.mark.parametrize(
    ("changes", "texts", "caught"),
    [
        # the reader's findings, as the chapter had them
        (
            {},
            (
                "## Summary\n\n- in seed 1 a previous-token head through its keys (K-composition), in seed 0 a "
                "duplicate-token head through its queries.",
            ),
            "duplicate-token",
        ),
        (
            {},
            (
                "```{admonition} Common misconceptions\n\n- the layers whose attention is mostly on sinks still "
                "matter when removed\n```",
            ),
            "still matter",
        ),
        (
            {},
            ("## Summary\n\n- real tendencies, such as SmolLM2's local bottom layers and BOS-dominated upper layers",),
            "bottom layers",
        ),
        ({}, ("## Summary\n\n- a 2-layer model forms an induction head in a sudden phase change.",), "sudden phase"),
        # generated words that a rerun could leave behind their numbers
        ({"toy_change_summary": "in seed 0 suddenly; in seed 1 suddenly"}, (BOX, SUMMARY), "called sudden"),
        ({"toy_circuit": "in seed 0 it reads a previous-token head, through its keys"}, (BOX, SUMMARY), "keys"),
        ({"top_copy_low": -0.3}, (BOX, SUMMARY), "raises"),
        ({"top_news_word": "does not measurably change"}, (BOX, SUMMARY), "does not measurably"),
        ({"random_copy_max": 4.5}, (BOX, SUMMARY), "far below"),
        ({"content_min": 0.02}, (BOX, SUMMARY), "match content"),
        ({"sink_cheap_word": "a minority"}, (BOX, SUMMARY), "sink-dominated"),
        ({"dec_local_where": "in the bottom third of the model"}, (BOX, SUMMARY), "most local layer"),
    ],
)
def test_a_planted_contradiction_is_caught(changes, texts, caught):
    problems = run(texts, **changes)
    assert problems and any(caught in p for p in problems), problems


def test_the_bodys_per_seed_statements_follow_the_scores():
    body = (
        "Seed 1 has the textbook circuit. - **Seed 0 (no previous-token head).** None of its layer-0 heads is a "
        "previous-token or a duplicate-token head by the scores above."
    )
    assert run((body, BOX, SUMMARY)) == []
    assert any("textbook" in p for p in run((body,), toy1_max_prev=0.2))
    assert any("no previous-token head" in p for p in run((body,), toy0_max_prev=0.7))
    assert any("no duplicate-token head" in p for p in run((body,), toy0_max_dup=0.6))


def test_local_bottom_layers_pass_when_the_most_local_layer_is_a_bottom_one():
    assert run(("## Summary\n\n- SmolLM2's local bottom layers",), dec_distance_argmin=1.0) == []


def test_glue_roles_are_filled_in_with_their_format():
    nb = page("## Summary\n\nby {glue:text}`top_copy:+.2f` nats in {glue:text}`dec_layers` layers")
    assert "by +5.10 nats in 30 layers" in ch6.restating_text(nb, {"top_copy": 5.1, "dec_layers": 30.0})
    assert ch6.restating_text(nbformat.v4.new_notebook(), {}) == ""


# Issue 35: the chapter's new wording (verdicts from training, the layer removal's floor and intervals).
SUMMARY_CHECKS = """## Summary

- Each 2-layer model forms an induction head, with a sharpness that varies between seeds. Checked at five times the
  steps over three seeds: that one layer forms no induction head holds; that every 2-layer seed builds it on layer 0
  holds; that seeds take different routes holds; that the sharpness varies between seeds holds.
"""
BODY_LAYERS = (
    "For similarity, removing all the heads costs only 0.043, so the similarity task cannot show that any layer is "
    "indispensable. Of the other layers: the two intervals overlap, so on these layers a sink-dominated layer is not "
    "measurably cheaper to remove. Under mean ablation layer 1 is still the costliest. So seed 0's score rises "
    "gradually and seed 1's suddenly."
)


def test_the_issue_35_wording_with_its_numbers_passes():
    assert run((BODY_LAYERS, SUMMARY_CHECKS)) == []


@pytest.mark.parametrize(
    ("changes", "texts", "caught"),
    [
        ({"verdict_one_layer_outcome": "does not hold"}, (SUMMARY_CHECKS,), "one layer forms no induction head"),
        ({"verdict_sharpness_outcome": "does not hold"}, (SUMMARY_CHECKS,), "sharpness varies"),
        ({}, ("No MiniLM layer is indispensable for these two tasks.",), "dispensable"),
        ({"lee_base_floor": 0.05}, (BODY_LAYERS,), "similarity task cannot show a layer indispensable"),
        (
            {"sent_base_floor": 0.0375, "sent_base": 0.294},
            ("so the sentiment task cannot show that any layer is indispensable",),
            "sentiment task cannot show",
        ),
        ({"sink_cheap_low": 0.9, "other_cheap_high": 0.6}, (BODY_LAYERS,), "intervals overlap"),
        ({}, ("the intervals do not overlap: sink-dominated layers are cheaper to remove",), "intervals are apart"),
        ({"mean_worst_layer": 5.0}, (BODY_LAYERS,), "still the costliest"),
        ({"toy0_jump_share": 0.55}, (BODY_LAYERS,), "rises gradually"),
        ({"toy1_jump_share": 0.45}, (BODY_LAYERS,), "rises suddenly"),
    ],
)
def test_a_planted_contradiction_of_issue_35_is_caught(changes, texts, caught):
    problems = run(texts, **changes)
    assert problems and any(caught in p for p in problems), problems
