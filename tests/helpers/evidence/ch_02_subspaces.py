"""Chapter 2's words against its numbers (issue 24; CONTRIBUTING.md, "Claims follow from evidence")."""

from __future__ import annotations

import re

from helpers.evidence.ch_01_single_head_bottleneck import _markdown, quoted_but_not_shown

VERDICTS = ("verdict_ch2_roles", "verdict_ch2_closer", "verdict_ch2_few")
# Wordings the first-half review found false (2-1, 2-2): a symmetric head does not favour the query's own token.
OVER_CLAIMS = (r"neither\s+symmetric\s+nor\s+positive\s+definite", r"always\s+favours\s+tokens\s+that\s+look\s+like")


def check(glued: dict[str, float | str], nb) -> list[str]:
    g = glued
    problems = [f"the summary, box or quiz quotes {n}, which the body never shows" for n in quoted_but_not_shown(nb)]
    # "the two computations agree" / "the difference is rounding"
    if not (g["circuit_gap"] < 1e-9 and g["sum_gap"] < 1e-9):
        problems.append("the circuit formula and the module (or the sum of circuits and W_Q W_Kᵀ) disagree")
    if not (g["toy_head_rank"] == g["toy_d_head"] and g["toy_full_rank"] > g["toy_head_rank"]):
        problems.append("each head's circuit has rank d_k and the full product more: not what was measured")
    # "Every two-head run solves both relations"
    if not g["ch2_min_acc_2h"] >= 0.99:
        problems.append(
            f"'every two-head run solves both relations' with a worst accuracy of {g['ch2_min_acc_2h']:.3f}"
        )
    # "which head takes which offset is decided by the seed"; the spectra caption: "a few directions"
    if not g["ch2_role_orders"] >= 2:
        problems.append("the seed is said to decide which head takes which offset; every seed chose the same")
    if not g["eff_rank_2h_max"] <= g["ch2_d_head"] / 2:
        problems.append("the spectra caption says the circuits put most of their weight in a few directions")
    # "not only in this sequence": the order of the pair scores holds in most held-out sequences, in every seed
    if not g["pair_share_min"] >= 0.9:
        problems.append(f"the pair-score order holds in only {g['pair_share_min']:.0%} of sequences for some seed")
    # "exactly their d_k", and trained circuits use fewer directions than the same models before training
    if g["num_rank_2h_max"] != g["ch2_d_head"]:
        problems.append("the two-head circuits' numerical rank is not their d_k")
    if not (g["eff_rank_2h_max"] < g["eff_rank_init_2h_min"] and g["eff_rank_1h_max"] < g["eff_rank_init_1h_min"]):
        problems.append("'the few directions are something training did', yet untrained circuits use as few")
    # "closer to each other than random ones", and "not one lucky seed"
    random_mean = g["angle_full_random_mean"]
    if not (g["angle_q_trained_mean"] < random_mean and g["angle_k_trained_mean"] < random_mean):
        problems.append("the trained subspaces are said to be closer than random ones; their mean angles are not")
    if not g["angle_n_seeds_below"] >= 2:
        problems.append(f"'not one lucky seed', with {g['angle_n_seeds_below']:.0f} seeds below the random 1 %")
    # the effective subspaces "point the same way"
    if not g["angle_top_first_max"] < g["angle_top_random_first"]:
        problems.append("the effective subspaces are said to be closer than random; some seed is not")
    return problems + _longer_run_problems(g) + _wording_problems(nb)


def _longer_run_problems(g) -> list[str]:
    """The verdicts drawn from training carry their longer run, and the summary's "finds the same" needs all to hold;
    the explanation of the overlap (review 2-3) follows its measurement."""
    problems = []
    for name in VERDICTS:
        if g.get(f"{name}_outcome") != "holds":
            problems.append(f"the summary says the longer run finds the same, but {name} {g.get(f'{name}_outcome')}")
        if g.get(f"{name}_steps") != g["ch2_steps"]:
            problems.append(f"{name} is about {g.get(f'{name}_steps')} steps, the chapter trains {g['ch2_steps']}")
    # "The directions the two heads share read mostly position", beside the least shared and random directions
    if not (g["pos_share_most_min"] > 0.5 and g["pos_share_n_above"] == g["ch2_n_seeds"]):
        problems.append(
            f"the shared directions are said to read mostly position ({g['pos_share_most_min']:.0%} at least, above "
            f"the other directions in {g['pos_share_n_above']:.0f} of {g['ch2_n_seeds']:.0f} seeds)"
        )
    return problems


def _wording_problems(nb) -> list[str]:
    text = _markdown(nb)
    return [
        f"the chapter says {m.group(0)!r} again (review 2-1, 2-2)" for r in OVER_CLAIMS if (m := re.search(r, text))
    ]
