"""Reading notebooks, for every other module of the grader: a submitted file as a notebook, the hidden tests'
helpers, the student's own cells, the release's points, and what a graded run hit (time, memory, output limits)."""

from __future__ import annotations

import json
import re

import nbformat

from manyheads_grader.records import CellOutcome, Outcome
from manyheads_grader.review import versions

RUN_NOTES = {
    Outcome.TIME: "a cell ran past its time limit (an infinite loop?) and was stopped",
    Outcome.MEMORY: "a cell ran out of memory (MemoryError)",
    Outcome.OUTPUT: "output cut at the grader's limit",
}


def cell_outcomes(nb: nbformat.NotebookNode) -> list[CellOutcome]:
    """The cells of a graded notebook that hit a limit (time, memory, output), with the evidence, from its outputs."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                if out.get("ename") in ("KeyboardInterrupt", "CellTimeoutError", "TimeoutError"):
                    found.append(CellOutcome(index, Outcome.TIME, out.get("ename")))
                elif out.get("ename") == "MemoryError":
                    found.append(CellOutcome(index, Outcome.MEMORY, "MemoryError"))
            elif "[output cut by the grader" in str(out.get("text", "")):
                found.append(CellOutcome(index, Outcome.OUTPUT, "[output cut by the grader ...]"))
    return found


def run_notes(cells) -> list[str]:
    """What the instructor should know of a graded notebook's run (the limits its cells hit), once per kind."""
    hit = {c.kind for c in cells}
    return [RUN_NOTES[k] for k in Outcome if k in hit]


def hidden_helpers(source: nbformat.NotebookNode) -> set[str]:
    """Names of the functions the hidden tests define (between the HIDDEN TESTS markers of the test cells)."""
    names: set[str] = set()
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        hidden = cell.source.partition("### BEGIN HIDDEN TESTS")[2].partition("### END HIDDEN TESTS")[0]
        names.update(re.findall(r"^\s*def\s+(\w+)", hidden, flags=re.MULTILINE))
    return names


def student_cells(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """(label, source) of the code the student wrote: answer and extra cells, not the course's cells as released."""
    course = {versions.without_version(c.source).strip() for c in release.cells if c.cell_type == "code"}
    found = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        ours = versions.without_version(cell.source).strip() in course
        if cell.cell_type != "code" or meta.get("locked") or meta.get("grade") or ours:
            continue
        found.append(
            (f"answer cell {meta['grade_id']}" if meta.get("grade_id") else f"extra cell {i + 1}", cell.source)
        )
    return found


def test_points(release: nbformat.NotebookNode) -> dict[str, float]:
    """{grade id: points} of the release's autograded test cells, in notebook order."""
    return {
        c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")
    }


def digest(source: str) -> str:
    """A short digest of a cell's text (surrounding blank space ignored)."""
    import hashlib

    return hashlib.sha256(source.strip().encode()).hexdigest()[:16]


def release_manifest(release: nbformat.NotebookNode) -> list[list]:
    """What identifies a release of an assignment: [grade id, points, digest of the text] of each cell the student
    may not change (tests and read-only cells), in order. Kept in OUT for each release graded there, so that a
    notebook written for an earlier one is recognised as such, not as edited (review.repair)."""
    found = []
    for c in release.cells:
        meta = c.metadata.get("nbgrader", {})
        if (meta.get("grade") and not meta.get("solution")) or meta.get("locked"):
            found.append([meta.get("grade_id", ""), float(meta.get("points", 0) or 0), digest(c.source)])
    return found


def manual_points(release: nbformat.NotebookNode) -> dict[str, float]:
    """{grade id: points} of the release's hand-graded items (written answers: graded solution cells; tasks)."""
    found = {}
    for c in release.cells:
        meta = c.metadata.get("nbgrader", {})
        if (meta.get("grade") and meta.get("solution")) or meta.get("task"):
            found[meta["grade_id"]] = float(meta.get("points", 0))
    return found


def read_submitted(data: bytes) -> tuple[nbformat.NotebookNode | None, str | None, list[str]]:
    """(notebook converted to nbformat 4, None, notes) or (None, why it is not a notebook, [])."""
    try:
        raw = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"not valid JSON ({type(exc).__name__}: {str(exc)[:80]})", []
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("cells", raw.get("worksheets")), list)
        or not isinstance(raw.get("nbformat"), int)
    ):
        return None, "valid JSON but not a Jupyter notebook", []
    notes = []
    version = (raw.get("nbformat"), raw.get("nbformat_minor", 0))
    cells = raw.get("cells") or []
    if version[0] == 4 and (version[1] < 5 or any(isinstance(c, dict) and "id" not in c for c in cells)):
        notes.append(f"nbformat {version[0]}.{version[1]} without cell ids (e.g. Colab): converted to 4.5")
    try:
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        for cell in nb.cells:
            cell.setdefault("metadata", {})
            if not isinstance(cell.get("source"), str):
                raise ValueError("a cell's source is not text")
            if "cell_type" not in cell:
                raise ValueError("a cell has no cell_type")
    except Exception as exc:  # nbformat raises many kinds of errors on malformed files
        return None, f"not a readable Jupyter notebook ({type(exc).__name__}: {str(exc)[:80]})", []
    return nb, None, notes
