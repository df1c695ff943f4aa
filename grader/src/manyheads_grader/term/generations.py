"""Each run's outputs in a folder of their own, made current in one step.

A run of ``grade``, ``rescore`` or ``--undo`` writes everything it makes (grades.csv, the report, the feedback pages,
the LMS files, ``course/``, ``records/``, ``history/``) into a new ``OUT/generations/<id>/``, and only then points
``OUT/current`` at it: one rename of a symbolic link, which either happens or does not. ``OUT/grades.csv``,
``OUT/feedback`` and the other names an instructor opens are links into ``current/``, so a run that crashes or is
killed at any point leaves every output as the last finished run made it, and the next run starts from those.

An OUT written by a release before this layout (the outputs as plain files) is moved into a first generation.
Generations that were never made current (a run that died) are removed by the next run; earlier current ones are
kept while ``history/`` refers to them (a re-graded student's earlier feedback page and gradebook entry).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path

GENERATIONS = "generations"
CURRENT = "current"
# What a release before generations wrote into OUT (moved into the first generation): never the instructor's files.
_LMS_CSVS = tuple(f"{lms}-grades.csv" for lms in ("canvas", "moodle", "blackboard", "generic"))
_OLD_OUTPUTS = (
    "grades.csv",
    "report.md",
    "report.html",
    "feedback",
    "feedback-full",
    "records",
    "course",
    "lms-feedback",
    "lms-feedback.zip",
    "lms-feedback-by-hand",
    *_LMS_CSVS,
)
CRASH_AFTER = "MANYHEADS_CRASH_AFTER"  # tests: stop the run (os._exit) right after writing the output of this name


def crash_point(name: str) -> None:
    """Where the tests stop a run on purpose: after the output ``name`` is written (the variable names it)."""
    if os.environ.get(CRASH_AFTER) == name:
        os._exit(70)


def current(out: Path) -> Path | None:
    """The current generation's folder, or None before the first run."""
    link = Path(out) / CURRENT
    return link.resolve() if link.is_symlink() and link.resolve().is_dir() else None


def start(out: Path) -> Path:
    """A new, empty generation folder (not current yet). Generations a dead run left behind are removed first."""
    out = Path(out)
    adopt_old_layout(out)
    root = out / GENERATIONS
    root.mkdir(parents=True, exist_ok=True)
    now = current(out)
    for folder in root.glob("*.partial"):
        if folder != now:
            shutil.rmtree(folder, ignore_errors=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    new = root / f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}.partial"
    new.mkdir()
    return new


def make_current(out: Path, generation: Path) -> Path:
    """Finish ``generation`` (renamed without ``.partial``) and make it current: one atomic rename of the link. Then
    the top-level names link into it, and generations no longer needed are removed. Returns its final folder."""
    out = Path(out)
    done = generation.with_name(generation.name.removesuffix(".partial"))
    generation.rename(done)
    link = out / f"{CURRENT}.new"
    link.unlink(missing_ok=True)
    link.symlink_to(Path(GENERATIONS) / done.name)
    os.replace(link, out / CURRENT)  # the commit point
    crash_point("current")
    _link_names(out, done)
    _prune(out, done)
    return done


def _link_names(out: Path, generation: Path) -> None:
    """OUT/<name> -> current/<name> for every output of the generation; links to outputs it lacks are removed."""
    names = {p.name for p in generation.iterdir() if not p.name.startswith(".")}
    for name in names:
        top = out / name
        if top.is_symlink() or not top.exists():
            target = Path(CURRENT) / name
            if not top.is_symlink() or Path(os.readlink(top)) != target:
                tmp = out / f".{name}.link"
                tmp.unlink(missing_ok=True)
                tmp.symlink_to(target)
                os.replace(tmp, top)
    for top in out.iterdir():
        if top.is_symlink() and os.readlink(top).startswith(f"{CURRENT}/") and top.name not in names:
            top.unlink()


def referenced(generation: Path) -> set[str]:
    """The earlier generations ``generation``'s history refers to."""
    found = set()
    for entry in (generation / "history").glob("*.json"):
        try:
            found.add(json.loads(entry.read_text(encoding="utf-8"))["generation"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def _prune(out: Path, keep: Path) -> None:
    wanted = referenced(keep) | {keep.name}
    for folder in (out / GENERATIONS).iterdir():
        if folder.name not in wanted and not folder.name.endswith(".partial"):
            shutil.rmtree(folder, ignore_errors=True)


def adopt_old_layout(out: Path) -> None:
    """An OUT from before generations: its outputs (plain files) become the first generation, made current."""
    if (out / CURRENT).is_symlink() or not (out / "records" / "class.json").is_file():
        return
    first = out / GENERATIONS / "before-generations.partial"
    shutil.rmtree(first, ignore_errors=True)
    first.mkdir(parents=True)
    for name in _OLD_OUTPUTS:
        old = out / name
        if old.is_dir() and not old.is_symlink():
            shutil.copytree(old, first / name)
        elif old.is_file() and not old.is_symlink():
            shutil.copy2(old, first / name)
    # Copied, then the plain files removed: a crash before the link is made leaves the old layout readable.
    done = make_current(out, first)
    for name in _OLD_OUTPUTS:
        path = out / name
        if path.exists() and not path.is_symlink() and (done / name).exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    _link_names(out, done)
