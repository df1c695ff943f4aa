"""Chapter 4's evidence check (tests/helpers/evidence/ch_04_specialization.py) on planted values: each contradiction
must be reported, and a consistent chapter must pass."""

from __future__ import annotations

import re

import nbformat
import pytest
from helpers.evidence import ch_04_specialization as ch4

GOOD = {
    "n_layers": 6.0,
    "n_cls_heads": 23.0,
    "n_sep_heads": 0.0,
    "cls_max_value": 0.56,
    "even_share": 0.043,
    "head_det": "4-2",
    "head_dobj": "3-1",
    "n_beat": 7.0,
    "n_heldout_beat": 3.0,
    "n_relations": 7.0,
    "heldout_min": 69.6,
    "layer_others_max": 27.3,
    "coref_acc": 99.2,
    "coref_nearest": 54.2,
    "coref_hand_low": 75.7,
    "coref_hand_same_head": 100.0,
    "coref_hand_high": 100.0,
    "toy_min_acc": 1.0,
    "toy_min_share": 0.96,
    "toy_untrained_max": 0.18,
    "toy_n_assignments": 3.0,
    "view_entropy_0": 1.0,
    "view_entropy_3": 1.71,
    "view_entropy_8": 1.06,
    "n_heldout_below": 2.0,
    "n_heldout_tied": 1.0,
    "heldout_below": "poss (78.6 % against 85.7 %) and nsubj (80.0 % against 83.3 %)",
    "heldout_tied": "amod (100.0 % each)",
    "verdict_toy_specialize_outcome": "holds",
    "verdict_toy_roles_outcome": "holds",
    "head_det_layer": 4.0,
    "head_det_head": 2.0,
    "head_det_code": "(3, 1)",
}
BODY = "## Emergence\nEach head puts at least {glue:text}`toy_min_share:.2f` on one offset."
SUMMARY = "## Summary\n- Roles emerge: at least {glue:text}`toy_min_share:.2f`.\n\n**Exercises.** Next."


def _nb(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources]
    return nb


def test_a_consistent_chapter_passes():
    assert ch4.check(GOOD, _nb(BODY, SUMMARY)) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"toy_min_share": 0.6}, "almost all its attention"),
        ({"toy_untrained_max": 0.7}, "almost all its attention"),
        ({"toy_n_assignments": 1.0}, "depend on the seed"),
        ({"head_det": "6-2"}, "middle layers"),
        ({"n_heldout_beat": 8.0}, "more relations beat"),
        ({"layer_others_max": 80.0}, "other heads of their layer"),
        ({"coref_nearest": 99.9}, "nearest mention"),
        ({"n_sep_heads": 30.0}, "[CLS] over [SEP]"),
        ({"toy_min_acc": 0.8}, "solves the task"),
        ({"view_entropy_8": 2.0}, "spread out most"),
        ({"n_heldout_below": 0.0, "heldout_below": "none"}, "fall below the offset"),
        ({"n_heldout_tied": 0.0, "heldout_tied": "none"}, "tie with the offset"),
        ({"n_heldout_below": 4.0}, "beat, lose to or tie"),
        ({"verdict_toy_roles_outcome": "does not hold"}, "verdict_toy_roles is taught as holding"),
        ({"verdict_toy_specialize_outcome": "does not hold"}, "verdict_toy_specialize is taught as holding"),
        ({"head_det_code": "(4, 2)"}, "do not agree"),
        ({"head_det_layer": 3.0}, "do not agree"),
    ],
)
def test_a_claim_its_numbers_do_not_support_is_caught(change, found):
    problems = ch4.check({**GOOD, **change}, _nb(BODY, SUMMARY))
    assert any(found in p for p in problems), problems


def test_a_summary_quoting_a_value_the_body_never_shows_is_caught():
    summary = SUMMARY.replace("Roles emerge", "Roles emerge ({glue:text}`toy_untrained_max:.2f` untrained)")
    assert ch4.check(GOOD, _nb(BODY, summary)) == [
        "the summary, box or quiz quotes toy_untrained_max, which the body never shows"
    ]


# What the first-half review (issue 35) found in the chapter's text, which must not come back: (pattern, finding).
FIXED = [
    (r"as Clark et al\. found in BERT-base", "4-1: Clark et al. ran no held-out selection"),
    (r"property of the particular training run", "4-2: two different models, an untested 'parking' role"),
    (r"a retrained BERT would have it", "4-3: a prediction stated as fact"),
    (r"row = dependent, column = its head\)", "4-4: pobj is boxed from the preposition"),
    (r"where gender does not help", "4-6: it and they still carry number and animacy"),
]


@pytest.mark.parametrize(("pattern", "finding"), FIXED, ids=[f[:4] for _p, f in FIXED])
def test_a_fixed_finding_does_not_come_back(pattern, finding):
    from manyheads.course.layout import REPO

    nb = nbformat.read(REPO.chapters_dir / "04_specialization.ipynb", as_version=4)
    text = " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")
    assert not re.search(pattern, text, re.IGNORECASE), finding
