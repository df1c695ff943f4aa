"""The corpus of student submissions for the grading tests and the benchmark, built from the committed notebooks.

Every kind of broken or hostile notebook the issue lists, next to correct, partly correct and blank ones. Each case
says what ``manyheads grade`` must decide for it: the row's status, its total score and (optionally) a marker that
must or must not appear in the student's feedback. Hostile cases print ``LEAKED``/``WROTE`` when an attack works.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
EX1 = "01_single_head_bottleneck"
RELEASE = ROOT / "exercises" / EX1 / f"{EX1}.ipynb"
SOURCE = ROOT / "solutions" / EX1 / f"{EX1}.ipynb"
FULL = 8.0  # automatic points of exercise 1: 2 + 4 + 2
WRITTEN = "one_head_two_targets"  # exercise 1's written answer: 2 points a person gives (the maximum counts them)
MAXIMUM = FULL + 2.0


@dataclass
class Case:
    student: str
    what: str
    status: str
    score: float | None
    files: dict[str, bytes] = field(default_factory=dict)  # relative name -> content
    mtimes: dict[str, float] = field(default_factory=dict)
    feedback_has: tuple[str, ...] = ()
    feedback_lacks: tuple[str, ...] = ("LEAKED", "WROTE")
    problems_have: tuple[str, ...] = ()


def release() -> nbformat.NotebookNode:
    return nbformat.read(RELEASE, as_version=4)


def answers() -> dict[str, str]:
    """The reference answers, as a student would type them (no nbgrader markers)."""
    nb = nbformat.read(SOURCE, as_version=4)
    found = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            found[meta["grade_id"]] = "\n".join(
                line
                for line in cell.source.splitlines()
                if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line
            )
    return found


def answered(overrides: dict[str, str] | None = None) -> nbformat.NotebookNode:
    nb = release()
    chosen = {**answers(), **(overrides or {})}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in chosen:
            cell.source = chosen[gid]
    return nb


def cell_index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def with_extra(nb, code: str, after: str = "test_attention_entropy") -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    nb.cells.insert(cell_index(nb, after) + 1, nbformat.v4.new_code_cell(code))
    return nb


def dump(nb) -> bytes:
    return (nbformat.writes(nb) + "\n").encode()


def colab(nb) -> bytes:
    """What Colab hands back: nbformat 4.0, no cell ids, metadata.colab and a per-cell metadata.id."""
    raw = json.loads(nbformat.writes(nb))
    raw["nbformat_minor"] = 0
    raw["metadata"]["colab"] = {"provenance": [], "name": f"{EX1}.ipynb"}
    for i, cell in enumerate(raw["cells"]):
        cell.pop("id", None)
        cell["metadata"]["id"] = f"Xy{i:04d}abc"
    return json.dumps(raw, indent=1).encode()


def strip_nbgrader(nb) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for key in ("nbgrader", "editable", "deletable"):
            cell.metadata.pop(key, None)
    return nb


NO_SCALE = """def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores)
    return weights @ v, weights"""
OVERFLOWS = """def softmax(scores):
    e = scores.exp()
    return e / e.sum(dim=-1, keepdim=True)"""


# Answers that hand Part 2 to the course's own attention, one per route (the own-work rule refuses every one, so the
# part's 4 points are lost and the report says why); see manyheads.checks.own_work.
HANDING_OVER = {
    "direct": """def scaled_dot_product_attention(q, k, v, mask=None):
    return mh.scaled_dot_product_attention(q, k, v, mask)""",
    "alias": """from manyheads.attention import scaled_dot_product_attention as attend


def scaled_dot_product_attention(q, k, v, mask=None):
    return attend(q, k, v, mask)""",
    "wrapper": """def my_attention(q, k, v, mask):
    return mh.attention.scaled_dot_product_attention(q, k, v, mask=mask)


def scaled_dot_product_attention(q, k, v, mask=None):
    return my_attention(q, k, v, mask)""",
    "import_inside": """def scaled_dot_product_attention(q, k, v, mask=None):
    from manyheads.attention import scaled_dot_product_attention as sdpa

    return sdpa(q, k, v, mask)""",
    "importlib": """import importlib


def scaled_dot_product_attention(q, k, v, mask=None):
    return importlib.import_module("manyheads.attention").scaled_dot_product_attention(q, k, v, mask)""",
    "sys_modules": """import sys

import manyheads.attention


def scaled_dot_product_attention(q, k, v, mask=None):
    return sys.modules["manyheads.attention"].scaled_dot_product_attention(q, k, v, mask)""",
    "getattr": """def scaled_dot_product_attention(q, k, v, mask=None):
    return getattr(mh.attention, "scaled_dot_product_attention")(q, k, v, mask)""",
    "same_object": "scaled_dot_product_attention = mh.scaled_dot_product_attention",
}
# A route a guard inside the kernel cannot close (the garbage collector still holds the original): full points,
# but the report flags the cell for a human.
GC_ROUTE = """import gc

import manyheads.analysis.heads


def attention_entropy(weights):
    for o in gc.get_objects():
        if type(o).__name__ == "function" and o.__name__ == "attention_entropy":
            if o.__module__ == "manyheads.analysis.heads" and "args" not in o.__code__.co_varnames:
                return o(weights)"""


def hostile_code(out: Path, submissions: Path, marker: str) -> dict[str, str]:
    """Attacks, each printing LEAKED/WROTE when it works and a harmless line when it is stopped.

    The printed lines are assembled from pieces (``"blocked", "read"``) so that the feedback's copy of the source
    code cannot satisfy a check for the output.
    """
    targets = [
        ROOT / "solutions" / EX1 / f"{EX1}.ipynb",
        out / ".work" / "course" / "gradebook.db",
        out / ".work" / "course" / "solutions" / EX1 / f"{EX1}.ipynb",
        submissions / "correct",
    ]
    others = str(out / ".work" / "worker-*" / "submitted-*" / "*" / "*" / "*.ipynb")
    reads = f"""
import glob, os
for path in {[str(t) for t in targets]!r} + glob.glob({others!r}):
    try:
        data = open(path, "rb").read(200) if os.path.isfile(path) else os.listdir(path)
        print("LEAK" + "ED", path, str(data)[:60])
    except OSError as exc:
        print("blocked", "read", type(exc).__name__)
print("neighbours visible:", len(glob.glob({str(out / ".work" / "*" / "autograded" / "*")!r})))
"""
    write_targets = [
        out / f"{marker}.txt",
        submissions / f"{marker}.txt",
        Path("/tmp") / f"{marker}.txt",
        ROOT / f"{marker}.txt",
        Path.home() / f"{marker}.txt",
    ]
    writes = f"""
for path in {[str(t) for t in write_targets]!r}:
    try:
        with open(path, "w") as f:
            f.write("student code was here")
        print("WRO" + "TE", path)
    except OSError as exc:
        print("blocked", "write", type(exc).__name__)
"""
    return {"reads": reads, "writes": writes}


def build(submissions: Path, out: Path, marker: str = "mh-pwned") -> list[Case]:
    """Write the corpus into ``submissions`` (layouts mixed: folders and ``id__name`` files) and return the cases."""
    good = answered()
    cases: list[Case] = []

    def add(case: Case, nb=None, raw: bytes | None = None, name: str | None = None):
        if nb is not None or raw is not None:
            content = raw if raw is not None else dump(nb)
            case.files[
                name or (f"{case.student}/{EX1}.ipynb" if len(cases) % 2 else f"{case.student}__{EX1}.ipynb")
            ] = content
        cases.append(case)

    add(Case("correct", "the reference answers", "graded", FULL), good)
    add(
        Case("partial", "attention without 1/sqrt(d_k)", "graded", 4.0),
        answered({"scaled_dot_product_attention": NO_SCALE}),
    )
    add(Case("blank", "the release handed back untouched", "graded", 0.0), release())
    add(
        Case(
            "colab", "correct, Colab format (nbformat 4.0, no ids)", "graded", FULL, problems_have=("converted to 4.5",)
        ),
        raw=colab(good),
    )
    add(
        Case(
            "stripped",
            "correct, all nbgrader metadata stripped",
            "repaired",
            FULL,
            problems_have=("re-attached (by id)",),
        ),
        strip_nbgrader(good),
    )
    add(
        Case(
            "stripped_colab",
            "correct, metadata stripped and Colab format",
            "repaired",
            FULL,
            problems_have=("re-attached (by alignment)",),
        ),
        raw=colab(strip_nbgrader(good)),
    )
    dup = copy.deepcopy(good)
    i = cell_index(dup, "softmax")
    dup.cells.insert(i + 1, copy.deepcopy(dup.cells[i]))
    dup.cells[i + 1].id = "copy-of-softmax"
    add(
        Case(
            "duplicated",
            "answer cell copied (duplicated grade id)",
            "repaired",
            FULL,
            problems_have=("copied cell with grade id softmax",),
        ),
        dup,
    )
    deleted = answered({"softmax": OVERFLOWS})
    del deleted.cells[cell_index(deleted, "test_softmax")]
    add(
        Case(
            "deleted_test",
            "softmax overflows and its test cell was deleted",
            "repaired",
            6.0,
            problems_have=("test cell test_softmax deleted: restored",),
        ),
        deleted,
    )
    edited = answered({"scaled_dot_product_attention": NO_SCALE})
    j = cell_index(edited, "test_scaled_dot_product_attention")
    edited.cells[j].source = "pass"
    edited.cells[j].metadata.nbgrader["points"] = 100
    add(
        Case(
            "edited_test",
            "wrong attention, its test replaced by `pass`, points set to 100",
            "repaired",
            4.0,
            problems_have=("edited: restored",),
        ),
        edited,
    )
    add(
        Case("extra_cells", "correct plus the student's own cells", "graded", FULL, problems_have=("extra cell",)),
        with_extra(with_extra(good, "print('my own experiment')", after="softmax"), "x = 1 + 1"),
    )
    case = Case(
        "two_notebooks",
        "a blank draft and, newer, the correct notebook",
        "repaired",
        FULL,
        problems_have=("2 notebooks handed in: graded two_notebooks/final.ipynb",),
    )
    case.files = {"two_notebooks/draft.ipynb": dump(release()), "two_notebooks/final.ipynb": dump(good)}
    case.mtimes = {"two_notebooks/draft.ipynb": 1_700_000_000.0, "two_notebooks/final.ipynb": 1_700_100_000.0}
    cases.append(case)
    other = copy.deepcopy(good)
    other.metadata["manyheads"]["exercise"] = "02_representation_subspaces"
    add(
        Case(
            "wrong_assignment", "a notebook of another assignment", "failed", None, problems_have=("wrong assignment",)
        ),
        other,
    )
    add(
        Case("truncated", "invalid JSON (a truncated download)", "failed", None, problems_have=("not valid JSON",)),
        raw=dump(good)[:5000],
    )
    add(
        Case("not_notebook", "valid JSON but not a notebook", "failed", None, problems_have=("not a Jupyter",)),
        raw=b'{"hello": "world"}',
    )
    add(
        Case("infinite_loop", "correct, then a cell that never ends", "graded", FULL, problems_have=("time limit",)),
        with_extra(good, "while True:\n    pass"),
    )
    add(
        Case(
            "memory_bomb",
            "correct, then a 20 GiB allocation",
            "graded",
            FULL,
            feedback_has=("MemoryError",),
            problems_have=("out of memory",),
        ),
        with_extra(good, "hog = bytearray(20 * 2**30)"),
    )
    add(
        Case("kills_kernel", "kills its own kernel", "failed", None, problems_have=("kernel died",)),
        with_extra(good, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", after="softmax"),
    )
    add(
        Case(
            "huge_output",
            "correct, then prints 50 MB",
            "graded",
            FULL,
            feedback_has=("output cut by the grader",),
            problems_have=("output cut",),
        ),
        with_extra(good, "print('x' * 50_000_000)"),
    )
    add(
        Case("network", "correct, then calls out to the network", "graded", FULL, feedback_has=("network blocked",)),
        with_extra(
            good,
            "import urllib.request\ntry:\n    urllib.request.urlopen('http://93.184.215.14', timeout=5)\n"
            "    print('LEAK' + 'ED network open')\nexcept Exception as exc:\n"
            "    print('network', 'blocked', type(exc).__name__)",
        ),
    )
    add(
        Case(
            "fork_bomb",
            "correct, then forks until something stops it",
            "graded",
            FULL,
            feedback_has=("fork blocked after",),
        ),
        with_extra(
            good,
            "import os, time\nchildren = 0\ntry:\n    while children < 100_000:\n"
            "        if os.fork() == 0:\n            time.sleep(600)\n            os._exit(0)\n"
            "        children += 1\n    print('LEAK' + 'ED: no process limit')\nexcept OSError as exc:\n"
            "    print('fork', 'blocked after', children, type(exc).__name__)",
        ),
    )
    attacks = hostile_code(out, submissions, marker)
    add(
        Case(
            "reads_secrets",
            "tries to read the solutions, the gradebook and neighbours",
            "graded",
            FULL,
            feedback_has=("blocked read", "neighbours visible: 0"),
        ),
        with_extra(good, attacks["reads"]),
    )
    add(
        Case(
            "writes_outside",
            "tries to write outside its scratch folder",
            "graded",
            FULL,
            feedback_has=("blocked write",),
        ),
        with_extra(good, attacks["writes"]),
    )
    cheat = answered(
        {
            "attention_entropy": "def attention_entropy(weights):\n    return weights.sum(dim=-1) * 0\n"
            "mh.checks.check_attention_entropy = lambda f: print('all visible checks passed')\n"
            "import builtins\nbuiltins.print('patched the check')"
        }
    )
    add(Case("monkeypatch", "wrong entropy, patches the visible check the test cell calls", "graded", 6.0), cheat)
    for route, code in HANDING_OVER.items():
        add(
            Case(
                f"hands_over_{route}",
                f"Part 2 handed to the course's attention ({route.replace('_', ' ')})",
                "graded",
                FULL - 4.0,
                feedback_has=("OwnWorkError", "write the computation yourself"),
                problems_have=("own work: test_scaled_dot_product_attention got no points",),
            ),
            answered({"scaled_dot_product_attention": code}),
        )
    add(
        Case(
            "hands_over_gc",
            "Part 3 fetched from the garbage collector: not closed, flagged",
            "graded",
            FULL,
            problems_have=("own work, look by hand: answer cell attention_entropy: walks the collector's objects",),
        ),
        answered({"attention_entropy": GC_ROUTE}),
    )
    for case in cases:
        for name, content in case.files.items():
            path = submissions / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            if name in case.mtimes:
                os.utime(path, (case.mtimes[name], case.mtimes[name]))
    return cases


def build_plain(submissions: Path, n: int) -> list[Case]:
    """``n`` ordinary submissions (correct, partly correct, blank in turn) for the benchmark."""
    kinds = [
        ("graded", FULL, answered()),
        ("graded", 4.0, answered({"scaled_dot_product_attention": NO_SCALE})),
        ("graded", 0.0, release()),
    ]
    cases = []
    for i in range(n):
        status, score, nb = kinds[i % 3]
        case = Case(f"s{i:03d}", "plain", status, score, files={f"s{i:03d}/{EX1}.ipynb": dump(nb)})
        (submissions / f"s{i:03d}").mkdir(parents=True, exist_ok=True)
        (submissions / f"s{i:03d}" / f"{EX1}.ipynb").write_bytes(case.files[f"s{i:03d}/{EX1}.ipynb"])
        cases.append(case)
    return cases


def run_grade(*args: str, env: dict | None = None, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {})}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "manyheads_grader", "grade", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def course_with_points(folder: Path, test_id: str, points: float) -> Path:
    """A course in ``folder``: this checkout's config and exercise 1's source, with ``test_id`` worth ``points`` (a
    changed release of the assignment, for ``manyheads grade --course``)."""
    course = folder / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / EX1, course / "solutions" / EX1)
    path = course / "solutions" / EX1 / f"{EX1}.ipynb"
    nb = nbformat.read(path, as_version=4)
    [test] = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == test_id]
    test.metadata["nbgrader"]["points"] = points
    nbformat.write(nb, path)
    return course
