"""The wording checker of CONTRIBUTING.md's "Claims follow from evidence" (rules 1-5), shared by
tests/book/test_claims.py (planted pages) and tests/book/test_book.py (the built chapters): see test_claims.py's
docstring for the rules. It never calls ``manyheads.analysis.claims`` (which generates the words) nor
``manyheads.analysis.budget_checks`` (which writes the verdicts): it reads the committed records itself."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup

# ------------------------------------------------------------------------------------------------------------------
# Pages: sentences by region, and every number the page shows outside its restating parts

RESTATING = ("summary", "check yourself", "common misconceptions")
NUMBER = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"


@dataclass
class Page:
    sentences: list[tuple[str, str]] = field(default_factory=list)  # (region: "body" or a RESTATING name, text)
    measured: list[str] = field(default_factory=list)  # text of the body, tables and outputs (not restating parts)
    glued: list[float] = field(default_factory=list)  # every numeric value the executed notebook glued
    named: dict[str, str] = field(default_factory=dict)  # every glued value by name, as plain text (rules 4 and 5)
    paragraphs: list[str] = field(default_factory=list)  # every paragraph or list item of prose, any region
    quoted: list[set[str]] = field(default_factory=list)  # per paragraph: the glue names it quotes (notebook pages)

    def add(self, region: str, text: str) -> None:
        names = set(re.findall(GLUE_MARK + r"(\w+)" + GLUE_MARK, text))
        text = " ".join(_unmark(text).split())
        if not text:
            return
        self.paragraphs.append(text)
        self.quoted.append(names)
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
    page = Page(glued=_numbers(glued), named=_named(glued))
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


def _named(glued: dict[str, dict]) -> dict[str, str]:
    return {name: _glue_text(bundle, "") for name, bundle in glued.items()}


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


# page_from_notebook marks where each glue role was rendered, so that rule 5 knows which value a paragraph quotes
# (a number that merely equals a score is not the score); Page.add takes the marks out.
GLUE_MARK = "\ue000"


def _unmark(text: str) -> str:
    return re.sub(GLUE_MARK + r"\w+" + GLUE_MARK, "", text)


GLUE_ROLE = re.compile(r"\{glue(?::(text|md|))?\}`([A-Za-z_][\w]*)(?::([^`]*))?`")


def page_from_notebook(nb) -> Page:
    """An executed notebook as myst-nb renders it: glue roles replaced by their glued values, Markdown headings and
    ``{admonition}`` / ``<details>`` blocks as regions, Markdown tables, glued tables and cell outputs measured."""
    glued = glued_values(nb)
    page = Page(glued=_numbers(glued), named=_named(glued))
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
            return f"{GLUE_MARK}{name}{GLUE_MARK}" + _glue_text(bundle, fmt or "")

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
            titles = [*admonitions, heading, *re.findall(r"<summary>(.*?)</summary>", _unmark(text))]
            page.add(_region(titles), re.sub(r"<[^>]+>", " ", text))
            paragraph = []
        if stripped.startswith("#"):
            heading = _unmark(stripped).lstrip("#").strip()
        elif re.match(r"^(```+|:::+)\{", stripped):
            admonitions.append(re.sub(r"^(```+|:::+)\{[\w-]+\}\s*", "", stripped) or "note")
        elif re.match(r"^(```+|:::+)\s*$", stripped) and admonitions:
            admonitions.pop()
        elif stripped.startswith("|"):
            page.measured.append(_unmark(stripped).replace("|", " "))
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


BUDGET_RECORDS = Path(__file__).resolve().parents[2] / "src" / "manyheads" / "data" / "budget_checks"
MIN_FACTOR, MIN_SEEDS = 5, 3  # CONTRIBUTING, rule "Verdicts from training survive a longer budget"
VERDICT_PARTS = ("_record", "_steps", "_check_steps", "_check_seeds", "_outcome")


def check(page: Page, records: Path = BUDGET_RECORDS) -> list[str]:
    """Every sentence of ``page`` that breaks rule 1, 2 or 3, every verdict that breaks rule 4 and every paragraph
    that breaks rule 5, with the rule and the numbers. ``records``: the budget-check records' folder."""
    problems = verdict_problems(page, records) + floor_problems(page)
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


def verdict_problems(page: Page, records: Path = BUDGET_RECORDS) -> list[str]:
    """Rule 4: every glued ``verdict_<name>`` names its budget-check record (``verdict_<name>_record``), the record
    exists with at least 5x the steps and 3 seeds, and the verdict's text states the chapter's budget."""
    problems = []
    for name, text in page.named.items():
        if not name.startswith("verdict_") or name.endswith(VERDICT_PARTS):
            continue
        record_id = page.named.get(f"{name}_record")
        if not record_id:
            problems.append(f"rule 4: {name} is glued without a budget-check record ({name}_record): {text[:80]}")
            continue
        path = records / f"{record_id}.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            steps, chapter_steps, seeds = int(record["steps"]), int(record["chapter_steps"]), set(record["seeds"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"rule 4: {name}'s record {record_id!r} is missing or unreadable at {path}: {exc}")
            continue
        if chapter_steps <= 0 or steps < MIN_FACTOR * chapter_steps:
            problems.append(
                f"rule 4: {name}'s record {record_id!r} ran {steps} steps, less than {MIN_FACTOR}x the chapter's "
                f"{chapter_steps}"
            )
        if len(seeds) < MIN_SEEDS:
            problems.append(f"rule 4: {name}'s record {record_id!r} has {len(seeds)} seed(s), fewer than {MIN_SEEDS}")
        if f"{chapter_steps:,}" not in text and str(chapter_steps) not in text:
            problems.append(f"rule 4: {name} does not state its budget ({chapter_steps} steps): {text[:80]}")
    return problems


def floor_problems(page: Page) -> list[str]:
    """Rule 5: a paragraph that quotes a score glued with a floor (``<name>`` and ``<name>_floor``) quotes the floor
    too: the floor's glue, or a printed number equal to the floor at its printed precision. Which paragraphs quote the
    score is known from the rendered glue roles, so the rule reads executed notebooks (the built HTML carries no
    names; test_book.py runs the checker over both)."""
    problems = []
    for paragraph, names in zip(page.paragraphs, page.quoted):
        for name in sorted(names):
            floor_name = f"{name}_floor"
            if floor_name not in page.named or floor_name in names:
                continue
            floor = _float(page.named[floor_name])
            printed = [m.group(0) for m in re.finditer(NUMBER, paragraph) if "." in m.group(0)]
            if floor is not None and any(round(_num(t), _decimals(t)) == round(floor, _decimals(t)) for t in printed):
                continue
            problems.append(
                f"rule 5: {name} ({page.named[name]}) is quoted without its floor ({page.named[floor_name]}): "
                f"{paragraph[:120]}"
            )
    return problems


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


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
