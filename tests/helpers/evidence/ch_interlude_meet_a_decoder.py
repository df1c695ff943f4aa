"""The interlude's evidence checks: its copying claim rests on a control where copying cannot help, its sentence about
where heads look quotes what it measured, and it states no decoding speed from a single run (issue 24)."""

from __future__ import annotations

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
    return problems
