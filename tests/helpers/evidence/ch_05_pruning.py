"""Chapter 5's evidence check: what its summary, misconceptions box and quiz say, against what it measured.

Reads the restating parts (every markdown cell from the first that holds the misconceptions box, the summary or the
quiz to the end) with each ``{glue:text}`` role replaced by its glued value, the whole chapter's text for a few
rules, and the glued numbers. It never calls ``manyheads.analysis.claims``: each word is checked against the
numbers it must follow from.

* **Floors.** A share of prunable heads quoted for SmolLM2 needs its floor far below its score (the loss with no
  heads at least 1.5 times the loss with all of them); a share quoted for a MiniLM task in the summary or the box
  needs that task's floor well below its score (under half of it), which it is not today; "above" / "below" /
  "about the same as" for sentiment's floor must match the paired interval of the difference (or, without it, the
  two numbers).
* **Tolerances (review B-7).** When SmolLM2's floor lies above the uniform guess ln V, no tolerance may be stated as
  a share of the gap to the floor ("10 % of the way to its floor"): state it in nats per token.
* **Speeds (review B-9).** A quoted speed-up carries its interval over the timing rounds in the same paragraph.
* **Identical heads (review B-13).** The single head the copies are compared with has their width.
* **Hypotheses (review B-10).** "the same work" / "covers for" appears only as a labelled, untested explanation.
* **Many tests.** Holm's count cannot exceed the uncorrected one, and the chance count must be 5 % of the tests; a
  summary or box saying a removal "helps" / "even helps" needs at least one helpful removal that survives Holm.
* **The quoted largest losses.** "lowers" needs the family-wise interval below 0, "does not measurably change" one
  that contains 0.
* **Gradient vs leave-one-out.** A summary saying the gradient ignores the sign must quote two different counts for
  the last layer, or a positive count of heads whose removal lowers the loss.
* **Joint ablation.** "cost more together" needs at least one pair whose interval lies below 0; the share word must
  fit the count; the body's "costs more than" needs the strongest pair's interval below 0.
* **The myth.** The box's "Not as a rule" next to SmolLM2's shares (within 0.1 and 0.5 nats) needs them below 70 %.
* **No time claims** ("in about two minutes") anywhere in the chapter's text.
"""

from __future__ import annotations

import re

from helpers.evidence import SHARE, render_glue


def _markdown(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def restating_text(nb, glued: dict) -> str:
    """The box, summary, closing note and quiz of the chapter, glue values filled in, as one string."""
    cells = _markdown(nb)
    marks = ("Common misconceptions", "## Summary", "## Check yourself")
    start = next((i for i, s in enumerate(cells) if any(m in s for m in marks)), len(cells))
    return " ".join(" ".join(render_glue(s, glued) for s in cells[start:]).split())


def _paragraphs(nb) -> list[str]:
    """Every markdown paragraph of the chapter, glue roles unrendered, each on one line."""
    return [" ".join(p.split()) for cell in _markdown(nb) for p in re.split(r"\n\s*\n", cell)]


def _num(glued: dict, name: str) -> float | None:
    v = glued.get(name)
    return v if isinstance(v, float) else None


def check(glued: dict, nb) -> list[str]:
    text = restating_text(nb, glued)
    raw = " ".join(" ".join(_markdown(nb)).split())
    everything = " ".join(render_glue(raw, glued).split())
    problems: list[str] = []

    # Floors.
    base, floor = _num(glued, "lm_base"), _num(glued, "lm_floor")
    if re.search(r"lm_gradient_(?:5|10|small|large)\b", raw) and (
        base is None or floor is None or not floor >= 1.5 * base
    ):
        problems.append(
            f"SmolLM2's prunable share is quoted, but its floor ({floor}) is not far above its loss ({base})"
        )
    for key, name in (("lee", "similarity"), ("sent", "sentiment")):
        b, f = _num(glued, f"{key}_base"), _num(glued, f"{key}_floor")
        quoted = re.search(rf"{{glue:text}}`{key}(?:timent)?_(?:grad|loo|rand)_(?:5|10)", " ".join(_markdown(nb)))
        if quoted and b is not None and f is not None and not f < 0.5 * b:
            problems.append(f"a prunable share is quoted for {name}, whose floor {f:.3f} is not far below {b:.3f}")
    side = glued.get("sent_floor_side")
    b, f = _num(glued, "sent_base"), _num(glued, "sent_floor")
    low, high = _num(glued, "sent_floor_diff_low"), _num(glued, "sent_floor_diff_high")
    if low is not None and high is not None:
        fits = {"above": low > 0, "below": high < 0, "about the same as": low <= 0 <= high}
        if side in fits and not fits[side]:
            problems.append(
                f"sentiment's floor is said to be {side} its score, but the paired interval of the difference is "
                f"[{low:+.3f}, {high:+.3f}]"
            )
    elif side in ("above", "below") and b is not None and f is not None and (side == "above") != (f > b):
        problems.append(f"sentiment's floor is said to be {side} its score: {f:.3f} against {b:.3f}")

    # Tolerances: not a share of the gap to a floor that lies below uniform guessing.
    uniform = _num(glued, "lm_uniform")
    if floor is not None and uniform is not None and floor > uniform:
        for paragraph in _paragraphs(nb):
            if "{glue:text}`lm_" in paragraph and re.search(r"% of the (?:way to (?:its|the) floor|gap)", paragraph):
                problems.append(
                    "a SmolLM2 tolerance is stated as a share of the gap to a floor that lies above the uniform "
                    f"guess ({floor:.2f} > {uniform:.2f} nats): state it in nats per token"
                )

    # Speeds carry their interval.
    for paragraph in _paragraphs(nb):
        for batch in re.findall(r"\{glue:text\}`speed_b(\d+):", paragraph):
            if f"speed_b{batch}_low" not in paragraph or f"speed_b{batch}_high" not in paragraph:
                problems.append(f"the speed-up at batch {batch} is quoted without its interval over the rounds")

    # Identical heads against one head of the same width.
    one, width = _num(glued, "sym_one_d_head"), _num(glued, "sym_d_head")
    if "sym_acc_one" in raw and (one is None or width is None or one != width):
        problems.append(f"four identical heads of width {width} are compared with one head of width {one}")

    # A mechanism nobody tested is labelled as one.
    for sentence in re.split(r"(?<=[.!?])\s+", raw):
        if re.search(r"the same work|covers? for (?:each|the) other", sentence) and not re.search(
            r"hypothesis|one explanation|does not test|not tested|untested", sentence, re.IGNORECASE
        ):
            problems.append(f"an untested mechanism stated as fact: '{sentence[:100]}'")

    # Many tests.
    n_tests, chance = _num(glued, "n_tests"), _num(glued, "n_chance")
    uncorrected, holm = _num(glued, "n_uncorrected"), _num(glued, "n_holm")
    if n_tests is not None and chance is not None and abs(chance - 0.05 * n_tests) > 0.05:
        problems.append(f"chance alone gives {0.05 * n_tests:.1f} of {n_tests:.0f} tests, the text says {chance}")
    if uncorrected is not None and holm is not None and holm > uncorrected:
        problems.append(f"Holm keeps {holm:.0f} effects, more than the {uncorrected:.0f} uncorrected ones")
    helpful = _num(glued, "n_helpful_holm")
    if re.search(r"removal (?:even )?helps|removals? (?:that )?help\b", text) and not (helpful or 0) > 0:
        problems.append("the summary or box says a removal helps; none survives Holm's correction")

    # The quoted largest losses.
    for key in ("lee", "sentiment"):
        word = glued.get(f"{key}_worst_word")
        low, high = _num(glued, f"{key}_worst_low"), _num(glued, f"{key}_worst_high")
        if word is None or low is None or high is None:
            continue
        if word == "lowers" and not high < 0:
            problems.append(f"{key}: the largest loss 'lowers' the score, but its interval [{low}, {high}] reaches 0")
        if word == "raises" and not low > 0:
            problems.append(f"{key}: the largest change 'raises' the score, but its interval [{low}, {high}] reaches 0")
        if word == "does not measurably change" and not low <= 0 <= high:
            problems.append(f"{key}: 'does not measurably change', but the interval [{low}, {high}] excludes 0")

    # Gradient vs leave-one-out.
    loo, grad = _num(glued, "lee_last_loo"), _num(glued, "lee_last_grad")
    restating_raw = restating_text(nb, {})  # glue roles left as <name?>: which numbers the restating text quotes
    if "ignores the sign" in text and "<lee_last_loo?>" in restating_raw and loo == grad and loo is not None:
        problems.append(f"the summary says the orders disagree about the last layer; both put {loo:.0f} heads there")
    lowers = _num(glued, "lee_n_lowers")
    if "ignores the sign" in text and "<lee_n_lowers?>" in restating_raw and not (lowers or 0) > 0:
        problems.append("the summary says the gradient ignores the sign, but no head's removal lowers the loss")

    # Joint ablation.
    worse, pairs = _num(glued, "toy_pairs_worse"), _num(glued, "toy_n_pairs")
    if "cost more together" in text and not (worse or 0) > 0:
        problems.append("the summary or box says quiet heads cost more together; no pair's interval is below 0")
    word = glued.get("toy_pairs_worse_word")
    if word in SHARE and worse is not None and pairs:
        low, high = SHARE[word]
        share = worse / pairs
        if not low <= share <= high:
            problems.append(f"'{word}' of the pairs, but {worse:.0f} of {pairs:.0f}")
    strongest_high = _num(glued, "toy_pair_high")
    if glued.get("toy_pair_word") == "costs more than" and strongest_high is not None and not strongest_high < 0:
        problems.append(f"the strongest pair 'costs more than' the sum, but its interval reaches {strongest_high}")

    # The myth.
    for name in ("lm_gradient_small", "lm_gradient_large"):
        share = _num(glued, name)
        if "Not as a rule" in text and share is not None and share >= 70 and name in raw:
            problems.append(f"the box says 70-90 % is not a rule, while SmolLM2 lost {share:.0f} % ({name})")

    # "clearly" is a subset of "below 0".
    clear = _num(glued, "toy_pairs_clear")
    if clear is not None and worse is not None and clear > worse:
        problems.append(
            f"{clear:.0f} pairs cost clearly more together, more than the {worse:.0f} whose interval is below 0"
        )

    # No time claims.
    for claim in re.findall(r"in about \w+ (?:minutes?|seconds?)", everything):
        problems.append(f"a typed time claim: '{claim}'")
    return problems
