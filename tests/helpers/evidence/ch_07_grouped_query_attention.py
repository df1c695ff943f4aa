"""Chapter 7's evidence checks: its verdicts on speed, uptraining and groupings agree with the intervals it measured,
its text claims no speed-up its own timing contradicts, it shows the papers' figures exercise 7 expects, and quiz 4
does not credit the KV cache with choosing d_k (issue 24). Issue 35: the byte model counts each K/V variant's own
weights (B-1), a float32 timing is never set beside the 16-bit prediction (B-2), and the page's account of which
conversions fall below MiniLM's no-attention floor follows the paired intervals it glues (B-31)."""

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
VARIANTS = (9, 3, 1)  # SmolLM2's K/V heads: repeated, as trained, mean-pooled
REDUCED = (6, 4, 3, 2, 1)  # MiniLM's conversions
MEASURED_RATIO = re.compile(r"\{glue:text\}`ratio_(?:long|short)_\d")
SIXTEEN_BIT_PREDICTION = re.compile(r"\{glue:text\}`predicted_(?:long|short)_\d")


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
    problems += _own_weights_problems(glued)
    problems += _like_with_like_problems(nb)
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
        ("higher than", "lower than", "not measurably different from"),
    )
    if float(glued.get("n_draws", 0)) < 2:
        problems.append("random groupings are one draw: glue n_draws >= 2 and report their spread")
    problems += _floor_problems(glued, page)
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


def _own_weights_problems(glued: dict) -> list[str]:
    """B-1: each K/V variant's weights are its own (params_9 > params_3 > params_1, and the 16-bit weights the byte
    model counts are 2 bytes per parameter of that variant); one count for all three is the mistake."""
    names = [f"params_{g}" for g in VARIANTS] + [f"weights_long_{g}" for g in VARIANTS]
    missing = [n for n in names if n not in glued]
    if missing:
        return [f"the byte model's parameter counts per variant are not glued ({', '.join(missing)})"]
    params = [float(glued[f"params_{g}"]) for g in VARIANTS]
    problems = []
    if not params[0] > params[1] > params[2]:
        problems.append(
            f"the byte model gives 9, 3 and 1 K/V heads {params} parameters: variants with fewer K/V heads have "
            f"smaller K/V projections, so one count for all of them is wrong"
        )
    for g, n in zip(VARIANTS, params):
        if float(glued[f"weights_long_{g}"]) != 2 * n:
            problems.append(f"weights_long_{g} = {glued[f'weights_long_{g}']} is not 2 bytes x params_{g} = {2 * n:g}")
    return problems


def _sentences(nb) -> list[str]:
    chunks = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for chunk in re.split(r"\n\s*\n|\n(?=\s*- )", cell.source):
                chunks += re.split(r"(?<=[.;])\s+(?=[A-Z{(])", chunk)
    return chunks


def _like_with_like_problems(nb) -> list[str]:
    """B-2: a measured (float32) speed ratio is set beside the float32 as-run prediction, never the 16-bit one."""
    return [
        f"a float32 timing is compared with the 16-bit prediction (use predicted_as_run_*): {sentence[:160]}"
        for sentence in _sentences(nb)
        if MEASURED_RATIO.search(sentence) and SIXTEEN_BIT_PREDICTION.search(sentence)
    ]


def _floor_problems(glued: dict, page) -> list[str]:
    """B-31: the similarity task's floor is glued; the conversions the page lists as below it are those whose ρ is
    below it (``point_below_floor_groups``) and those whose paired interval against it lies below 0
    (``below_floor_groups``); and the page calls a conversion worse than no attention only when an interval says so."""
    if "base_rho_floor" not in glued:
        return ["MiniLM's no-attention floor (base_rho_floor) is not glued beside its ρ"]
    floor = float(glued["base_rho_floor"])
    intervals = [g for g in REDUCED if f"rho_{g}_minus_floor_high" in glued]
    if not intervals:
        return ["no paired interval of a converted model's ρ against the floor is glued (rho_<g>_minus_floor_*)"]
    below = [str(g) for g in intervals if float(glued[f"rho_{g}_minus_floor_high"]) < 0]
    problems = []
    said = re.findall(r"\d+", str(glued.get("below_floor_groups", "")))
    if said != below:
        problems.append(
            f"below_floor_groups says {glued.get('below_floor_groups')!r}, but the paired intervals put "
            f"{below or 'no conversion'} below the floor"
        )
    if "point_below_floor_groups" in glued:
        points = [
            str(g) for g in REDUCED if f"conv_mean_{g}_rho" in glued and float(glued[f"conv_mean_{g}_rho"]) < floor
        ]
        said = re.findall(r"\d+", str(glued["point_below_floor_groups"]))
        if said != points:
            problems.append(
                f"point_below_floor_groups says {glued['point_below_floor_groups']!r}, but the mean-pooled ρ is below "
                f"the floor ({floor:g}) at {points or 'no conversion'}"
            )
    text = " ".join(s for _, s in page.sentences)
    if not below and re.search(r"worse than (?:no attention|removing all attention|MiniLM with no attention)", text):
        problems.append("the page says a conversion is worse than no attention, but no paired interval lies below 0")
    return problems
