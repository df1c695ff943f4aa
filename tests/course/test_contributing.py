"""CONTRIBUTING.md stays true where a rule can be checked: every file or folder it names exists, its layout picture
names every part of both packages, and the tests it cites are there."""

from __future__ import annotations

import re

import manyheads_grader
from manyheads.course.layout import REPO

TEXT = (REPO.root / "CONTRIBUTING.md").read_text(encoding="utf-8")
PICTURE = TEXT.split("## The layout in one picture", 1)[1].split("```text", 1)[1].split("```", 1)[0]


def test_every_path_it_names_exists():
    named = set(re.findall(r"`((?:[\w.-]+/)+[\w.-]*)`", TEXT))  # `folder/file.py`, `folder/`
    assert named, "CONTRIBUTING.md names no paths?"
    built = ("_build/", "_vendor/", ".venv/")  # made by make book / make test, not committed
    built += ("OUT/",)  # the folder an instructor gives ``manyheads grade --out``: never a path in the repository
    missing = sorted(
        p
        for p in named
        if "NN_" not in p and "interlude_topic" not in p and not p.startswith(built) and not (REPO.root / p).exists()
    )
    assert missing == []


def test_the_picture_names_every_part_of_both_packages():
    course = sorted(p.name for p in (REPO.root / "src" / "manyheads").iterdir() if p.suffix == ".py" or p.is_dir())
    course = [n for n in course if n not in ("__init__.py", "__pycache__") and not n.endswith(".egg-info")]
    assert [n for n in course if n.removesuffix(".py") not in PICTURE] == []
    grader = sorted(
        p.stem
        for p in (REPO.root / "grader" / "src" / "manyheads_grader").rglob("*.py")
        if p.stem not in ("__init__", "__main__")
    )
    assert [n for n in grader if not re.search(rf"\b{n}\b", PICTURE)] == []
    assert manyheads_grader.__file__.startswith(str(REPO.root / "grader"))
