"""One name per concept (issue 36, item 4): the rule that an answer must be the student's own work is "own work"
everywhere (``OwnWorkError``, ``require_own_work``, the module names, the docs), and "integrity flags" names only
the signals a human reviews. The rule's old name, "delegation", stays only where it must: to recognise it in what
students wrote or ran with a release before the rename, and in the history of the changelog."""

from __future__ import annotations

import re
import subprocess

from manyheads.course.layout import REPO

OLD = re.compile(r"delegat", re.IGNORECASE)

# (file, a piece of the line): each place the old name must stay, and why.
ALLOWED = {
    # The changelog is history: it records the rename.
    ("CHANGELOG.md", ""),
    # The grader flags student code that reaches for the guard, by the names a notebook of any release may use.
    ("grader/src/manyheads_grader/review/own_work.py", "DelegationError|OwnWorkError"),
    ("grader/src/manyheads_grader/review/own_work.py", "(delegation, DelegationError)"),
    # The error's old name in the outputs of a notebook a student ran with a release before 0.8.0.
    ("grader/src/manyheads_grader/review/flags.py", '"DelegationError",  # the same error'),
    # This test, which looks for the old name.
    ("tests/course/test_one_name_per_concept.py", ""),
}


def _tracked_text_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO.root, capture_output=True, text=True, check=True).stdout
    return [name for name in out.splitlines() if not name.startswith(("benchmarks/results/", "src/manyheads/data/"))]


def test_the_own_work_rule_has_one_name():
    found = []
    for name in _tracked_text_files():
        path = REPO.root / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OLD.search(line) and not any(name == f and piece in line for f, piece in ALLOWED):
                found.append(f"{name}:{number}: {line.strip()[:140]}")
    assert found == [], "the own-work rule is 'own work' everywhere (OwnWorkError, require_own_work):\n" + "\n".join(
        found
    )


def test_every_allowed_place_still_exists():
    # An allow-list entry whose line is gone would let the old name come back there unnoticed.
    for name, piece in ALLOWED:
        text = (REPO.root / name).read_text(encoding="utf-8")
        assert piece in text and OLD.search(text), f"{name}: the allowed line {piece!r} is gone: remove its entry"


def test_integrity_names_only_the_flags_a_human_reviews():
    # "integrity" means the integrity flags (review_flags.py, the report's section, the instructors' guide), or a
    # downloaded file's checksum (assets/vendor.*); never the own-work rule or the repairs.
    found = []
    for name in _tracked_text_files():
        if name.startswith(("assets/vendor", "CHANGELOG.md")) or name == "tests/course/test_one_name_per_concept.py":
            continue  # checksums of downloads, history, and this test
        if not name.endswith((".py", ".md", ".toml", ".yml")):
            continue
        text = (REPO.root / name).read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if re.search(r"integrity(?![\s_-]+flag)", line, re.IGNORECASE):
                found.append(f"{name}:{number}: {line.strip()[:140]}")
    assert found == [], "'integrity' is only for the integrity flags:\n" + "\n".join(found)
