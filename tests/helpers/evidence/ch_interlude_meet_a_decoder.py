"""The interlude's evidence checks: its copying claim rests on a control where copying cannot help, its sentence about
where heads look quotes what it measured, and it states no decoding speed from a single run (issue 24); and (issue
35) the second copy's loss is reported after its ramp, every loss it quotes carries the uniform-guess reference, the
two-layer circuit names its previous-token head, heads are named one way (0-based ``layer.head``), no range spans
every layer, and every figure has a caption."""

from __future__ import annotations

import math
import re

from helpers.claims import page_from_notebook


def check(glued: dict[str, float | str], nb) -> list[str]:
    problems: list[str] = []
    page = page_from_notebook(nb)
    sentences = [s for _, s in page.sentences]
    # 1. Copying: a control (the same ending without an earlier copy, in sentences nobody has written) is measured,
    #    and the word the page uses follows it.
    needed = ("cat_alone", "cat_copy", "control_alone_max", "control_copy_min", "copy_word")
    missing = [k for k in needed if k not in glued]
    if missing:
        problems.append(f"the copying claim has no control beside it (not glued: {missing})")
    else:
        separated = float(glued["control_copy_min"]) > float(glued["control_alone_max"])
        if glued["copy_word"] == "raises" and not separated:
            problems.append(
                f"the page says one earlier copy raises the word's probability, but the controls overlap: at least "
                f"{glued['control_copy_min']} after a copy against up to {glued['control_alone_max']} without"
            )
        if glued["copy_word"] != "raises" and separated:
            problems.append(f"copy_word is {glued['copy_word']!r} while every control rose with the copy")
    if any(re.search(r"it can use the earlier copy of the phrase", s) for s in sentences):
        problems.append("'mat' after 'The cat sat on the' is taken as evidence of copying with no control")
    # 2. Where heads look: only what the page measured.
    for s in sentences:
        if re.search(r"early layers tend to", s, re.IGNORECASE):
            top = glued.get("prev_top_layer")
            layers = float(glued.get("n_layers", 30))
            if top is None or float(top) >= layers / 3:
                problems.append(f"'early layers tend to ...' against the measured top layer {top}: {s}")
    if "n_prev_heads" not in glued or "n_first_heads" not in glued:
        problems.append(
            "the head patterns the widget paragraph describes are not measured (n_prev_heads, n_first_heads)"
        )
    # 3. No speed from one run on a shared machine.
    for s in sentences:
        if re.search(r"tokens? per second", s) and not re.search(r"\[\s*[-\d.]+\s*,\s*[-\d.]+\s*\]|±", s):
            problems.append(f"a decoding speed without its spread: {s}")
    # 4. The second copy's loss falls over several tokens (review D-3): the page gives the ramp and the loss after it.
    if "rep_second" in glued:
        ramp, settled = glued.get("rep_ramp"), glued.get("rep_settled")
        if ramp is None or settled is None:
            problems.append("the second copy's mean loss is quoted without its ramp (rep_ramp) and the loss after it")
        else:
            if not 1 <= float(ramp) < float(glued.get("rep_length", 64)):
                problems.append(f"the ramp ends at token {ramp} of the second copy, outside the copy")
            if float(settled) > float(glued["rep_second"]):
                problems.append(f"the loss after the ramp ({settled}) is above the copy's mean ({glued['rep_second']})")
            if not any(re.search(r"\bramp\b", s) for s in sentences):
                problems.append("the page glues the second copy's ramp but never says there is one")
    # 5. Every SmolLM2 loss the page glues carries its reference, uniform guessing over the vocabulary (item 2).
    if "vocab" in glued:
        uniform = math.log(float(glued["vocab"]))
        for name in ("real_loss", "shuffled_loss", "rep_first", "rep_second", "rep_settled"):
            if name not in glued:
                continue
            floor = glued.get(f"{name}_floor")
            if not isinstance(floor, float) or abs(floor - uniform) > 1e-3:
                problems.append(f"{name} is glued without the uniform-guess reference ln(vocab) = {uniform:.2f}")
    # 6. The two-layer circuit is a previous-token head and an induction head, not "two induction heads" (D-1).
    for s in sentences:
        if re.search(r"induction heads?", s) and re.search(r"\btwo (of them|heads|induction heads)\b", s):
            if "previous-token" not in s:
                problems.append(f"the two heads of the copying circuit are not named (previous-token head?): {s}")
    # 7. One head-numbering scheme (I2): the interlude names heads layer.head from 0, never Clark's 1-based L-H.
    for s in sentences:
        if re.search(r"\b(query )?heads? \d+-\d+\b", s):
            problems.append(f"a head named the 1-based way (L-H) on a page that counts from 0 (layer.head): {s}")
    listed = str(glued.get("prev_heads_list", ""))
    if listed and listed != "none" and not re.fullmatch(r"\d+\.\d+(, \d+\.\d+)*", listed):
        problems.append(f"the previous-token heads are not named layer.head: {listed}")
    # 8. A range that spans every layer says nothing (D-5).
    if "n_layers" in glued:
        last = int(float(glued["n_layers"])) - 1
        for s in sentences:
            if re.search(rf"\blayers 0 (to|-|–) {last}\b", s):
                problems.append(f"'layers 0 to {last}' is every layer: give the count per layer instead: {s}")
    # 9. Every figure has a caption, so that it is numbered and says what to see (D-2).
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            caption = cell.metadata.get("mystnb", {}).get("figure", {}).get("caption", "")
            if not caption.strip():
                problems.append(f"a figure without a caption (cell {cell.get('id', '?')}): {cell.source[:60]!r}")
    return problems
