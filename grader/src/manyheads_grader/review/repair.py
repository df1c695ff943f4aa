"""Check one submitted notebook against the release and repair what nbgrader cannot grade, stating every change.

A submission is matched to the release cell by cell: by cell id (Colab keeps the ids of a 4.5 notebook), then by
nbgrader ``grade_id``, then by aligning (cell type, first non-blank line) with :class:`difflib.SequenceMatcher`.
Then every release cell that carries nbgrader metadata gets exactly the release's metadata back (stripped or
edited metadata, forged points), read-only cells get the release's source back (nbgrader restores test cells and
their hidden tests from the gradebook anyway), copied cells lose their duplicated grade id, and deleted graded or
read-only cells are re-inserted. A deleted *answer* cell is re-inserted empty, so that whatever the student defined
elsewhere still counts and nothing is invented. No repair can add points: points come only from the release's test
cells, which always run.
"""

from __future__ import annotations

import copy
import difflib
import uuid
from dataclasses import dataclass, field

import nbformat

from manyheads_grader.notebooks import digest, read_submitted

RELEASE_META_KEYS = ("nbgrader", "editable", "deletable")


@dataclass
class FileCheck:
    """The outcome for one file: a gradable notebook (or None), with what was repaired and what was only noted."""

    notebook: nbformat.NotebookNode | None
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fatal: str | None = None


def _first_line(cell) -> str:
    return next((line.strip() for line in cell.source.splitlines() if line.strip()), "")


def _key(cell) -> tuple[str, str]:
    return cell.cell_type, _first_line(cell)


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _kind(meta: dict) -> str:
    if meta.get("grade") and meta.get("solution"):
        return "written answer"
    if meta.get("grade"):
        return "test cell"
    if meta.get("solution"):
        return "answer cell"
    return "read-only cell"


def _match(sub_cells, rel_cells) -> dict[int, tuple[int, str]]:
    """{submission index: (release index, how)} for the submission cells that correspond to release cells."""
    matched: dict[int, tuple[int, str]] = {}
    taken: set[int] = set()
    rel_by_id = {c.get("id"): i for i, c in enumerate(rel_cells)}
    for i in reversed(range(len(sub_cells))):  # the last copy of a duplicated id wins, as in nbgrader
        j = rel_by_id.get(sub_cells[i].get("id"))
        if j is not None and j not in taken and sub_cells[i].cell_type == rel_cells[j].cell_type:
            matched[i], _ = (j, "by id"), taken.add(j)
    rel_by_grade = {_grade_id(c): i for i, c in enumerate(rel_cells) if _grade_id(c)}
    for i in reversed(range(len(sub_cells))):
        j = rel_by_grade.get(_grade_id(sub_cells[i]))
        if i not in matched and j is not None and j not in taken and sub_cells[i].cell_type == rel_cells[j].cell_type:
            matched[i], _ = (j, "by grade id"), taken.add(j)
    free_s = [i for i in range(len(sub_cells)) if i not in matched]
    free_r = [j for j in range(len(rel_cells)) if j not in taken]
    seq = difflib.SequenceMatcher(
        a=[_key(sub_cells[i]) for i in free_s], b=[_key(rel_cells[j]) for j in free_r], autojunk=False
    )
    for a, b, size in seq.get_matching_blocks():
        for k in range(size):
            if _key(sub_cells[free_s[a + k]])[1]:  # never align on an empty first line
                matched[free_s[a + k]] = (free_r[b + k], "by alignment")
    return matched


def _not_this_assignment(nb: nbformat.NotebookNode, release, assignment: str, matched: dict) -> str | None:
    """Why the notebook is not a submission of ``assignment`` (another exercise's, or too few of its graded and
    read-only cells found), or None."""
    meta = nb.metadata.get("manyheads")
    claimed = meta.get("exercise") if isinstance(meta, dict) else None
    if claimed and claimed != assignment:
        return f"wrong assignment: the notebook is {claimed!r}, not {assignment!r}"
    graded_rel = [j for j, c in enumerate(release.cells) if _grade_id(c)]
    found = {j for j, _ in matched.values() if j in graded_rel}
    if len(found) * 2 < len(graded_rel):
        return (
            f"does not look like {assignment}: only {len(found)} of its {len(graded_rel)} "
            "graded and read-only cells were found"
        )
    return None


@dataclass
class _Repair:
    """What restoring a submission's cells against the release found, as it goes."""

    repairs: list[str] = field(default_factory=list)
    reattached: dict[str, list[str]] = field(default_factory=dict)  # how it was matched -> grade ids
    extra: int = 0  # cells of the student's own
    earlier: frozenset = frozenset()  # (grade id, points, digest) of the cells of earlier releases graded in OUT
    older: list[str] = field(default_factory=list)  # grade ids found as an earlier release had them


def _restore(cell, rel, how: str | None, graded_ids: set, found: _Repair) -> None:
    """One submitted cell (a copy, outputs cleared) given its release cell's nbgrader metadata and, where the release
    locks it, its source; a graded cell the release does not have is kept as ordinary code."""
    old_meta = cell.metadata.get("nbgrader")
    rel_meta = rel.metadata.get("nbgrader") if rel is not None else None
    for key in RELEASE_META_KEYS:
        cell.metadata.pop(key, None)
    if rel_meta:
        gid = rel_meta["grade_id"]
        for key in RELEASE_META_KEYS:
            if key in rel.metadata:
                cell.metadata[key] = copy.deepcopy(rel.metadata[key])
        if isinstance(old_meta, dict) and _of_an_earlier_release(cell, rel, old_meta, rel_meta, found.earlier):
            found.older.append(gid)  # as an earlier release had it: the current one's, without blame
            cell.source = rel.source if rel_meta.get("locked") else cell.source
            return
        if not isinstance(old_meta, dict):
            found.reattached.setdefault(how, []).append(gid)
        elif any(old_meta.get(k) != rel_meta.get(k) for k in ("grade_id", "grade", "solution", "locked", "points")):
            found.repairs.append(f"nbgrader metadata of {_kind(rel_meta)} {gid} edited: restored from the release")
        if rel_meta.get("locked") and cell.source != rel.source:
            found.repairs.append(f"{_kind(rel_meta)} {gid} edited: restored from the release")
            cell.source = rel.source
        return
    if isinstance(old_meta, dict) and old_meta.get("grade_id"):
        gid = old_meta["grade_id"]
        what = "copied cell" if gid in graded_ids else "unknown graded cell"
        found.repairs.append(f"{what} with grade id {gid}: kept as ordinary code, not graded")
    if rel is None and not (cell.cell_type == "code" and not cell.source.strip()):
        found.extra += 1


def _of_an_earlier_release(cell, rel, old_meta: dict, rel_meta: dict, earlier: frozenset) -> bool:
    """Whether a cell that differs from the release is exactly as an earlier release of the assignment had it."""
    if any(old_meta.get(k) != rel_meta.get(k) for k in ("grade_id", "grade", "solution", "locked")):
        return False
    changed = old_meta.get("points") != rel_meta.get("points") or (rel_meta.get("locked") and cell.source != rel.source)
    points = float(old_meta.get("points", 0) or 0)
    return bool(changed) and (rel_meta["grade_id"], points, digest(cell.source)) in earlier


def _restored_cells(nb: nbformat.NotebookNode, release, matched: dict, found: _Repair) -> list:
    """The submission's cells, each restored against its release cell (``_restore``), with ids nbgrader accepts."""
    rel_cells = release.cells
    graded_ids = {_grade_id(c) for c in rel_cells if _grade_id(c)}
    rel_ids = {c.get("id") for c in rel_cells}
    out_cells: list = []
    for i, cell in enumerate(nb.cells):
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        j, how = matched.get(i, (None, None))
        rel = rel_cells[j] if j is not None else None
        _restore(cell, rel, how, graded_ids, found)
        if rel is not None:
            cell["id"] = rel.get("id")
        elif not cell.get("id") or cell.get("id") in rel_ids or cell.get("id") in {c.get("id") for c in out_cells}:
            cell["id"] = f"mh-{uuid.uuid4().hex[:12]}"
        out_cells.append(cell)
    return out_cells


def _reinsert_deleted(out_cells: list, release, matched: dict, found: _Repair) -> None:
    """Re-insert deleted release cells that carry nbgrader metadata, after the cell matched to their predecessor."""
    rel_to_sub = {j: i for i, (j, _) in matched.items()}
    inserts: list[tuple[int, int]] = []
    for j in (j for j, c in enumerate(release.cells) if _grade_id(c)):
        if j not in rel_to_sub:
            before = [k for k in rel_to_sub if k < j]
            inserts.append((rel_to_sub[max(before)] + 1 if before else 0, j))
    for at, j in sorted(inserts, key=lambda t: (t[0], t[1]), reverse=True):
        rel = copy.deepcopy(release.cells[j])
        meta = rel.metadata["nbgrader"]
        kind = _kind(meta)
        if kind == "answer cell":
            rel.source = "# The answer cell was missing from the submission; re-inserted empty by manyheads grade."
            found.repairs.append(
                f"answer cell {meta['grade_id']} deleted: re-inserted empty (code elsewhere still counts)"
            )
        elif kind == "written answer":
            found.repairs.append(f"written answer {meta['grade_id']} deleted: re-inserted unanswered (look by hand)")
        else:
            found.repairs.append(f"{kind} {meta['grade_id']} deleted: restored from the release")
        out_cells.insert(at, rel)


def check(data: bytes, release: nbformat.NotebookNode, assignment: str, earlier: frozenset = frozenset()) -> FileCheck:
    """Check and repair one submitted file (bytes) against the release notebook of ``assignment``; ``earlier``: the
    cells of earlier releases graded into the same OUT (a notebook written for one of them is not blamed)."""
    nb, fatal, notes = read_submitted(data)
    if nb is None:
        return FileCheck(None, fatal=fatal)
    matched = _match(nb.cells, release.cells)
    if why := _not_this_assignment(nb, release, assignment, matched):
        return FileCheck(None, fatal=why)
    found = _Repair(earlier=earlier)
    out_cells = _restored_cells(nb, release, matched, found)
    if found.older:
        notes.append(
            f"written for an earlier release of the assignment ({', '.join(found.older)} changed since): graded with "
            "the current release's tests and points"
        )
    for how, gids in found.reattached.items():
        found.repairs.insert(
            0,
            f"nbgrader metadata missing on {len(gids)} cell{'s' if len(gids) > 1 else ''} "
            f"({', '.join(gids)}): re-attached ({how})",
        )
    _reinsert_deleted(out_cells, release, matched, found)
    if found.extra:
        notes.append(
            f"{found.extra} extra cell{'s' if found.extra > 1 else ''} (kept, run before the tests that follow them)"
        )
    result = nbformat.v4.new_notebook(cells=out_cells, metadata=copy.deepcopy(release.metadata))
    result.nbformat, result.nbformat_minor = 4, 5
    try:
        nbformat.validate(result)
    except nbformat.ValidationError as exc:
        why = f"could not be repaired into a valid notebook ({exc.message[:80]})"
        return FileCheck(None, found.repairs, notes, fatal=why)
    return FileCheck(result, found.repairs, notes)


def choose(checked: dict[str, tuple[FileCheck, float]]) -> tuple[str | None, list[str], list[str]]:
    """Pick the file to grade when a student handed in several: (name or None, repairs, notes).

    Files that are not gradable are ignored with a note; among gradable ones the most recently modified wins and
    the choice is flagged for a human.
    """
    names = sorted(checked)
    if len(names) == 1:
        return (names[0] if checked[names[0]][0].notebook is not None else None), [], []
    good = [n for n in names if checked[n][0].notebook is not None]
    notes = [f"{n} also handed in: {checked[n][0].fatal}, ignored" for n in names if n not in good]
    if not good:
        return None, [], notes
    pick = max(good, key=lambda n: (checked[n][1], n))
    repairs = []
    if len(good) > 1:
        others = ", ".join(n for n in good if n != pick)
        repairs.append(f"{len(good)} notebooks handed in: graded {pick} (the newest), not {others}")
    return pick, repairs, notes
