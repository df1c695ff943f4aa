"""A Sphinx extension for the book: the chapters' measured run times as MyST substitutions, so the landing page quotes
the benchmark instead of typing a time.

It reads ``benchmarks/results/chapters_solo.json`` (committed; written by ``benchmarks/chapters.py --solo``: the median
of runs of each chapter alone) and defines ``{{ chapter_time_max }}``, ``{{ chapter_time_min }}``,
``{{ chapter_time_total }}``, ``{{ chapter_time_slowest }}`` and ``{{ chapter_time_where }}`` (the CPU, threads and
date of the measurement). A missing or incomplete file leaves them undefined, and the ``-W`` build fails on the
landing page's undefined substitutions: the page never shows a time the benchmark did not give for every chapter.
"""

from __future__ import annotations

import json
from pathlib import Path

from sphinx.util import logging

TIMINGS = Path("benchmarks") / "results" / "chapters_solo.json"
LOG = logging.getLogger(__name__)


def chapter_times(root: Path) -> dict[str, str]:
    """The substitutions, from ``root``'s committed timings; {} (with a warning) when a chapter has no timing."""
    path = root / TIMINGS
    if not path.is_file():
        LOG.warning(f"{path} is missing: run benchmarks/chapters.py --solo and commit its JSON")
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    seconds = {row["chapter"]: float(row["solo_s"]) for row in data["rows"]}
    chapters = {p.stem for p in (root / "chapters").glob("*.ipynb")}
    if chapters - seconds.keys():
        LOG.warning(f"{path} has no timing for {sorted(chapters - seconds.keys())}: run benchmarks/chapters.py --solo")
        return {}
    seconds = {stem: s for stem, s in seconds.items() if stem in chapters}
    slowest = max(seconds, key=seconds.get)
    meta = data["meta"]
    runs = len(data["rows"][0].get("solo_runs", [])) or "?"
    return {
        "chapter_time_max": f"{seconds[slowest]:.0f} s",
        "chapter_time_min": f"{min(seconds.values()):.0f} s",
        "chapter_time_total": f"{sum(seconds.values()) / 60:.0f} min",
        "chapter_time_slowest": slowest,
        "chapter_time_where": (
            f"median of {runs} runs of each chapter alone, {meta.get('cpu', '?')}, "
            f"{meta.get('cpu_threads', '?')} threads, {meta['when'][:10]}"
        ),
    }


def _add_substitutions(app, config) -> None:
    config.myst_substitutions = {**(config.myst_substitutions or {}), **chapter_times(Path(app.srcdir))}


def setup(app):
    app.connect("config-inited", _add_substitutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
