"""Chapter 6's evidence check: what its summary, misconceptions box and quiz say, against what it measured.

Reads the restating parts (every markdown cell from the first that holds the misconceptions box, the summary or the
quiz to the end: the box, the summary, the
closing note and the quiz) with each ``{glue:text}`` role replaced by its glued value, and the glued numbers. It never
calls ``manyheads.analysis.claims``: each word is checked against the numbers it must follow from.

* a seed said to read a previous-token / duplicate-token head must have a layer-0 head at or above the threshold (0.5)
  on that score (the table), and the input it reads through (keys / queries) must be the one whose removal hurt most;
* "sudden" / "suddenly" for a seed needs one tenth of its run to hold at least half of the rise of its induction score,
  "gradual" / "gradually" less; an unqualified "sudden phase change" needs every seed sudden;
* "local bottom layers" needs SmolLM2's most local layer (lowest mean distance) in the bottom third of its layers, and
  the generated "in the bottom third" / "above the bottom third" must say where it is;
* sink-dominated layers said to "still matter when removed" cannot be mostly ones that cost < 0.1 nats; the share word
  for those that cost little must fit the count;
* in the body, "Seed 1 has the textbook circuit" needs a previous-token head read through the keys, and "Seed 0 (no
  previous-token head)" needs none at the threshold (nor a duplicate-token head, where the body says so);
* the SmolLM2 ablation: "raises" needs its interval above 0, "does not measurably change" an interval across 0, for the
  held-out copies and for news text; "far below" needs every same-layer control below the chosen heads' interval;
  "all of them find the target by its content" needs every chosen head's content score far above its fixed-offset one;
* the verdicts from training (issue 35): a restating sentence that names a budget check's outcome ("… holds", "…
  does not hold") must name the outcome its record gave (``verdict_<name>_outcome``), and "with a sharpness that
  varies between seeds" needs the sharpness check to hold;
* in the body, "seed N's score rises suddenly / gradually" follows the seed's jump share (against the cut at 0.5);
* the layer removal (review B-20, B-21): "the <task> task cannot show that any layer is indispensable" needs that
  MiniLM task's floor (every head removed) to keep at least half of its score, and the body may not call every MiniLM
  layer dispensable outright ("No MiniLM layer is indispensable"); "not measurably cheaper" needs the two shares'
  intervals to overlap, "do not overlap" needs them apart; "layer N is still the costliest" under mean ablation
  needs the same layer on top.
"""

from __future__ import annotations

import re

from helpers.evidence import SHARE, render_glue

THRESHOLD = 0.5


def restating_text(nb, glued: dict) -> str:
    """The box, summary, closing note and quiz of the chapter, glue values filled in, as one string."""
    cells = [c.source for c in nb.cells if c.cell_type == "markdown"]
    marks = ("Common misconceptions", "## Summary", "## Check yourself")
    start = next((i for i, s in enumerate(cells) if any(m in s for m in marks)), len(cells))
    return " ".join(render_glue(s, glued) for s in cells[start:])


def _num(glued: dict, name: str) -> float | None:
    v = glued.get(name)
    return v if isinstance(v, float) else None


def body_text(nb, glued: dict) -> str:
    """Every markdown cell of the chapter, glue values filled in."""
    return " ".join(" ".join(render_glue(c.source, glued) for c in nb.cells if c.cell_type == "markdown").split())


def _body_problems(glued: dict, nb) -> list[str]:
    """The body's per-seed statements about the toy circuits (section "Which earlier head")."""
    body, problems = body_text(nb, glued), []
    for seed in (0, 1):
        prev, dup = _num(glued, f"toy{seed}_max_prev"), _num(glued, f"toy{seed}_max_dup")
        k, q = _num(glued, f"toy{seed}_k_all"), _num(glued, f"toy{seed}_q_all")
        if f"Seed {seed} has the textbook circuit" in body or f"Seed {seed} (K-composition)" in body:
            if prev is None or prev < THRESHOLD or k is None or q is None or not k < q:
                problems.append(
                    f"the body gives seed {seed} the textbook circuit; previous {prev}, keys {k}, queries {q}"
                )
        if f"Seed {seed} (no previous-token head)" in body or f"Seed {seed} also has strong" in body:
            if f"Seed {seed} (no previous-token head)" in body and (prev is None or prev >= THRESHOLD):
                problems.append(f"the body says seed {seed} has no previous-token head; its best score is {prev}")
            if "None of its layer-0 heads is a previous-token or a duplicate-token head" in body:
                if dup is not None and dup >= THRESHOLD:
                    problems.append(f"the body says seed {seed} has no duplicate-token head; its best score is {dup}")
    return problems


# The budget checks' short names in the summary (the chapter's checks_summary) and the verdicts they stand for.
CHECK_PHRASES = {
    "that one layer forms no induction head": "verdict_one_layer",
    "that every 2-layer seed builds it on layer 0": "verdict_needs_layer0",
    "that seeds take different routes": "verdict_routes",
    "that the sharpness varies between seeds": "verdict_sharpness",
}


def _verdict_problems(glued: dict, text: str) -> list[str]:
    problems = []
    for phrase, name in CHECK_PHRASES.items():
        outcome = glued.get(f"{name}_outcome")
        for said in re.findall(rf"{re.escape(phrase)} (holds|does not hold)", text):
            if said != outcome:
                problems.append(f"the text says the check {phrase!r} {said}; its record says {outcome!r}")
    if "sharpness that varies between seeds" in text and glued.get("verdict_sharpness_outcome") != "holds":
        problems.append(
            "the text says the sharpness varies between seeds; the budget check says "
            f"{glued.get('verdict_sharpness_outcome')!r}"
        )
    return problems


def _layer_removal_problems(glued: dict, body: str) -> list[str]:
    problems = []
    if re.search(r"No MiniLM layer is indispensable", body):
        problems.append("the body calls every MiniLM layer dispensable, which its tasks' floor guarantees (B-20)")
    for task in re.findall(r"the (similarity|sentiment) task cannot show that any layer is indispensable", body):
        key = {"similarity": "lee", "sentiment": "sent"}[task]
        base, floor = _num(glued, f"{key}_base"), _num(glued, f"{key}_base_floor")
        if base is None or floor is None or floor < 0.5 * base:
            problems.append(
                f"the body says the {task} task cannot show a layer indispensable; its floor is {floor} against "
                f"{base} with every head"
            )
    lows = [_num(glued, n) for n in ("sink_cheap_low", "sink_cheap_high", "other_cheap_low", "other_cheap_high")]
    if None not in lows:
        s_low, s_high, o_low, o_high = lows
        overlap = s_low <= o_high and o_low <= s_high
        if "not measurably cheaper" in body and not overlap:
            problems.append(
                f"the body says the intervals overlap: [{s_low:.2f}, {s_high:.2f}], [{o_low:.2f}, {o_high:.2f}]"
            )
        if "do not overlap" in body and overlap:
            problems.append(
                f"the body says the intervals are apart: [{s_low:.2f}, {s_high:.2f}], [{o_low:.2f}, {o_high:.2f}]"
            )
    worst, mean_worst = _num(glued, "dec_worst_layer"), _num(glued, "mean_worst_layer")
    if worst is not None and mean_worst is not None and f"layer {worst:.0f} is still the costliest" in body:
        if worst != mean_worst:
            problems.append(
                f"layer {worst:.0f} is called still the costliest; under mean ablation it is {mean_worst:.0f}"
            )
    for seed in (0, 1):
        share = _num(glued, f"toy{seed}_jump_share")
        said = re.search(rf"seed {seed}'s (?:score rises )?(suddenly|gradually)", body)
        if share is not None and said:
            if (said.group(1) == "suddenly") != (share >= 0.5):
                problems.append(f"the body says seed {seed} rises {said.group(1)}; its jump share is {share:.2f}")
    return problems


def check(glued: dict, nb) -> list[str]:
    text = " ".join(restating_text(nb, glued).split())
    problems: list[str] = _body_problems(glued, nb)
    problems += _verdict_problems(glued, text) + _layer_removal_problems(glued, body_text(nb, glued))
    seeds = sorted({int(m) for m in re.findall(r"toy(\d+)_ind\b", " ".join(glued))})

    for seed in seeds:
        for clause in re.findall(rf"in seed {seed}\b[^;.)]*", text):
            if "neither" in clause:
                continue
            for kind, name in (("duplicate-token", "max_dup"), ("previous-token", "max_prev")):
                score = _num(glued, f"toy{seed}_{name}")
                if f"{kind} head" in clause and (score is None or score < THRESHOLD):
                    problems.append(f"seed {seed} is said to use a {kind} head; its best {kind} score is {score}")
            k, q = _num(glued, f"toy{seed}_k_all"), _num(glued, f"toy{seed}_q_all")
            if k is not None and q is not None:
                if "its keys" in clause and not k < q:
                    problems.append(
                        f"seed {seed} is said to read layer 0 through its keys; keys {k:.2f}, queries {q:.2f}"
                    )
                if "its queries" in clause and not q < k:
                    problems.append(
                        f"seed {seed} is said to read layer 0 through its queries; keys {k:.2f}, queries {q:.2f}"
                    )
            share = _num(glued, f"toy{seed}_jump_share")
            if share is not None:
                if re.search(r"\bsudden(ly)?\b", clause) and share < 0.5:
                    problems.append(f"seed {seed} is called sudden; a tenth of its run holds {share:.0%} of the rise")
                if re.search(r"\bgradual(ly)?\b", clause) and share >= 0.5:
                    problems.append(f"seed {seed} is called gradual; a tenth of its run holds {share:.0%} of the rise")
    shares = [_num(glued, f"toy{s}_jump_share") for s in seeds]
    if re.search(r"sudden phase change", text) and any(s is not None and s < 0.5 for s in shares):
        problems.append("an unqualified 'sudden phase change' while a seed learns gradually")

    local, n_layers = _num(glued, "dec_distance_argmin"), _num(glued, "dec_layers")
    bottom = re.search(
        r"local (bottom|lower|early) layers|(bottom|lower|early) layers (are|look) (the most )?local", text
    )
    if bottom and local is not None and n_layers and local >= n_layers / 3:
        problems.append(
            f"the text calls the bottom layers local; the most local layer is {local:.0f} of {n_layers:.0f}"
        )
    where = glued.get("dec_local_where")
    if isinstance(where, str) and where in text and local is not None and n_layers:
        if where.startswith("in the bottom") != (local < n_layers / 3):
            problems.append(f"the most local layer ({local:.0f} of {n_layers:.0f}) is said to be {where}")

    small = _num(glued, "dec_small_layers")
    if "still matter when removed" in text and small is not None and n_layers and small / n_layers > 0.5:
        problems.append(
            f"sink layers 'still matter when removed' while {small:.0f} of {n_layers:.0f} layers cost < 0.1"
        )
    cheap, sinky = _num(glued, "n_sink_layers_cheap"), _num(glued, "n_sink_layers")
    match = re.search(r"mostly to the BOS token, (all|none|nearly all|most|a minority|about half) cost less", text)
    if match and cheap is not None and sinky:
        low, high = SHARE.get(match.group(1), (0.0, 1.0))
        share = cheap / sinky
        if not (low <= share <= high) or (match.group(1) in ("most", "a minority") and share == 0.5):
            problems.append(
                f"'{match.group(1)}' of the sink-dominated layers cost little, but it is {cheap:.0f} of {sinky:.0f}"
            )

    for word_name, lo_name, hi_name, what in (
        ("top_copy_word", "top_copy_low", "top_copy_high", "held-out second-copy loss"),
        ("top_news_word", "top_news_low", "top_news_high", "news-text loss"),
    ):
        word, lo, hi = glued.get(word_name), _num(glued, lo_name), _num(glued, hi_name)
        if not isinstance(word, str) or lo is None or hi is None or word not in text:
            continue
        if word == "raises" and not lo > 0:
            problems.append(f"the ablation 'raises' the {what}; its interval is [{lo:+.3f}, {hi:+.3f}]")
        if word == "lowers" and not hi < 0:
            problems.append(f"the ablation 'lowers' the {what}; its interval is [{lo:+.3f}, {hi:+.3f}]")
        if word.startswith("does not") and (lo > 0 or hi < 0):
            problems.append(
                f"the ablation 'does not measurably change' the {what}; its interval is [{lo:+.3f}, {hi:+.3f}]"
            )
    rmax, tlo = _num(glued, "random_copy_max"), _num(glued, "top_copy_low")
    if (
        "far below the chosen heads" in " ".join(str(v) for v in glued.values())
        and rmax is not None
        and tlo is not None
    ):
        if not rmax < tlo:
            problems.append(
                f"same-layer controls said to be far below; the largest is {rmax:+.2f}, the interval starts {tlo:+.2f}"
            )
    cmin, omax = _num(glued, "content_min"), _num(glued, "offset_max")
    if "all of them find the target by its content" in text and cmin is not None and omax is not None:
        if not cmin > 10 * omax:
            problems.append(
                f"every chosen head is said to match content; content {cmin:.2f} vs fixed offset {omax:.3f}"
            )
    return problems
