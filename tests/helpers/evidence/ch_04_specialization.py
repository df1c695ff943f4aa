"""Chapter 4's words against its numbers (issue 24; CONTRIBUTING.md, "Claims follow from evidence")."""

from __future__ import annotations

from helpers.evidence.ch_01_single_head_bottleneck import quoted_but_not_shown


def _layer(name: str) -> int:
    return int(str(name).split("-")[0])


def check(glued: dict[str, float | str], nb) -> list[str]:
    g = glued
    problems = [f"the summary, box or quiz quotes {n}, which the body never shows" for n in quoted_but_not_shown(nb)]
    # special tokens: "the opposite emphasis" to BERT-base's [SEP], and far above an even head's share
    if not g["n_cls_heads"] > g["n_sep_heads"]:
        problems.append("MiniLM is said to favour [CLS] over [SEP]; its heads do not")
    if not g["cls_max_value"] > 2 * g["even_share"]:
        problems.append("the [CLS] peak is not far above what a head attending evenly gives it")
    # the one-sentence view: "head 3-4 spreads out most" of the three heads drawn
    if not g["view_entropy_3"] > max(g["view_entropy_0"], g["view_entropy_8"]):
        problems.append("head 3-4 is said to spread out most of the three heads in the view; it does not")
    # syntax: "a few individual heads, in the middle layers" (neither the first nor the last layer)
    heads = [g[k] for k in g if k.startswith("head_") and isinstance(g[k], str) and "-" in g[k]]
    outer = [h for h in heads if _layer(h) in (1, int(g["n_layers"]))]
    if outer:
        problems.append(f"the best relation heads are said to sit in the middle layers; {outer} do not")
    if not g["n_heldout_beat"] <= g["n_beat"] <= g["n_relations"]:
        problems.append("more relations beat the offset held out than in-sample, or more than were tested")
    # held out: the chosen head against the other heads of its layer
    if not g["heldout_min"] > g["layer_others_max"]:
        problems.append("the chosen heads are said to beat the other heads of their layer on held-out sentences")
    # coreference: the chosen head beats the nearest mention where it was chosen; the interval holds its estimate
    if not g["coref_acc"] > g["coref_nearest"]:
        problems.append("the coreference head is said to beat the nearest mention; it does not")
    if not g["coref_hand_low"] <= g["coref_hand_same_head"] <= g["coref_hand_high"]:
        problems.append("the hand-written items' interval does not contain its estimate")
    # emergence: every seed solves the task; every head specialises, unlike the untrained models; roles move
    if not g["toy_min_acc"] >= 0.99:
        problems.append("'every seed solves the task' does not hold")
    if not (g["toy_min_share"] >= 0.9 and g["toy_untrained_max"] < 0.5):
        problems.append(
            f"'each head puts almost all its attention on one offset': {g['toy_min_share']:.2f} "
            f"(untrained {g['toy_untrained_max']:.2f})"
        )
    if not g["toy_n_assignments"] >= 2:
        problems.append("which head takes which role is said to depend on the seed; every seed made the same choice")
    return problems
