"""Chapter 1's words against its numbers (issue 24; CONTRIBUTING.md, "Claims follow from evidence").

Besides the chapter's own claims, this module holds the small readers that chapters 2-4 share: the glue names a
summary, misconceptions box or quiz quotes must also be shown in the body (a summary restates the body; it cannot
quote a value the body never shows), and a glued comparing word must agree with its glued interval.
"""

from __future__ import annotations

import re

GLUE = re.compile(r"\{glue:text\}`([^`:]+)")
BOX = re.compile(r"```\{admonition\} Common misconceptions.*?\n```", re.S)


def _markdown(nb) -> str:
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def restating_regions(nb) -> tuple[str, str]:
    """(restating, body): the summary, misconceptions box and quiz of a chapter; and the rest of its Markdown."""
    text = _markdown(nb)
    restating = BOX.findall(text)
    body = BOX.sub("", text)
    for heading in (r"\n## Summary\n", r"\n\(sec-[\w-]*summary[\w-]*\)=\n## Summary\n", r"\n## Check yourself\n"):
        match = re.search(heading, body)
        if match:
            end = re.search(r"\n\*\*(?:Next|Exercises?)\.\*\*|\n## (?!Summary)", body[match.end() :])
            stop = match.end() + end.start() if end and "Check yourself" not in heading else len(body)
            restating.append(body[match.start() : stop])
            body = body[: match.start()] + body[stop:]
    return "\n".join(restating), body


def quoted_but_not_shown(nb) -> list[str]:
    """Glue names quoted in a summary, box or quiz but nowhere in the chapter's body text."""
    restating, body = restating_regions(nb)
    shown = set(GLUE.findall(body))
    return sorted(set(GLUE.findall(restating)) - shown)


def word_against_interval(glued, word: str, low: str, high: str, words: tuple[str, str, str]) -> list[str]:
    """``words`` = (above, below, neither): the glued ``word`` must be ``above`` exactly when the interval
    [``low``, ``high``] lies above 0, ``below`` when it lies below 0, ``neither`` when it contains 0."""
    lo, hi, said = glued[low], glued[high], glued[word]
    right = words[0] if lo > 0 else words[1] if hi < 0 else words[2]
    return [] if said == right else [f"{word} is {said!r} but its interval [{lo:.3g}, {hi:.3g}] says {right!r}"]


def check(glued: dict[str, float | str], nb) -> list[str]:
    problems = [
        f"the summary, box or quiz quotes {name}, which the body never shows" for name in quoted_but_not_shown(nb)
    ]
    g = glued
    # scaled dot products: "close to d_k = 64" and "brings the variance back to 1"
    if not (abs(g["var_raw"] / 64 - 1) < 0.05 and abs(g["var_scaled"] - 1) < 0.05):
        problems.append(f"variances {g['var_raw']:.3g} and {g['var_scaled']:.3g} are not about 64 and 1")
    if g["order_gap_one_head"] != 0:
        problems.append("the text says swapping the tokens changes one head's output by exactly nothing")
    # the comparisons: each glued word follows its interval over seeds
    for key, words in (
        ("h2", ("raise", "lower", "do not measurably change")),  # "two heads raise ..."
        ("h4", ("raise", "lower", "do not measurably change")),
        ("wide", ("raises", "lowers", "does not measurably change")),  # "one head at double width raises ..."
    ):
        problems += word_against_interval(g, f"{key}_word", f"{key}_low", f"{key}_high", words)
    if g["n_commit_h1"] + g["n_split_h1"] != g["n_seeds"]:
        problems.append("the text says every single-head run either commits to one offset or splits its weight")
    if not g["worse_h1"] < 0.5:
        problems.append(f"'the worse one only {g['worse_h1']:.2f}': a single head learns both relations here")
    if g["solved_h1wide"] != 0:
        problems.append("the wide single head 'still has to choose', yet a wide run solves both relations")
    if not g["untrained_mass"] < 0.5:
        problems.append("the untrained baseline already puts most of its weight on an offset")
    # "a single head can sometimes encode two facts": at least one six-token run
    if not g["small_n_both"] >= 1:
        problems.append("the summary says a single head 'sometimes' encodes both facts; no six-token run did")
    # "much worse": every two-head model loses a large part of its accuracy when its softmaxes are merged
    if not (g["concat_drop_min"] >= 0.25 and g["concat_acc_max"] < g["concat_acc_heads"]):
        problems.append(f"'much worse' with a smallest drop of {g['concat_drop_min']:.2f}")
    # the learning-curve caption: "no single-head run learns both relations; every multi-head run does"; the
    # patterns caption: "the two heads of a two-head model divide the relations between them"
    if not (g["solved_single"] == 0 and g["solved_multi"] == g["n_multi_runs"]):
        problems.append("the learning-curve caption says no single-head run and every multi-head run learns both")
    if g["n_divide_2h"] != g["n_seeds"]:
        problems.append("the patterns caption says the two heads divide the offsets in every two-head model")
    # "which head tracks which offset changes with the seed"
    if not g["n_role_orders"] >= 2:
        problems.append("the box says head roles change with the seed; every two-head seed has the same assignment")
    return problems + _budget_problems(g, nb) + _identity_problems(g)


def caption(nb, name: str) -> str:
    """The caption of the figure ``name`` (a code cell's ``mystnb.figure``), or ""."""
    for cell in nb.cells:
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        if figure.get("name") == name:
            return figure.get("caption", "")
    return ""


def _budget_problems(g, nb) -> list[str]:
    """The 300-step verdicts state their budget, and the longer run's reading follows its record (review 1-1)."""
    problems = []
    steps, long_steps = int(g["n_steps"]), int(g["verdict_single_head_check_steps"])
    curves = caption(nb, "fig-learning-curves")
    if f"{steps} training steps" not in curves or f"In {steps} steps" not in curves:
        problems.append(f"the learning-curve caption does not say its verdict is about {steps} training steps")
    longer = caption(nb, "fig-longer-budget")
    seeds = int(g["verdict_single_head_check_seeds"])
    if not all(t in longer for t in (f"{long_steps:,} training steps", f"{steps} steps", f"{seeds} seeds")):
        problems.append(f"the longer-run caption does not match its record ({long_steps:,} steps, {seeds} seeds)")
    if long_steps != 5 * steps:
        problems.append(f"the section says 'five times the training', the record ran {long_steps} against {steps}")
    # "the record's accuracies at step 300 match the table above": each long run begins as the chapter's run. The
    # record was made on another machine: its rounding flipped one held-out sequence of 512 (0.0024) in one CI run
    # and none in others, so a few sequences are allowed; a different run (another seed or batch) differs by far more.
    if not g["record_chapter_gap"] < 0.01:
        problems.append(
            f"the longer run's first {steps} steps differ from the chapter's run by {g['record_chapter_gap']}"
        )
    # "keeps improving after the chapter's budget ends, but slowly ... where every two-head run passed 0.5 by ..."
    if not (g["long_best_gain"] > 0.1 and g["long_best_first_half"] > g["long_multi_first_half"]):
        problems.append("the text says the splitting single head keeps improving, more slowly than the two-head runs")
    # "the single-head runs that committed to one offset stay near chance on the other"
    if not (g["long_n_committed"] >= 1 and g["long_committed_worse_max"] < 3 * g["chance"]):
        problems.append("the text says the committed single-head runs stay near chance on their other relation")
    if "far more than the proportions of one blend can separate" in _markdown(nb):
        problems.append(
            "'1,024 pairs are more than one blend can separate' is stated as fact; the longer run does not show it"
        )
    return problems


def _identity_problems(g) -> list[str]:
    """Words chosen by the values they describe (review 1-2, 1-4, 1-5)."""
    problems = []
    exact = g["sdpa_diff_torch"] == 0 and g["sdpa_diff_package"] == 0
    if (g["sdpa_agreement"] == "exactly") != exact:
        problems.append(f"the text says the implementations agree {g['sdpa_agreement']!r}")
    if not g["concat_is_one_head_gap"] < 1e-5:
        problems.append("the text says one softmax over concatenated heads is a single head; the two models differ")
    if (g["concat_identity"] == "exactly") != (g["concat_is_one_head_gap"] == 0):
        problems.append(f"the text says the merged model equals a one-head model {g['concat_identity']!r}")
    if str(g["concat_heads_phrase"]).startswith("solves both") != (g["concat_acc_heads"] == 1):
        problems.append(f"'{g['concat_heads_phrase']}' with a worst accuracy of {g['concat_acc_heads']}")
    return problems
