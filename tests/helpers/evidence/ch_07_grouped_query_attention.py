"""Chapter 7's evidence checks: its verdicts on speed, uptraining and groupings agree with the intervals it measured,
its text claims no speed-up its own timing contradicts, it shows the papers' figures exercise 7 expects, and quiz 4
does not credit the KV cache with choosing d_k (issue 24)."""

from __future__ import annotations

import re

from helpers.claims import page_from_notebook

# The papers' figures as the course's fact sheet records them (facts.md §20: Ainslie et al. 2023, Table 1;
# §18: DeepSeek-V2, Table 8); exercise 7 Part 5's mark scheme expects the chapter to have shown them.
PAPER_FIGURES = {
    "ainslie_mha_score": 47.2,
    "ainslie_gqa_score": 47.1,
    "ainslie_mqa_score": 46.6,
    "ainslie_mha_time": 1.51,
    "ainslie_gqa_time": 0.28,
    "ainslie_mqa_time": 0.24,
    "deepseek_mha_mmlu": 45.2,
    "deepseek_gqa_mmlu": 41.2,
    "deepseek_mqa_mmlu": 37.9,
}
SPEED_WORDS = ("faster", "slower", "inconclusive here")
SPEED_CLAIM = re.compile(r"\b(faster|slower|speeds? up|speed-up|inconclusive)\b", re.IGNORECASE)
HERE = re.compile(r"this machine|this page's CPU|measured here|on the CPU", re.IGNORECASE)


def _verdict(low: float, high: float, words: tuple[str, str, str]) -> str:
    better, worse, neutral = words
    return better if low > 0 else worse if high < 0 else neutral


def _word_problems(glued: dict, word: str, low: str, high: str, words: tuple[str, str, str]) -> list[str]:
    if word not in glued or low not in glued or high not in glued:
        return [f"{word}, {low} or {high} is not glued: the verdict has no interval beside it"]
    expected = _verdict(float(glued[low]), float(glued[high]), words)
    if glued[word] != expected:
        return [f"{word} says {glued[word]!r} but its interval [{glued[low]}, {glued[high]}] calls for {expected!r}"]
    return []


def check(glued: dict[str, float | str], nb) -> list[str]:
    problems: list[str] = []
    # 1. Speed: each verdict follows its paired-difference interval, and no sentence about this machine's timing
    #    uses a speed word the measurement did not produce.
    verdicts = []
    for tag in ("short", "long"):
        for g in (3, 1):
            name = f"speed_word_{tag}_{g}"
            problems += _word_problems(glued, name, f"diff_{tag}_{g}_low", f"diff_{tag}_{g}_high", SPEED_WORDS)
            verdicts.append(str(glued.get(name, "")))
    page = page_from_notebook(nb)
    for region, sentence in page.sentences:
        if not HERE.search(sentence):
            continue
        unquoted = re.sub(r'"[^"]*"|“[^”]*”', " ", sentence)  # a word quoted is named, not claimed
        for m in SPEED_CLAIM.finditer(unquoted):
            said = m.group(1).lower()
            if said in ("speed up", "speeds up", "speed-up"):
                said = "faster"
            if not any(v.startswith(said) for v in verdicts):
                problems.append(
                    f"the {region} says {m.group(0)!r} about this machine, which measured {verdicts}: {sentence}"
                )
    # 2. The byte model's prediction is the ratio of the bytes it glues.
    if all(k in glued for k in ("bytes_long_9", "bytes_long_1", "predicted_long_1")):
        ratio = float(glued["bytes_long_9"]) / float(glued["bytes_long_1"])
        if abs(ratio - float(glued["predicted_long_1"])) > 1e-6 * ratio:
            problems.append(
                f"predicted_long_1 = {glued['predicted_long_1']} is not bytes_long_9 / bytes_long_1 = {ratio}"
            )
    else:
        problems.append("the bytes read per step (bytes_long_9, bytes_long_1) and their prediction are not glued")
    # 3. Uptraining is compared with a from-scratch control, and the words follow the seeds' range.
    for tag in ("5", "all"):
        problems += _word_problems(
            glued, f"toy_word_{tag}", f"toy_gap_{tag}_low", f"toy_gap_{tag}_high", ("ahead of", "behind", "level with")
        )
    if not any(k.startswith("toy") and k.endswith("_sc5") for k in glued):
        problems.append("no from-scratch control is glued beside the uptrained toy (toy<seed>_sc5)")
    # 4. Random groupings: several draws, and the word follows the interval over the draws.
    problems += _word_problems(
        glued,
        "grouping_word",
        "grouping_gap_low",
        "grouping_gap_high",
        ("higher than", "lower than", "no different from"),
    )
    if float(glued.get("n_draws", 0)) < 2:
        problems.append("random groupings are one draw: glue n_draws >= 2 and report their spread")
    if "first_below" in glued and float(glued["first_below"]) < float(glued.get("conv_cells", 0)):
        summary = " ".join(s for region, s in page.sentences if region == "summary")
        if "Averaging beats keeping one head" in summary:
            problems.append(
                f"the summary says averaging beats keeping one head, but the first head is below both averages in "
                f"only {glued['first_below']:.0f} of {glued['conv_cells']:.0f} cells"
            )
    text = " ".join(s for _, s in page.sentences)
    if re.search(r"on top in \d+ of|comes out on top", text):
        problems.append("the page ranks the grouping methods by cells won, not by their spread over draws")
    # 5. The papers' figures, as facts.md records them.
    for name, value in PAPER_FIGURES.items():
        if name not in glued:
            problems.append(f"{name} is not glued: the chapter does not show the figure exercise 7 expects")
        elif abs(float(glued[name]) - value) > 1e-9:
            problems.append(f"{name} = {glued[name]}, but facts.md records {value}")
    # 6. Quiz 4: the cache grows with g·d_k, so it cannot choose d_k.
    quiz = next((c.source for c in nb.cells if c.cell_type == "markdown" and "## Check yourself" in c.source), "")
    q4 = quiz[quiz.find("**4.**") :] if "**4.**" in quiz else ""
    if not q4:
        problems.append("quiz 4 (head sizes) is missing")
    elif not re.search(r"g \\cdot d_k|g · d_k|g\s*\\cdot\s*d_k", q4) or re.search(
        r"cache grows with \$d_k\$ per key/value head|mostly the KV cache", q4
    ):
        problems.append("quiz 4 credits the KV cache with head sizes; the cache grows with g·d_k, not d_k")
    return problems
