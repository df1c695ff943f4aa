"""Budget checks: a verdict drawn from training stands only if it survives a longer run.

A chapter trains small models for a few hundred steps, so that it runs in about a minute. A sentence such as "no
single head learns both relations" is then a statement about *that budget*, and may be false at a longer one (the
model was only slower). So every verdict the course draws from training ("cannot", "fails", "learns", "dips", a
ranking of configurations) comes with a **budget check**: the same experiment at least :data:`MIN_FACTOR` times the
steps and over at least :data:`MIN_SEEDS` seeds, run by a script in ``benchmarks/`` and committed as a record
(``benchmarks/results/budget_checks/<id>.json``, shipped in the package as ``manyheads/data/budget_checks/<id>.json``
so that a chapter opened in Colab reads the same file). A verdict stands only if it holds for every seed at the longer
budget; otherwise the chapter says what the longer run shows.

The chapter never types the verdict: it glues the sentence this module builds from the record, so that a verdict
without a record cannot be written and a record that turns changes the sentence::

    check = mh.budget_check("ch1-single-head-both-relations")
    mh.glue_verdict("verdict_single_head", check)   # glues the sentence and its record's id, budget and outcome

``tests/helpers/claims.py`` (rule 4) checks every glued ``verdict_*`` against its record, without calling this
module; ``tests/package/test_budget_checks.py`` checks every committed record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

__all__ = [
    "MIN_FACTOR",
    "MIN_SEEDS",
    "BudgetCheck",
    "BudgetCheckError",
    "budget_check",
    "budget_check_ids",
    "glue_verdict",
    "write_budget_check",
]

MIN_FACTOR = 5  # the check runs at least 5x the chapter's steps ...
MIN_SEEDS = 3  # ... from at least 3 seeds


class BudgetCheckError(ValueError):
    """A budget-check record that is missing, malformed, or too short (fewer steps or seeds than the rule)."""


@dataclass(frozen=True)
class BudgetCheck:
    """One verdict and the longer run that tests it.

    ``numbers`` holds every number the verdict rests on, keyed by budget ("300", "1500"), then by configuration and
    seed, as the benchmark computed them; ``shows`` is the benchmark's one-sentence account of the longer run (its
    numbers formatted from ``numbers``), quoted by :meth:`sentence` when the verdict does not hold.
    """

    id: str  # "ch1-single-head-both-relations"
    chapter: str  # the chapter's notebook stem: "01_single_head_bottleneck"
    verdict: str  # the verdict at the chapter's budget, as the chapter states it: "no single-head run learns both"
    criterion: str  # the test applied to every seed at the longer budget
    chapter_steps: int
    steps: int
    seeds: tuple[int, ...]
    holds: bool  # the criterion held for every seed at ``steps``
    shows: str  # what the longer run shows, one sentence
    numbers: dict = field(default_factory=dict)
    command: str = ""  # how to rerun it
    meta: dict = field(default_factory=dict)  # machine, date, seconds

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise BudgetCheckError(f"budget check {self.id!r}: " + "; ".join(problems))

    def problems(self) -> list[str]:
        found = []
        if not self.id or not self.verdict or not self.criterion or not self.shows.strip():
            found.append("id, verdict, criterion and shows must all be filled in")
        if self.chapter_steps <= 0 or self.steps < MIN_FACTOR * self.chapter_steps:
            found.append(
                f"{self.steps} steps is less than {MIN_FACTOR}x the chapter's {self.chapter_steps}: rerun it longer"
            )
        if len(set(self.seeds)) < MIN_SEEDS:
            found.append(f"{len(set(self.seeds))} seed(s) {list(self.seeds)}: a check needs at least {MIN_SEEDS}")
        if not self.numbers:
            found.append("no numbers: the record must hold every number the verdict rests on")
        return found

    @property
    def factor(self) -> float:
        return self.steps / self.chapter_steps

    @property
    def outcome(self) -> str:
        return "holds" if self.holds else "does not hold"

    def sentence(self) -> str:
        """The verdict with its budget and the check's outcome, as the chapter quotes it."""
        check = f"a check at {self.steps:,} steps over {len(self.seeds)} seeds"
        if self.holds:
            return (
                f"{_capital(self.verdict)} in {self.chapter_steps:,} training steps, and {check} confirms it: "
                f"{self.shows}"
            )
        return (
            f"{_capital(self.verdict)} in {self.chapter_steps:,} training steps, but {check} does not bear it out: "
            f"{self.shows}"
        )

    def to_json(self) -> str:
        data = asdict(self)
        data["seeds"] = list(self.seeds)
        return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping) -> BudgetCheck:
        try:
            return cls(**{**data, "seeds": tuple(data["seeds"])})
        except (TypeError, KeyError) as exc:
            raise BudgetCheckError(f"budget check record {data.get('id', '?')!r} is malformed: {exc}") from exc


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _records() -> Path:
    return Path(str(resources.files("manyheads.data") / "budget_checks"))


def budget_check_ids() -> list[str]:
    """The ids of every record shipped with the package."""
    return sorted(p.stem for p in _records().glob("*.json"))


def budget_check(check_id: str) -> BudgetCheck:
    """The committed record ``check_id``; a clear error when it is missing or breaks the rule."""
    path = _records() / f"{check_id}.json"
    if not path.is_file():
        known = ", ".join(budget_check_ids()) or "none"
        raise BudgetCheckError(
            f"no budget-check record {check_id!r} in {path.parent} (known: {known}). Run the benchmark that makes it "
            f"(benchmarks/budget_check_*.py) and commit its record."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BudgetCheckError(f"{path} is not valid JSON ({exc}); rerun its benchmark") from exc
    return BudgetCheck.from_dict(data)


def glue_verdict(name: str, check: BudgetCheck, display: bool = False) -> str:
    """Glue the verdict's sentence under ``name`` (which must start with ``verdict_``) and, beside it, what the
    claims checker needs: ``<name>_record`` (the id), ``<name>_steps`` (the chapter's budget), ``<name>_check_steps``,
    ``<name>_check_seeds`` and ``<name>_outcome`` ("holds" / "does not hold"). Returns the sentence."""
    from manyheads.viz.glue import glue

    if not name.startswith("verdict_"):
        raise ValueError(
            f"a verdict's glue name starts with 'verdict_' (the claims checker looks for it), got {name!r}"
        )
    if not isinstance(check, BudgetCheck):
        raise TypeError(f"glue_verdict needs a BudgetCheck (mh.budget_check(id)), got {type(check).__name__}")
    sentence = check.sentence()
    glue(name, sentence, display=display)
    glue(f"{name}_record", check.id, display=False)
    glue(f"{name}_steps", check.chapter_steps, display=False)
    glue(f"{name}_check_steps", check.steps, display=False)
    glue(f"{name}_check_seeds", len(check.seeds), display=False)
    glue(f"{name}_outcome", check.outcome, display=False)
    return sentence


def write_budget_check(check: BudgetCheck, root: Path) -> list[Path]:
    """Write ``check`` as ``benchmarks/results/budget_checks/<id>.json`` and the package's copy under ``root``
    (the repository). Both are committed; a test keeps them identical."""
    if any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(check.numbers)):
        raise BudgetCheckError(f"budget check {check.id!r}: a number is NaN or infinite")
    text = check.to_json()
    paths = [
        root / "benchmarks" / "results" / "budget_checks" / f"{check.id}.json",
        root / "src" / "manyheads" / "data" / "budget_checks" / f"{check.id}.json",
    ]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return paths


def _leaves(value) -> Sequence:
    if isinstance(value, Mapping):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
