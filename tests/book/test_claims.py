"""Comparing words against the numbers beside them, on the pages as a reader sees them (CONTRIBUTING.md, "Claims
follow from evidence", rules 1-3).

The checker reads a page's rendered text (the built HTML; or, without a build, the executed notebook's Markdown with
every glue role replaced by its glued output, as myst-nb renders it) and parses the numbers printed there. It never
calls ``manyheads.analysis.claims``, which generates the words: a bug in the generator cannot hide here.

1. A sentence saying something "helps", "hurts", "improves" or "worsens" must not print an interval that contains 0;
   one saying "no measurable difference" / "inconclusive" must not print one that excludes 0.
2. "most", "the majority", "nearly all", "almost all" need the share printed with them above 50 % (90 % for "nearly"
   and "almost all"); "a minority" needs it below 50 %.
3. Every glued decimal or percentage in a summary, a "Common misconceptions" box or a quiz (one that equals, at its
   printed precision, a value the executed notebook glued) must also be shown in the page's body, tables or
   outputs: a summary restates the chapter's measurements and cannot quote one the chapter does not show. Typed
   numbers (a paper's figure, the folklore a box corrects, a quiz's arithmetic) are left to review.

Planted pages that break each rule fail the checker (the fixtures below); each chapter's built page is checked with
the build of test_book.py's fixture, and the chapters that break a rule today are strict expected failures naming
the finding (issue 24), to be un-marked when the chapter is fixed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import nbformat
import pytest
from bs4 import BeautifulSoup

from manyheads.course.layout import REPO

# ------------------------------------------------------------------------------------------------------------------
# Pages: sentences by region, and every number the page shows outside its restating parts

RESTATING = ("summary", "check yourself", "common misconceptions")
NUMBER = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"


@dataclass
class Page:
    sentences: list[tuple[str, str]] = field(default_factory=list)  # (region: "body" or a RESTATING name, text)
    measured: list[str] = field(default_factory=list)  # text of the body, tables and outputs (not restating parts)
    glued: list[float] = field(default_factory=list)  # every numeric value the executed notebook glued

    def add(self, region: str, text: str) -> None:
        text = " ".join(text.split())
        if not text:
            return
        if region == "body":
            self.measured.append(text)
        for sentence in re.split(r"(?<=[.!?;])\s+(?=[A-Z(\"“*])", text):
            self.sentences.append((region, sentence))


def _region(titles: list[str]) -> str:
    for title in titles:
        for name in RESTATING:
            if title.strip().lower().startswith(name):
                return name
    return "body"


def page_from_html(html: str, glued: dict[str, dict]) -> Page:
    """The article of a built page: paragraphs and list items by section and admonition; tables and outputs.
    ``glued``: the executed notebook's glued values (:func:`glued_values`)."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article") or soup.body or soup
    for junk in article.select("script, style, .headerlink, mjx-assistive-mml"):
        junk.decompose()
    page = Page(glued=_numbers(glued))
    for el in article.find_all(["p", "li", "table", "div"]):
        if el.name == "div" and "cell_output" not in (el.get("class") or []):
            continue
        if el.name == "li" and el.find("p"):
            continue  # its paragraphs are read on their own
        if el.find_parent(["table"]) or (el.name == "p" and el.find_parent("li") and el.parent.name != "li"):
            continue
        if el.name in ("table", "div") or el.find_parent("div", class_="cell_output"):
            page.measured.append(el.get_text(" "))
            continue
        if "admonition-title" in (el.get("class") or []):
            continue
        titles = [
            t.get_text(" ")
            for a in el.find_parents("div", class_="admonition")
            for t in a.select("p.admonition-title")[:1]
        ]
        titles += [
            s.find(re.compile("^h[1-6]$")).get_text(" ")
            for s in el.find_parents("section")
            if s.find(re.compile("^h[1-6]$"))
        ]
        titles += [s.get_text(" ") for s in el.find_parents("details") for s in s.select("summary")[:1]]
        page.add(_region(titles), el.get_text(" "))
    return page


RECORD = "application/papermill.record/"  # myst-nb's prefix for a value glued with display=False (not shown)


def glued_values(nb) -> dict[str, dict]:
    """{name: mime bundle} of every value the executed notebook glued (myst-nb's ``scrapbook`` outputs)."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                found[name] = {k.removeprefix(RECORD): v for k, v in out.get("data", {}).items()}
    return found


def _numbers(glued: dict[str, dict]) -> list[float]:
    values = []
    for bundle in glued.values():
        try:
            values.append(float(str(bundle.get("text/plain", "")).strip("'\"")))
        except ValueError:
            pass
    return values


def _glue_text(bundle: dict, fmt: str) -> str:
    text = str(bundle.get("text/plain", ""))
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if fmt:
        try:
            return format(float(text), fmt)
        except ValueError:
            try:
                return format(int(text), fmt)
            except ValueError:
                return text
    return text


GLUE_ROLE = re.compile(r"\{glue(?::(text|md|))?\}`([A-Za-z_][\w]*)(?::([^`]*))?`")


def page_from_notebook(nb) -> Page:
    """An executed notebook as myst-nb renders it: glue roles replaced by their glued values, Markdown headings and
    ``{admonition}`` / ``<details>`` blocks as regions, Markdown tables, glued tables and cell outputs measured."""
    glued = glued_values(nb)
    page = Page(glued=_numbers(glued))
    heading = ""
    for cell in nb.cells:
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if any(k.startswith(RECORD) for k in data):
                    continue  # glued with display=False: on the page only where the text quotes it
                if "text/html" in data:
                    page.measured.append(BeautifulSoup(str(data["text/html"]), "html.parser").get_text(" "))
                elif "text/plain" in data or "text" in out:
                    page.measured.append(str(data.get("text/plain", out.get("text", ""))))
            continue
        if cell.cell_type != "markdown":
            continue

        def render(m):
            kind, name, fmt = m.groups()
            if name not in glued:
                return f"⟨{name}⟩"
            bundle = glued[name]
            if kind is None and "text/html" in bundle:  # {glue:}`table`: the table itself, measured
                page.measured.append(BeautifulSoup(str(bundle["text/html"]), "html.parser").get_text(" "))
                return ""
            return _glue_text(bundle, fmt or "")

        source = GLUE_ROLE.sub(render, cell.source)
        source = re.sub(r"\{(?:glue:)?\w+\}`([^`]*)`", r"\1", source)  # other roles: their text
        source = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", source, flags=re.DOTALL)  # math is not a claim
        heading = _read_markdown(page, source, heading)
    return page


def _read_markdown(page: Page, source: str, heading: str) -> str:
    """Adds the paragraphs of one Markdown cell to ``page`` by region; returns the heading in force at its end."""
    admonitions: list[str] = []
    paragraph: list[str] = []
    for line in [*source.splitlines(), ""]:
        stripped = line.strip()
        block = stripped.startswith(("#", "|", ":")) or not stripped or re.match(r"^(```+|:::+)(\{|\s*$)", stripped)
        if block and paragraph:
            text = " ".join(paragraph)
            titles = [*admonitions, heading, *re.findall(r"<summary>(.*?)</summary>", text)]
            page.add(_region(titles), re.sub(r"<[^>]+>", " ", text))
            paragraph = []
        if stripped.startswith("#"):
            heading = stripped.lstrip("#").strip()
        elif re.match(r"^(```+|:::+)\{", stripped):
            admonitions.append(re.sub(r"^(```+|:::+)\{[\w-]+\}\s*", "", stripped) or "note")
        elif re.match(r"^(```+|:::+)\s*$", stripped) and admonitions:
            admonitions.pop()
        elif stripped.startswith("|"):
            page.measured.append(stripped.replace("|", " "))
        elif not block:
            paragraph.append(re.sub(r"^([-*]|\d+\.)\s+", "", stripped))
    return heading


# ------------------------------------------------------------------------------------------------------------------
# The rules


def _num(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


INTERVAL = re.compile(
    rf"\[\s*({NUMBER})\s*(?:%\s*)?[,;]\s*({NUMBER})\s*%?\s*\]"  # [low, high]
    rf"|({NUMBER})\s*±\s*({NUMBER})"  # estimate ± half-width
    rf"|(?:interval|CI)[^.;]*?(?:from\s+)?({NUMBER})\s*%?\s*(?:to|–|—)\s*({NUMBER})"  # "interval 0.1 to 0.3"
)
DIRECTIONAL = re.compile(r"\b(helps?|helped|hurts?|improves?|improved|worsens?|worsened)\b", re.IGNORECASE)
NEUTRAL = re.compile(r"no measurable difference|inconclusive|cannot be told (?:apart )?from (?:noise|chance)", re.I)
MAJORITY = re.compile(r"(?<!\bthe )(?<!\bat )\b(nearly all|almost all|the majority|most)\b(?! likely)", re.IGNORECASE)
MINORITY = re.compile(r"\ba minority\b", re.IGNORECASE)
SHARE = re.compile(rf"({NUMBER})\s*%|\b(\d+)\s+(?:of|out of)\s+(?:the\s+|all\s+|its\s+)?(\d+)\b")


def intervals(sentence: str) -> list[tuple[float, float]]:
    found = []
    for m in INTERVAL.finditer(sentence):
        g = m.groups()
        if g[0] is not None:
            found.append((_num(g[0]), _num(g[1])))
        elif g[2] is not None:
            est, half = _num(g[2]), abs(_num(g[3]))
            found.append((est - half, est + half))
        else:
            found.append((_num(g[4]), _num(g[5])))
    return found


def shares(sentence: str, start: int, end: int) -> list[float]:
    """Shares printed with the word at ``start:end`` (up to 80 characters after it, then up to 30 before it in the
    same clause), as fractions: "62 %", "10 of 72"."""
    after, before = [], []
    for m in SHARE.finditer(sentence):
        before_word = sentence[m.end() : start]
        if not (
            end <= m.start() <= end + 80 or (m.end() <= start and len(before_word) <= 30 and ";" not in before_word)
        ):
            continue
        if m.group(1) is not None:
            value = _num(m.group(1)) / 100
        else:
            k, n = int(m.group(2)), int(m.group(3))
            if not 0 < n or k > n:
                continue
            value = k / n
        (after if m.start() >= end else before).append(value)
    return after + before[::-1]


def check(page: Page) -> list[str]:
    """Every sentence of ``page`` that breaks rule 1, 2 or 3, with the rule and the numbers."""
    problems = []
    measured = [m.group(0) for text in page.measured for m in re.finditer(NUMBER + r"\s*%?", text)]
    for region, sentence in page.sentences:
        spans = intervals(sentence)
        if DIRECTIONAL.search(sentence) and any(low <= 0 <= high for low, high in spans):
            problems.append(
                f"rule 1: {DIRECTIONAL.search(sentence).group(0)!r} with an interval containing 0: {sentence}"
            )
        if NEUTRAL.search(sentence) and spans and all(low > 0 or high < 0 for low, high in spans):
            problems.append(f"rule 1: {NEUTRAL.search(sentence).group(0)!r} with intervals excluding 0: {sentence}")
        for m in MAJORITY.finditer(sentence):
            quoted = shares(sentence, m.start(), m.end())
            need = 0.9 if m.group(1).lower() in ("nearly all", "almost all") else 0.5
            if quoted and quoted[0] <= need:
                problems.append(f"rule 2: {m.group(1)!r} with a share of {quoted[0]:.0%}: {sentence}")
        for m in MINORITY.finditer(sentence):
            quoted = shares(sentence, m.start(), m.end())
            if quoted and quoted[0] >= 0.5:
                problems.append(f"rule 2: 'a minority' with a share of {quoted[0]:.0%}: {sentence}")
        if region != "body":
            for m in re.finditer(rf"({NUMBER})\s*(%?)", sentence):
                text, percent = m.group(1), m.group(2)
                if "." not in text and not percent:
                    continue  # counts, years, layer numbers: rule 3 looks at measured values only
                if not any(_is_glued(text, percent, value) for value in page.glued):
                    continue  # typed: a paper's figure, folklore a box corrects, a quiz's arithmetic
                if not any(_same(text, percent, other) for other in measured):
                    problems.append(
                        f"rule 3: the {region} quotes {text}{percent}, which the page never shows: {sentence}"
                    )
    return problems


def _is_glued(text: str, percent: str, value: float) -> bool:
    digits = _decimals(text)
    candidates = (value, value * 100) if percent else (value,)
    return any(round(v, digits) == round(_num(text), digits) for v in candidates)


def _same(text: str, percent: str, other: str) -> bool:
    other_percent = other.rstrip().endswith("%")
    if bool(percent) != other_percent:
        return False
    digits = _decimals(text)
    return round(_num(other.rstrip(" %")), digits) == round(_num(text), digits)


# ------------------------------------------------------------------------------------------------------------------
# Planted pages: each must fail the checker, and its corrected twin must pass


def _notebook(*cells: tuple[str, str], glue: dict[str, object] | None = None):
    nb = nbformat.v4.new_notebook()
    outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={RECORD + "text/plain": repr(value)},
            metadata={"scrapbook": {"name": name, "mime_prefix": ""}},
        )
        for name, value in (glue or {}).items()
    ]
    code = nbformat.v4.new_code_cell("glue(...)")
    code.outputs = outputs
    nb.cells = [code] + [
        nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src) for kind, src in cells
    ]
    return nb


HELPS = """## Removing one head
Removing head 3.7 {glue:text}`word` the score by {glue:text}`effect:+.3f` (95 % interval [{glue:text}`low:.3f`, {glue:text}`high:.3f`])."""  # noqa: E501
MOST = """## Pruning
Within 10 % of the unpruned score, {glue:text}`word` heads can be removed ({glue:text}`share:.0f` % of 72)."""
SUMMARY_TABLE = """## Induction
| seed | best duplicate-token score |
|---|---|
| 0 | {glue:text}`dup0:.2f` |
| 1 | {glue:text}`dup1:.2f` |

## Summary
- Seed 0 uses a duplicate-token head (score {glue:text}`dup0_summary:.2f`)."""


def test_a_planted_helps_with_an_interval_containing_zero_fails():
    bad = _notebook(("md", HELPS), glue={"word": "helps", "effect": 0.012, "low": -0.004, "high": 0.027})
    problems = check(page_from_notebook(bad))
    assert len(problems) == 1 and problems[0].startswith("rule 1: 'helps'"), problems
    good = _notebook(("md", HELPS), glue={"word": "helps", "effect": 0.012, "low": 0.004, "high": 0.027})
    assert check(page_from_notebook(good)) == []


def test_a_planted_no_difference_with_an_interval_excluding_zero_fails():
    page = _notebook(
        ("md", HELPS), glue={"word": "makes no measurable difference to", "effect": -0.02, "low": -0.03, "high": -0.01}
    )
    assert [p[:32] for p in check(page_from_notebook(page))] == ["rule 1: 'no measurable differenc"]


def test_a_planted_most_under_half_fails():
    bad = _notebook(("md", MOST), glue={"word": "most", "share": 42.0})
    problems = check(page_from_notebook(bad))
    assert len(problems) == 1 and problems[0].startswith("rule 2: 'most' with a share of 42%"), problems
    assert check(page_from_notebook(_notebook(("md", MOST), glue={"word": "most", "share": 89.0}))) == []
    assert check(page_from_notebook(_notebook(("md", MOST), glue={"word": "a minority", "share": 42.0}))) == []
    assert check(page_from_notebook(_notebook(("md", MOST), glue={"word": "a minority", "share": 61.0})))


def test_a_planted_summary_contradicting_its_table_fails():
    bad = _notebook(("md", SUMMARY_TABLE), glue={"dup0": 0.05, "dup1": 0.61, "dup0_summary": 0.35})
    problems = check(page_from_notebook(bad))
    assert len(problems) == 1 and problems[0].startswith("rule 3: the summary quotes 0.35"), problems
    good = _notebook(("md", SUMMARY_TABLE), glue={"dup0": 0.05, "dup1": 0.61, "dup0_summary": 0.049})
    assert check(page_from_notebook(good)) == []  # 0.049 printed as 0.05: the table's value


def test_the_superlative_most_and_at_most_are_not_shares():
    page = _notebook(("md", "## Body\nThe most sensitive layer keeps 12 %. At most 30 % of heads go."))
    assert check(page_from_notebook(page)) == []
    far = "## Body\nA 5 % budget of steps is not a 5 % budget of compute; training closes most of the gap."
    assert check(page_from_notebook(_notebook(("md", far)))) == []  # no share quoted with "most"


def test_typed_numbers_in_a_box_or_quiz_are_left_to_review():
    box = '```{admonition} Common misconceptions\n"Multi-head attention costs 33 % more parameters." No.\n```'
    quiz = "## Check yourself\nWith weight 0.5 on each of two tokens, the output is their mean."
    assert check(page_from_notebook(_notebook(("md", box), ("md", quiz), glue={"n": 0.71}))) == []


# The same planted pages, as the book would render them: the rules read HTML the same way.
PLANTED_HTML = """<html><body><article class="bd-article">
<section id="removing"><h2>Removing one head</h2>
<p>Removing head 3.7 helps the score by +0.012 (95 % interval [−0.004, 0.027]).</p>
<p>Within 10 % of the unpruned score, most heads can be removed (42 % of 72).</p>
<div class="cell_output"><table><tr><th>seed</th><th>score</th></tr><tr><td>0</td><td>0.05</td></tr></table></div>
</section>
<div class="admonition"><p class="admonition-title">Common misconceptions</p><p>Seed 0 scores 0.35.</p></div>
<section id="summary"><h2>Summary</h2><ul><li><p>Seed 0 uses a duplicate-token head (score 0.35).</p></li>
<li>Seed 1 scores 0.05.</li></ul></section>
<section id="check-yourself"><h2>Check yourself</h2><details><summary>Answer</summary><p>It scored 0.05.</p></details>
</section></article></body></html>"""


def test_the_planted_page_rendered_as_html_fails_every_rule():
    glued = {"effect": {"text/plain": "0.012"}, "share": {"text/plain": "0.42"}, "dup0": {"text/plain": "0.05"}}
    glued["dup0_summary"] = {"text/plain": "0.35"}
    problems = check(page_from_html(PLANTED_HTML, glued))
    assert [p.split(":")[0] for p in problems] == ["rule 1", "rule 2", "rule 3", "rule 3"], problems
    assert "common misconceptions quotes 0.35" in problems[2] and "summary quotes 0.35" in problems[3]


# ------------------------------------------------------------------------------------------------------------------
# The real chapters

# The rules above over today's chapters: a scan of every chapter's text finds no sentence where a rule applies to a
# typed number, and the few sentences that print a comparing word next to glued numbers (chapter 4's "does not help",
# the interlude's "worse than uniform guessing", chapter 7's "the most likely") quote no interval or share the rule
# could contradict; so no chapter is marked as expected to fail them. The reader's findings that the rules cannot
# see are pinned below, one phrase each, as strict expected failures: each turns into a failure when its chapter is
# fixed, and its entry must then go.
FINDINGS = [
    (
        "05_pruning",
        "body",
        r"about 20 people",
        "wrong fact: the shipped Lee file has 15-29 ratings per snippet (facts §21)",
    ),
    ("05_pruning", "any", r"back each other up", "'heads back each other up' is asserted with no joint-ablation test"),
    (
        "06_layer_hierarchy",
        "restating",
        r"seed 0,? (?:uses )?a duplicate-token head|in seed 0 a duplicate-token head",
        "the summary, box and quiz give seed 0 a duplicate-token head; the chapter's table scores it 0.05",
    ),
    (
        "06_layer_hierarchy",
        "restating",
        r"still matter when removed",
        "the box says sink-dominated layers still matter when removed; 23 of 30 layers cost < 0.1 nats",
    ),
    (
        "06_layer_hierarchy",
        "restating",
        r"local bottom layers",
        "the summary's 'local bottom layers' contradicts the metrics (layer 0 broadest, layers 10-11 most local)",
    ),
]


def _sentences(page: Page, where: str) -> list[str]:
    return [text for region, text in page.sentences if where == "any" or (region == "body") == (where == "body")]


@pytest.mark.parametrize(
    ("stem", "where", "pattern"),
    [
        pytest.param(
            stem, where, pattern, id=f"{stem}-{pattern[:24]}", marks=pytest.mark.xfail(strict=True, reason=why)
        )
        for stem, where, pattern, why in FINDINGS
    ],
)
def test_reader_finding_is_fixed(stem, where, pattern):
    """The chapter's text (as the book renders it: glue resolved where the chapter has been executed, here the source
    with glue names) no longer says what issue 24's reader found wrong."""
    page = page_from_notebook(nbformat.read(REPO.chapters_dir / f"{stem}.ipynb", as_version=4))
    said = [t for t in _sentences(page, where) if re.search(pattern, t, re.IGNORECASE)]
    assert said == []


def _chapter_cases():
    return [pytest.param(chapter, id=chapter.stem) for chapter in REPO.chapters()]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", _chapter_cases())
def test_chapter_words_follow_from_its_numbers(book, chapter):
    """The built page's words against the built page's numbers (the build of test_book.py's ``book`` fixture)."""
    html = (book.html / f"chapters/{chapter.stem}.html").read_text(encoding="utf-8")
    glued = glued_values(nbformat.read(book.executed(chapter), as_version=4))
    assert check(page_from_html(html, glued)) == []


@pytest.mark.slow
@pytest.mark.parametrize("chapter", _chapter_cases())
def test_chapter_summary_quotes_its_glued_values(book, chapter):
    """The executed notebook's glue, rendered as myst-nb renders it, read the same way (no HTML parsing involved)."""
    nb = nbformat.read(book.executed(chapter), as_version=4)
    assert check(page_from_notebook(nb)) == []


def test_the_checker_reads_a_real_chapters_text():
    """Every chapter's source parses: its summary, box and quiz are found, with sentences in each."""
    for chapter in REPO.chapters():
        nb = nbformat.read(chapter, as_version=4)
        regions = {region for region, _ in page_from_notebook(nb).sentences}
        assert {"body", "summary", "check yourself"} <= regions, (chapter.stem, regions)
