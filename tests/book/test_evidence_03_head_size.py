"""Chapter 3's evidence check (tests/helpers/evidence/ch_03_head_size.py) on planted values: each contradiction
must be reported, and a consistent chapter must pass."""

from __future__ import annotations

import re

import nbformat
import pytest
from helpers.evidence import ch_03_head_size as ch3

GOOD = {
    "mha_out_diff": 1.2e-7,
    "mha_weight_diff": 1.5e-7,
    "ratio_no_wo": 4 / 3,
    "softmax_share_h1": 0.0012,
    "softmax_share_h128": 0.135,
    "sweep_worse_h1": 0.17,
    "sweep_middle_min": 0.998,
    "far_diff": -0.2,
    "far_low": -0.37,
    "far_high": -0.03,
    "far_word": "worse",
    "sweep_worse_h16": 0.8,
    "sweep_dhead_max": 8.0,
    "sweep_seq_len": 12.0,
    "lr_tv_1": 0.30,
    "lr_tv_2": 0.155,
    "lr_tv_half": 0.036,
    "lr_exact": 0.001,
    "lr_exact_from": 7.0,
    "lr_n": 8.0,
    "lr_tv_uniform": 0.42,
    "verdict_one_head_outcome": "holds",
    "verdict_plateau_outcome": "holds",
    "verdict_width_one_outcome": "does not hold",
    "one_long_max": 0.23,
    "thin_long_min": 0.991,
    "record_vs_page": 0.0,
}
BODY = "## Sweep\nOne head averages {glue:text}`sweep_worse_h1:.2f`."
SUMMARY = "## Summary\n- One head fails ({glue:text}`sweep_worse_h1:.2f`).\n\n**Exercise.** Next."


def _nb(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources]
    return nb


def test_a_consistent_chapter_passes():
    assert ch3.check(GOOD, _nb(BODY, SUMMARY)) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"far_high": 0.05}, "far_word is 'worse'"),  # "worse" with an interval that contains 0
        ({"far_word": "not measurably different"}, "far_word"),
        ({"far_high": 0.05, "far_word": "not measurably different"}, "lose at both ends"),
        ({"sweep_worse_h1": 0.7}, "one head does not solve"),
        ({"sweep_middle_min": 0.9}, "plateau solves"),
        ({"sweep_worse_h16": 0.1}, "milder"),
        ({"lr_exact_from": 8.0}, "start at n - 1"),
        ({"lr_tv_2": 0.35}, "improve with every added dimension"),
        ({"lr_tv_uniform": 0.2}, "even attention"),
        ({"ratio_no_wo": 1.5}, "not 4/3"),
        # the budget check: a record that turns, or numbers that no longer support the page's account of it
        ({"verdict_width_one_outcome": "holds"}, "catch up"),
        ({"thin_long_min": 0.9}, "catch up"),
        ({"verdict_one_head_outcome": "does not hold"}, "one head is said to stay far below"),
        ({"one_long_max": 0.8}, "one head is said to stay far below"),
        ({"verdict_plateau_outcome": "does not hold"}, "plateau is said to solve"),
        ({"record_vs_page": 0.1}, "start from this page's runs"),
    ],
)
def test_a_claim_its_numbers_do_not_support_is_caught(change, found):
    problems = ch3.check({**GOOD, **change}, _nb(BODY, SUMMARY))
    assert any(found in p for p in problems), problems


def test_a_summary_quoting_a_value_the_body_never_shows_is_caught():
    summary = SUMMARY.replace("fails", "fails at {glue:text}`sweep_worse_h16:.2f` and")
    assert ch3.check(GOOD, _nb(BODY, summary)) == [
        "the summary, box or quiz quotes sweep_worse_h16, which the body never shows"
    ]


# What the first-half review (issue 35) found in the chapter's text, which must not come back: (pattern, finding).
FIXED = [
    (r"heads of width 1 degrade", "3-1: the thin-head dip is slow learning at 200 steps, not a degradation"),
    (r"what carries over is the mechanism", "3-1: the thin-head 'mechanism' was not shown"),
    (r"when \$d_k < n\$, there are patterns it cannot produce", "3-2: with independent tokens the threshold is n - 1"),
    (r"below the sequence length some attention patterns cannot", "3-2: the summary misstated what was measured"),
    (r"gets no closer than", "3-3: the prose quoted the best target where the table shows the worst"),
    (r"has the same shape on a real task", "3-4: 'a similar ordering', from single runs"),
    (r"which is why the effect shows up", "3-5: the bottleneck is one hypothesis for the large-h decline"),
    (r"list the same 65 million", "3-8: the (A) rows leave the parameter column blank"),
]


@pytest.mark.parametrize(("pattern", "finding"), FIXED, ids=[f[:4] for _p, f in FIXED])
def test_a_fixed_finding_does_not_come_back(pattern, finding):
    from manyheads.course.layout import REPO

    nb = nbformat.read(REPO.chapters_dir / "03_head_size.ipynb", as_version=4)
    text = " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")
    assert not re.search(pattern, text, re.IGNORECASE), finding
