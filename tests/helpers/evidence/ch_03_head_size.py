"""Chapter 3's words against its numbers (issue 24; CONTRIBUTING.md, "Claims follow from evidence")."""

from __future__ import annotations

from helpers.evidence.ch_01_single_head_bottleneck import quoted_but_not_shown, word_against_interval


def check(glued: dict[str, float | str], nb) -> list[str]:
    g = glued
    problems = [f"the summary, box or quiz quotes {n}, which the body never shows" for n in quoted_but_not_shown(nb)]
    # "agree ... which is floating-point rounding"; "the 4/3 appears only against a head without W_O"
    if not (g["mha_out_diff"] < 1e-5 and g["mha_weight_diff"] < 1e-5):
        problems.append("the course's layer and PyTorch's are said to agree to rounding; they do not")
    if abs(g["ratio_no_wo"] - 4 / 3) > 1e-9:
        problems.append(f"the 'extra third' is a ratio of {g['ratio_no_wo']:.3f}, not 4/3")
    # "the softmax grows from ... to ...": a growing share
    if not g["softmax_share_h1"] < g["softmax_share_h128"]:
        problems.append("the softmax's share of the work is said to grow with h; it does not")
    # the sweep: one head fails, the plateau solves every run, the far end is worse by its interval
    if not g["sweep_worse_h1"] < 0.5:
        problems.append(
            f"'one head does not solve the task', yet its worse relation averages {g['sweep_worse_h1']:.2f}"
        )
    if not g["sweep_middle_min"] >= 0.99:
        problems.append("'every head count on the plateau solves both relations in every run' does not hold")
    problems += word_against_interval(
        g, "far_word", "far_low", "far_high", ("better", "worse", "not measurably different")
    )
    if g["far_word"] != "worse":  # "a plateau with losses at both ends, which is what our sweep shows too"
        problems.append(f"the sweep is said to lose at both ends like the paper; its far end is {g['far_word']!r}")
    if not g["sweep_worse_h16"] > g["sweep_worse_h1"]:
        problems.append("the failure at d_k = 1 is called milder than at h = 1; it is not")
    # the budget check (issue 35, item 1; review 3-1): the page teaches that one head still fails with the longer
    # budget, the plateau still solves, and the width-1 heads catch up ("the dip measured speed, not capacity")
    if g.get("verdict_one_head_outcome") != "holds" or not g["one_long_max"] < 0.5:
        problems.append("one head is said to stay far below the others with the longer budget too; its check disagrees")
    if g.get("verdict_plateau_outcome") != "holds":
        problems.append("the plateau is said to solve the task at the longer budget too; its check disagrees")
    if g.get("verdict_width_one_outcome") != "does not hold" or not g["thin_long_min"] >= 0.99:
        problems.append(
            "heads of width 1 are said to catch up with the longer budget (every seed solving the task); "
            f"its check says {g.get('verdict_width_one_outcome')!r}, worst seed {g['thin_long_min']:.3f}"
        )
    if not g["record_vs_page"] < 0.01:
        problems.append(
            f"the budget check's record is said to start from this page's runs; at this page's budget they differ "
            f"by {g['record_vs_page']:.3f}"
        )
    if not g["sweep_dhead_max"] < g["sweep_seq_len"]:
        problems.append("the plateau's heads are said to be all narrower than the sequence; some are not")
    # the low-rank fit: errors fall with d_k, exact from n - 1, and one dimension beats the even-attention baseline
    if not g["lr_tv_1"] > g["lr_tv_2"] > g["lr_tv_half"] > g["lr_exact"]:
        problems.append("the best fit is said to improve with every added dimension up to an exact fit; it does not")
    if g["lr_exact_from"] != g["lr_n"] - 1:
        problems.append(f"the exact fits are said to start at n - 1; they start at {g['lr_exact_from']:.0f}")
    if not g["lr_tv_1"] < g["lr_tv_uniform"]:
        problems.append("one dimension is said to capture part of each pattern; it is no closer than even attention")
    return problems
