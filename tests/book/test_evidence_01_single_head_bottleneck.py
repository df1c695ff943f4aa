"""Chapter 1's evidence check (tests/helpers/evidence/ch_01_single_head_bottleneck.py) on planted notebooks: each
contradiction must be reported, and a consistent chapter must pass."""

from __future__ import annotations

import nbformat
import pytest
from helpers.evidence import ch_01_single_head_bottleneck as ch1

BODY = """## Experiment
Doubling the width {glue:text}`wide_word` the worse relation ({glue:text}`wide_diff:+.2f`).
{glue:text}`solved_multi` of {glue:text}`n_multi_runs` multi-head runs solve both; at most
{glue:text}`concat_acc_max:.3f` after merging."""
SUMMARY = """## Summary
- {glue:text}`solved_multi` of {glue:text}`n_multi_runs` runs; width {glue:text}`wide_word` it.

**Next.** Chapter 2."""
BOX = """```{admonition} Common misconceptions
:class: warning

**"Concatenating first is the same."** No: at most {glue:text}`concat_acc_max:.3f`.
```"""

GOOD = {
    "var_raw": 63.9,
    "var_scaled": 1.0,
    "order_gap_one_head": 0.0,
    **{f"{k}_{f}": v for k in ("h2", "h4") for f, v in (("low", 0.6), ("high", 1.0), ("word", "raise"))},
    "wide_low": -0.3,
    "wide_high": 0.2,
    "wide_word": "does not measurably change",
    "n_commit_h1": 2.0,
    "n_split_h1": 1.0,
    "n_seeds": 3.0,
    "worse_h1": 0.1,
    "solved_h1wide": 0.0,
    "untrained_mass": 0.16,
    "small_n_both": 1.0,
    "concat_drop_min": 0.32,
    "concat_acc_max": 0.68,
    "concat_acc_heads": 0.999,
    "n_role_orders": 2.0,
    "solved_single": 0.0,
    "solved_multi": 6.0,
    "n_multi_runs": 6.0,
    "n_divide_2h": 3.0,
    "n_steps": 300.0,
    "chance": 0.03125,
    "verdict_single_head_check_steps": 1500.0,
    "verdict_single_head_check_seeds": 3.0,
    "record_chapter_gap": 1e-4,
    "long_best_gain": 0.55,
    "long_best_first_half": 1050.0,
    "long_multi_first_half": 150.0,
    "long_n_committed": 5.0,
    "long_committed_worse_max": 0.037,
    "sdpa_diff_torch": 0.0,
    "sdpa_diff_package": 0.0,
    "sdpa_agreement": "exactly",
    "concat_is_one_head_gap": 0.0,
    "concat_identity": "exactly",
    "concat_heads_phrase": "gets at least 0.999 on both relations",
}
CAPTIONS = {
    "fig-learning-curves": "Accuracy during the chapter's 300 training steps. In 300 steps no single head does.",
    "fig-longer-budget": "The worse relation over 1,500 training steps (3 seeds); the band: this chapter's 300 steps.",
}


def _nb(*sources: str, captions: dict | None = None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources]
    for name, text in (CAPTIONS if captions is None else captions).items():
        nb.cells.append(
            nbformat.v4.new_code_cell("plt.show()", metadata={"mystnb": {"figure": {"name": name, "caption": text}}})
        )
    return nb


def test_a_consistent_chapter_passes():
    assert ch1.check(GOOD, _nb(BODY, BOX, SUMMARY)) == []


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ({"wide_word": "raises"}, "wide_word is 'raises'"),  # "helps" with an interval containing 0
        ({"h2_low": -0.1}, "h2_word is 'raise'"),
        ({"concat_drop_min": 0.05}, "'much worse'"),
        ({"small_n_both": 0.0}, "'sometimes'"),
        ({"n_role_orders": 1.0}, "head roles change with the seed"),
        ({"solved_h1wide": 1.0}, "still has to choose"),
        ({"untrained_mass": 0.9}, "untrained baseline"),
        ({"n_split_h1": 0.0}, "commits to one offset or splits"),
        ({"solved_single": 1.0}, "learning-curve caption"),
        ({"n_divide_2h": 2.0}, "divide the offsets"),
        ({"n_steps": 400.0}, "about 400 training steps"),  # the budget changed, the captions did not
        ({"verdict_single_head_check_steps": 3000.0}, "does not match its record"),
        ({"record_chapter_gap": 0.02}, "differ from the chapter's run"),
        ({"long_best_gain": 0.0}, "keeps improving"),
        ({"long_best_first_half": 100.0}, "keeps improving"),
        ({"long_committed_worse_max": 0.4}, "stay near chance"),
        ({"sdpa_diff_torch": 1e-7}, "agree 'exactly'"),
        ({"concat_is_one_head_gap": 0.3, "concat_identity": "to within 3e-01"}, "is a single head"),
        ({"concat_identity": "to within 1e-07"}, "equals a one-head model"),
        ({"concat_acc_heads": 1.0}, "with a worst accuracy of 1.0"),  # "gets at least" where it solves both
    ],
)
def test_a_word_its_numbers_do_not_support_is_caught(change, found):
    problems = ch1.check({**GOOD, **change}, _nb(BODY, BOX, SUMMARY))
    assert any(found in p for p in problems), problems


def test_a_summary_quoting_a_value_the_body_never_shows_is_caught():
    summary = SUMMARY.replace("runs;", "runs ({glue:text}`secret:.2f`);")
    assert ch1.check(GOOD, _nb(BODY, BOX, summary)) == [
        "the summary, box or quiz quotes secret, which the body never shows"
    ]


def test_the_box_and_quiz_count_as_restating_and_the_rest_as_body():
    quiz = "## Check yourself\n\n**1.** Why? <details>{glue:text}`quiz_value`</details>"
    restating, body = ch1.restating_regions(_nb(BODY, BOX, SUMMARY, quiz))
    assert "quiz_value" in restating and "Concatenating first" in restating and "Chapter 2" not in restating
    assert "Doubling the width" in body and "Common misconceptions" not in body


def test_the_old_over_claim_about_1024_pairs_is_caught():
    body = BODY + "\nwith 32 tokens there are 1,024, far more than the proportions of one blend can separate reliably."
    problems = ch1.check(GOOD, _nb(body, BOX, SUMMARY))
    assert any("more than one blend can separate" in p for p in problems), problems


def test_captions_without_the_budget_are_caught():
    problems = ch1.check(GOOD, _nb(BODY, BOX, SUMMARY, captions={"fig-learning-curves": "No single head learns both."}))
    assert any("learning-curve caption does not say" in p for p in problems)
    assert any("longer-run caption" in p for p in problems)
