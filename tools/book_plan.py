"""The line `make book` prints before it executes anything: how many chapters it will execute (those whose cached
outputs in _build/.jupyter_cache are missing or out of date) and about how long that takes, from the solo timings
of ``benchmarks/chapters.py --solo`` (benchmarks/results/chapters_solo.json: the median of runs alone on the
machine named there). A first build otherwise prints nothing for the ten minutes its chapters take.

Run: .venv/bin/python tools/book_plan.py [--cache _build/.jupyter_cache] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMINGS = ROOT / "benchmarks" / "results" / "chapters_solo.json"


def stale_chapters(cache_dir: Path, chapters: list[Path]) -> list[Path]:
    """The chapters the build will execute: no cached run matches their code cells."""
    if not cache_dir.is_dir():
        return list(chapters)
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    stale = []
    for chapter in chapters:
        try:
            cache.match_cache_file(str(chapter))
        except KeyError:
            stale.append(chapter)
    return stale


def solo_seconds(timings: Path = TIMINGS) -> tuple[dict[str, float], str]:
    """({chapter stem: median seconds alone}, "on <cpu>, <n> threads, <date>") from the committed benchmark."""
    if not timings.is_file():
        return {}, ""
    data = json.loads(timings.read_text(encoding="utf-8"))
    meta = data["meta"]
    where = f"alone on {meta.get('cpu', '?')} with {meta.get('cpu_threads', '?')} threads, {meta['when'][:10]}"
    return {row["chapter"]: float(row["solo_s"]) for row in data["rows"]}, where


def plan_line(stale: list[Path], total: int, seconds: dict[str, float], where: str, jobs: int = 1) -> str:
    """The line; with ``jobs`` chapters executed at a time (tools/build_book.py), the time is their total shared out,
    and never less than the slowest chapter's."""
    if not stale:
        return f"make book: all {total} chapters are cached; nothing to execute."
    known = [seconds[c.stem] for c in stale if c.stem in seconds]
    unknown = [c.stem for c in stale if c.stem not in seconds]
    head = f"make book: executing {len(stale)} of {total} chapters"
    if not known:
        return f"{head} (no timings yet: benchmarks/chapters.py --solo); this takes minutes."
    minutes = max(sum(known) / max(1, jobs), max(known)) / 60
    at_once = f", {jobs} at a time" if jobs > 1 else ""
    line = f"{head}{at_once}, about {minutes:.0f} min ({where}; benchmarks/results/chapters_solo.json)"
    if unknown:
        line += f", plus {', '.join(unknown)} (not timed yet)"
    return line + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=ROOT / "_build" / ".jupyter_cache")
    parser.add_argument("--jobs", type=int, default=1, help="chapters executed at a time (tools/build_book.py)")
    args = parser.parse_args()
    chapters = sorted((ROOT / "chapters").glob("*.ipynb"))
    seconds, where = solo_seconds()
    print(plan_line(stale_chapters(args.cache, chapters), len(chapters), seconds, where, args.jobs), flush=True)


if __name__ == "__main__":
    main()
