"""Own work, the grader's side: the evidence the in-kernel guard (:mod:`manyheads.checks.own_work`) left in a graded
notebook, and the ways around the rule that a guard in the same process cannot close, read from the student's cells.

The rule itself, its guard and its wording live in the course package, because they run in the student's kernel;
this module only reads notebooks. ``instructors/grading.md`` lists the open routes.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat

from manyheads.checks.own_work import MARKER
from manyheads_grader.notebooks import student_cells
from manyheads_grader.records import Problem, ProblemKind

__all__ = ["OWN_WORK", "findings", "own_work_refusals", "open_routes", "OPEN_ROUTES"]

OWN_WORK = "own work"  # starts every problem about the own-work rule (report.py lists them for a human)


def own_work_refusals(notebook: Any, test_ids: list[str]) -> tuple[dict[str, str], list[str]]:
    """({test id: evidence} for the tests that failed with OwnWorkError, [refusals the answer caught]).

    ``notebook`` is a graded notebook (nbformat node or dict); the evidence is the error's message.
    """
    zeroed: dict[str, str] = {}
    caught: list[str] = []
    for cell in notebook["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("ename") == "OwnWorkError" and gid in test_ids:
                zeroed.setdefault(gid, str(out.get("evalue", "")))
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            for line in (text if isinstance(text, str) else "".join(text)).splitlines():
                if line.startswith(MARKER):
                    caught.append(line[len(MARKER) :].strip())
    seen = set(zeroed.values())
    leftover = []
    for line in caught:
        test_id, _, message = line.partition(" ")
        if message not in seen and line not in leftover:
            leftover.append(line)
    return zeroed, leftover


# (pattern, why) for code in the student's own cells that the guard cannot see; each is a reason to look, not proof
OPEN_ROUTES = (
    (
        r"\bgc\s*\.\s*get_(objects|referents|referrers)\b|\bimport\s+gc\b|\bfrom\s+gc\s+import",
        "walks the collector's objects",
    ),
    (r"__closure__|\bco_consts\b|__code__|__self__|__wrapped__|__globals__", "introspects functions' internals"),
    # The guard's module and names, with those it had before 0.8.0 (delegation, DelegationError), which a notebook
    # started from an earlier release may still use.
    (
        r"\bdelegation\b|\bown_work\b|DelegationError|OwnWorkError|require_own_work|_trampolines|meta_path",
        "touches the grader's own-work guard",
    ),
    (
        r"\breload\s*\(|spec_from_file_location|SourceFileLoader|\brunpy\b|(?<![.\w])(exec|compile|eval)\s*\(",
        "runs code it loads or builds at run time (e.g. the package's source again)",
    ),
    (r"__file__|getsource|getsourcelines|site-packages", "reads source files (e.g. the package's)"),
    (r"\bmultiprocessing\b|ProcessPool|\bPool\s*\(", "runs code in another process"),
    (r"__torch_function__|__torch_dispatch__", "returns objects that compute later"),
    (r"\bglobals\s*\(\s*\)|\bvars\s*\(\s*\)|__main__|user_ns|get_ipython", "looks names up in the namespace"),
)


def open_routes(student_cells: list[tuple[str, str]], hidden_helpers: set[str] = frozenset()) -> list[str]:
    """Notes for the report: the student's cells (label, source) that use a way around the rule the guard cannot
    close, and any use of a helper defined only in the hidden tests (e.g. their own ``_reference``)."""
    notes = []
    codes = [(label, "\n".join(line.split("#", 1)[0] for line in src.splitlines())) for label, src in student_cells]
    defined = r"^\s*(?:def|class)\s+(\w+)|^\s*(\w+)\s*="
    own = {name for _, code in codes for pair in re.findall(defined, code, re.MULTILINE) for name in pair if name}
    for label, code in codes:
        whys = [why for pattern, why in OPEN_ROUTES if re.search(pattern, code)]
        used = sorted(n for n in set(hidden_helpers) - own if re.search(rf"(?<![.\w]){re.escape(n)}\b", code))
        if used:
            whys.append(f"uses {', '.join(used)}, defined only in the hidden tests")
        if whys:
            notes.append(f"{label}: {'; '.join(whys)}")
    return notes


def findings(
    notebook: nbformat.NotebookNode | None,
    graded: nbformat.NotebookNode,
    test_ids: list[str],
    helpers: set[str],
    release: nbformat.NotebookNode,
) -> tuple[dict[str, str], list[Problem]]:
    """The parts given no points by the own-work rule (test id -> the evidence the kernel left in the ``graded``
    notebook), and the problems for the report: those zeros, refusals the answer caught, and the ways around the rule
    the guard cannot close in the student's ``notebook``."""
    zeroed, caught = own_work_refusals(graded, test_ids)
    problems = [
        Problem(ProblemKind.OWN_WORK, f"{OWN_WORK}: {test} got no points: {why}") for test, why in zeroed.items()
    ]
    problems += [
        Problem(ProblemKind.OWN_WORK, f"{OWN_WORK}: a refusal was caught by the answer ({line})") for line in caught
    ]
    if notebook is not None:
        problems += [
            Problem(ProblemKind.OWN_WORK, f"{OWN_WORK}, look by hand: {note}")
            for note in open_routes(student_cells(notebook, release), helpers)
        ]
    return zeroed, problems
