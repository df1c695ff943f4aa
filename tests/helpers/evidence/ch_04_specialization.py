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
    # held out: "only for n_heldout_beat ...; there the chosen head falls below the offset for <relations>, and
    # exactly at it for <relations>" (review 4-1): both lists are named, so both must be non-empty and add up
    if not (g["n_heldout_below"] >= 1 and g["heldout_below"] != "none"):
        problems.append("the chosen heads are said to fall below the offset for some relations held out; none does")
    if not (g["n_heldout_tied"] >= 1 and g["heldout_tied"] != "none"):
        problems.append("a chosen head is said to tie with the offset held out; none does")
    if not g["n_heldout_beat"] + g["n_heldout_below"] + g["n_heldout_tied"] <= g["n_relations"]:
        problems.append("more relations beat, lose to or tie with the offset held out than were tested")
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
    # the budget check (issue 35, item 1): the text teaches both toy verdicts as holding at the longer budget too
    # ("after 250 steps and, in the budget check, after 1,250 too"; "a retrained BERT would very likely ...")
    for name in ("verdict_toy_specialize", "verdict_toy_roles"):
        if g.get(f"{name}_outcome") != "holds":
            problems.append(
                f"{name} is taught as holding at the longer budget; its check says {g.get(name + '_outcome')!r}"
            )
    # the explorer's numbering: the 1-based name, its sliders and the 0-based code agree (review I2)
    layer, head = (int(x) for x in str(g["head_det"]).split("-"))
    if (layer, head) != (g["head_det_layer"], g["head_det_head"]) or g["head_det_code"] != f"({layer - 1}, {head - 1})":
        problems.append(
            f"head {g['head_det']} is said to be sliders {g['head_det_layer']}, {g['head_det_head']} and "
            f"{g['head_det_code']} in code; they do not agree"
        )
    return problems
