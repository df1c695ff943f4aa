"""Own work, the grader's side: the evidence the in-kernel guard (:mod:`manyheads.checks.own_work`) left in a graded
notebook, and the ways around the rule that a guard in the same process cannot close, read from the student's cells.

The rule itself, its guard and its wording live in the course package, because they run in the student's kernel;
this module only reads notebooks. ``instructors/grading.md`` lists the open routes.

A part whose text rules out library routines (``CodePart.forbidden``: exercise 1's softmax rules out torch's own
softmax by every route it names) loses its points only for those routes, called from the student's own code. Any
other way to the same result (a routine of the same name the list does not hold, torch's low-level operators, a
library function that computes it inside) is never zeroed: :func:`library_routes` flags the cell for a human.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat

from manyheads.checks.own_work import MARKER
from manyheads.course.exercises import EXERCISES, Exercise
from manyheads_grader.notebooks import student_cells
from manyheads_grader.records import Problem, ProblemKind

__all__ = ["OWN_WORK", "findings", "own_work_refusals", "open_routes", "OPEN_ROUTES", "library_routes", "AROUND"]

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


# (pattern, why) in the answer cell of a part that rules out library routines, and in the student's extra cells: ways
# to a ruled-out routine's result that the rule does not zero (the part's text does not name them)
AROUND = (
    (
        r"torch\s*\.\s*ops\b|\baten\b|torch\s*\.\s*_C\b|_VariableFunctions|\bTensorBase\b|torch\s*\.\s*_[a-z]\w*",
        "calls torch's low-level or private operators",
    ),
    (r"\bdistributions\b|\bCategorical\b|logits_to_probs", "computes probabilities with torch.distributions"),
    (
        r"\.\s*scaled_dot_product_attention\b|MultiheadAttention",
        "hands the computation to a library attention (which computes a softmax inside)",
    ),
)


def _exercise_of(test_ids: list[str]) -> Exercise | None:
    """The exercise whose autograded tests these are (test ids are shared between exercises, their sets are not)."""
    found = [e for e in EXERCISES if e.code_parts and {p.test_id for p in e.code_parts} <= set(test_ids)]
    return max(found, key=lambda e: len(e.code_parts), default=None)


def _code_names(source: str) -> list[str]:
    """The names a cell's code uses, strings and comments aside: each dotted chain (``torch.nn.Softmax``,
    ``scores.softmax``) and each import (``torch.softmax`` for ``from torch import softmax``); bare names are the
    student's own or an import's alias. A cell that does not parse: its lines, comments cut."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["\n".join(line.split("#", 1)[0] for line in source.splitlines())]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            chain.append(inner.id if isinstance(inner, ast.Name) else "(…)")
            names.append(".".join(reversed(chain)))
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [f"{node.module or ''}.{alias.name}" for alias in node.names]
    return names


def library_routes(
    student_cells: list[tuple[str, str]], exercise: Exercise | None, zeroed: set[str] = frozenset()
) -> list[str]:
    """Notes for the report: the cells that may reach a library routine a part rules out by a way the rule does not
    zero. Looked at: the answer cell of each such part that kept its points, for a dotted or imported name that
    contains a ruled-out routine's (``torch._softmax``, ``torch.sparse.softmax``, ``nn.Sequential(nn.Softmax(-1))``)
    or one of :data:`AROUND`; and the extra cells, for :data:`AROUND` only (an extra cell may well compare an answer
    with ``torch.softmax``)."""
    if exercise is None:
        return []
    parts = [p for p in exercise.code_parts if p.forbidden and p.test_id not in zeroed]
    notes = []
    for label, source in student_cells if parts else []:
        answers = [p for p in parts if label == f"answer cell {p.answer_id}"]
        if not answers and not label.startswith("extra cell"):
            continue
        names = _code_names(source)
        used = "\n".join(names)
        whys = [why for pattern, why in AROUND if re.search(pattern, used)]
        for part in answers:
            words = {r.rsplit(".", 1)[1].lower().removeprefix("log_") for r in part.forbidden}
            like = sorted({n for n in names if any(w in n.lower() for w in words)})
            if like:
                whys.insert(0, f"names {', '.join(like)}, like a routine that {part.function} must not call")
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
        cells = student_cells(notebook, release)
        notes = open_routes(cells, helpers) + library_routes(cells, _exercise_of(test_ids), set(zeroed))
        problems += [Problem(ProblemKind.OWN_WORK, f"{OWN_WORK}, look by hand: {note}") for note in notes]
    return zeroed, problems
