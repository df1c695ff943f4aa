"""Integrity flags of ``manyheads grade`` (flags.py): each detector on hand-made notebooks and code (fast), then one
small class through the real command, sandboxed, where one student ran cells out of order, two share an answer and
one tampers (slow).
"""

from __future__ import annotations

import nbformat
import pytest
from helpers import grading_corpus as corpus

from manyheads_grader.execution import sandbox
from manyheads_grader.notebooks import student_cells
from manyheads_grader.output import report
from manyheads_grader.records import CellEvidence, Options, texts
from manyheads_grader.review import flags, repair
from manyheads_grader.runner import grade

EX1 = corpus.EX1


def _out(text: str) -> dict:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def _error(name: str) -> dict:
    return nbformat.v4.new_output("error", ename=name, evalue="...", traceback=[])


def _result(text: str) -> dict:
    return nbformat.v4.new_output("execute_result", data={"text/plain": text}, execution_count=1)


def _extra(nb, code: str, after: str, count: int | None = None, outputs=()) -> nbformat.NotebookNode:
    nb = corpus.with_extra(nb, code, after=after)
    cell = nb.cells[corpus.cell_index(nb, after) + 1]
    cell.execution_count, cell.outputs = count, list(outputs)
    return nb


def _number(nb, start: int = 1) -> None:
    """Execution counts 1, 2, 3, … down the notebook (a restart and run-all)."""
    for n, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=start):
        cell.execution_count = n


def _rerun(submitted, outputs: dict[str, list]) -> nbformat.NotebookNode:
    """What nbgrader hands back: the repaired notebook with the re-run's outputs (by cell source) and counts."""
    graded = repair.check(corpus.dump(submitted), corpus.release(), EX1).notebook
    for n, cell in enumerate((c for c in graded.cells if c.cell_type == "code"), start=1):
        cell.execution_count, cell.outputs = n, list(outputs.get(cell.source, []))
    return graded


# ------------------------------------------------------------------------------------------------------------------
# out of order (fast)


def _out_of_order_case():
    """`scale` printed in a cell above the one that defines it, run in the wrong order: 0.125 stored, NameError in
    a top-to-bottom run."""
    nb = corpus.answered()
    _number(nb)
    nb = _extra(nb, "print('two and three:', 2 + 3)", "softmax", 3, [_out("two and three: 5\n")])
    nb = _extra(nb, "print('scale', scale)", "scaled_dot_product_attention", 41, [_out("scale 0.125\n")])
    nb = _extra(nb, "scale = 1 / math.sqrt(64)", "test_attention_entropy", 40)
    graded = _rerun(
        nb,
        {
            "print('two and three:', 2 + 3)": [_out("two and three: 5\n")],
            "print('scale', scale)": [_error("NameError")],
        },
    )
    return nb, graded


def test_a_stale_output_is_flagged_with_the_cell_both_outputs_and_the_counts():
    submitted, graded = _out_of_order_case()
    found = flags.out_of_order(submitted, graded, corpus.release())
    assert len(found) == 1 and found[0].startswith("out of order: "), found
    index = next(i for i, c in enumerate(graded.cells) if c.source == "print('scale', scale)")
    assert f"extra cell {index + 1} (ran as [41]) showed `scale 0.125`, the re-run gives `NameError`" in found[0]
    assert "execution counts in notebook order are not increasing (1, 2, 3, 3, 4, 5, 6, 41," in found[0], found
    assert "two and three" not in found[0], "a cell whose output is the same is not quoted"
    # the light copy kept for a class gives the same flag, from the bytes as handed in
    assert flags.out_of_order(flags.stored(corpus.dump(submitted)), graded, corpus.release()) == found
    # and the cell behind it, whole, for the report
    assert flags.out_of_order_cells(submitted, graded, corpus.release()) == [
        CellEvidence(f"extra cell {index + 1}", 41, "print('scale', scale)", ("scale 0.125",), ("NameError",))
    ]


def test_the_cells_behind_the_flag_are_whole_where_the_flag_line_is_cut():
    """Issue 37 item 6: the flag's line cuts each output to a line and quotes three cells; the evidence keeps every
    differing cell with its whole source and outputs."""
    nb = corpus.answered()
    _number(nb)
    source = "# a long cell\nfor name in names:\n    print(name, table[name])\n" + "x = 1\n" * 20
    printed = "".join(f"row {i}: {'#' * 30}\n" for i in range(12))
    nb = _extra(nb, source, "softmax", 9, [_out(printed)])
    for k, anchor in enumerate(("scaled_dot_product_attention", "attention_entropy", "check_softmax")):
        nb = _extra(nb, f"print('stale {k}', w{k})", anchor, 30 + k, [_out(f"stale {k} 1\n")])
    reruns = {source: [_error("NameError")]} | {f"print('stale {k}', w{k})": [_error("NameError")] for k in range(3)}
    graded = _rerun(nb, reruns)
    [line] = flags.out_of_order(nb, graded, corpus.release())
    cells = flags.out_of_order_cells(nb, graded, corpus.release())
    assert "(and 1 more)" in line and "…" in line and printed.strip() not in line
    assert len(cells) == 4 and cells[0].source == source and cells[0].handed_in == (printed.strip(),)
    assert sorted(c.ran_as for c in cells) == [9, 30, 31, 32] and all(c.rerun == ("NameError",) for c in cells)


def test_a_notebook_run_again_from_the_top_is_not_flagged():
    """Different execution counts, memory addresses and timings, cells that never ran, images and stderr: the same
    results, so no flag. Neither for a re-run that stopped on the grader's limits or the own-work rule."""
    nb = corpus.answered()
    nb = _extra(nb, "softmax", "softmax", None, [_result("<function softmax at 0x7f3a2b1c9d30>")])
    nb = _extra(nb, "%time x = 1", "scaled_dot_product_attention", None, [_out("Wall time: 1.24 ms\n")])
    nb = _extra(nb, "while True: pass", "attention_entropy", None, [_out("stopped\n")])
    nb = _extra(nb, "print(mh.scaled_dot_product_attention)", "test_attention_entropy")
    picture = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})
    nb = _extra(nb, "import warnings; warnings.warn('w')", "check_softmax", None, [_out("ok\n"), picture])
    _number(nb, start=7)
    graded = _rerun(
        nb,
        {
            "softmax": [_result("<function softmax at 0x7f99000c1e50>")],
            "%time x = 1": [_out("Wall time: 3.5 ms\n")],
            "while True: pass": [_error("KeyboardInterrupt")],
            "print(mh.scaled_dot_product_attention)": [_error("OwnWorkError")],
            "import warnings; warnings.warn('w')": [
                _out("ok\n"),
                nbformat.v4.new_output("stream", name="stderr", text="UserWarning: w\n"),
            ],
        },
    )
    assert flags.out_of_order(nb, graded, corpus.release()) == []


def test_a_visible_check_that_passed_only_out_of_order_is_flagged():
    nb = corpus.answered({"softmax": corpus.OVERFLOWS})
    _number(nb)
    nb.cells[corpus.cell_index(nb, "check_softmax")].outputs = [_out("check_softmax: all visible checks passed\n")]
    graded = _rerun(nb, {nb.cells[corpus.cell_index(nb, "check_softmax")].source: [_error("AssertionError")]})
    found = flags.out_of_order(nb, graded, corpus.release())
    assert len(found) == 1 and "read-only cell check_softmax" in found[0] and "AssertionError" in found[0]
    assert "execution counts increase down the notebook" in found[0]


# ------------------------------------------------------------------------------------------------------------------
# identical answers (fast)

OWN_SOFTMAX = '''def softmax(scores):
    """Softmax over the last axis."""
    peak = scores.amax(dim=-1, keepdim=True)  # exp never overflows
    e = torch.exp(scores - peak)
    return e / e.sum(dim=-1, keepdim=True)'''
OWN_SOFTMAX_RELAID = """def softmax(scores):
    # the same code, comments, docstring and blank lines changed
    peak = scores.amax(dim = -1, keepdim = True)

    e = torch.exp(scores - peak)   # shift first


    return e / e.sum(dim=-1, keepdim=True)
"""
OWN_SOFTMAX_RENAMED = OWN_SOFTMAX.replace("peak", "top")


def test_copies_that_differ_in_layout_only_are_grouped_and_renamed_ones_are_not():
    by_student = {
        "ann": {"softmax": OWN_SOFTMAX, "attention_entropy": "def attention_entropy(w):\n    return w"},
        "ben": {"softmax": OWN_SOFTMAX_RELAID},
        "cy": {"softmax": OWN_SOFTMAX_RENAMED},
        "dee": {"softmax": OWN_SOFTMAX + "\n# done!\n"},
    }
    found = flags.identical_answers(by_student, corpus.release())
    assert set(found) == {"ann", "ben", "dee"}
    assert found["ann"] == [
        "identical answer: answer cell softmax has the same code as ben, dee (comments, docstrings and blank lines "
        "aside; it starts `peak = scores.amax(dim=-1, keepdim=True)`)"
    ]
    assert "same code as ann, dee (comments" in found["ben"][0]


LONGER_SOFTMAX = OWN_SOFTMAX.replace(
    "return e", "total = e.sum(dim=-1, keepdim=True)\n    assert (total > 0).all()\n    return e"
)


def test_a_large_group_is_named_by_its_size():
    assert flags.normalise(LONGER_SOFTMAX)[1] >= flags.COMMON_TOKENS
    found = flags.identical_answers({f"s{i:02d}": {"softmax": LONGER_SOFTMAX} for i in range(9)})
    assert len(found) == 9
    assert "has the same code as 8 other students (s01, s02, s03, s04, s05 and more)" in found["s00"][0]
    [group] = flags.identical_groups({f"s{i:02d}": {"softmax": LONGER_SOFTMAX} for i in range(9)})
    assert len(group.students) == 9 and not group.common and not group.reference


def test_a_short_answer_most_of_the_class_writes_the_same_way_is_not_flagged():
    assert flags.normalise(OWN_SOFTMAX)[1] < flags.COMMON_TOKENS
    by_student = {f"s{i:02d}": {"softmax": OWN_SOFTMAX} for i in range(6)}
    by_student |= {f"t{i:02d}": {"softmax": OWN_SOFTMAX_RENAMED} for i in range(2)}  # a small group of its own
    assert set(flags.identical_answers(by_student)) == {"t00", "t01"}
    common = [g for g in flags.identical_groups(by_student) if g.common]
    assert len(common) == 1 and len(common[0].students) == 6


def test_the_published_reference_solution_is_marked_as_such_even_for_one_student():
    reference = corpus.answers()
    by_student = {"ann": {"softmax": reference["softmax"]}, "ben": {"softmax": OWN_SOFTMAX}}
    found = flags.identical_answers(by_student, corpus.release(), reference)
    assert set(found) == {"ann"} and "answer cell softmax is the published reference solution" in found["ann"][0]
    by_student["cy"] = {"softmax": "# mine\n" + reference["softmax"]}
    found = flags.identical_answers(by_student, corpus.release(), reference)
    assert "is the published reference solution; 2 students handed it in" in found["cy"][0]
    [group] = [g for g in flags.identical_groups(by_student, corpus.release(), reference) if g.reference]
    assert group.students == ["ann", "cy"]


def test_stubs_unanswered_cells_and_short_answers_are_never_grouped():
    stub = corpus.release().cells[corpus.cell_index(corpus.release(), "softmax")].source
    one_liner = corpus.answers()["attention_entropy"]  # many students write this line on their own
    assert flags.normalise(one_liner)[1] < flags.MIN_TOKENS <= flags.normalise(OWN_SOFTMAX)[1]
    by_student = {
        "ann": {"softmax": stub, "attention_entropy": one_liner},
        "ben": {"softmax": stub + "\n\n# not done yet\n", "attention_entropy": one_liner},
        "cy": {
            "softmax": "def softmax(scores):\n    raise NotImplementedError('todo')\n",
            "attention_entropy": one_liner,
        },
        "dee": {"softmax": "# The answer cell was missing from the submission; re-inserted empty by manyheads grade."},
        "eve": {"softmax": "# The answer cell was missing from the submission; re-inserted empty by manyheads grade."},
    }
    assert flags.identical_answers(by_student, corpus.release()) == {}


def test_answers_that_do_not_parse_are_compared_as_text():
    broken = OWN_SOFTMAX.replace("return", "retrun")
    found = flags.identical_answers({"ann": {"softmax": broken}, "ben": {"softmax": "# mine\n" + broken + "\n\n"}})
    assert set(found) == {"ann", "ben"}
    assert flags.answers(corpus.answered())["softmax"] == corpus.answers()["softmax"]


# ------------------------------------------------------------------------------------------------------------------
# tampering (fast)

TAMPERING = [
    ("torch.allclose = lambda *a, **k: True", "assigns an attribute of torch"),
    ("import builtins\nbuiltins.__dict__['len'] = lambda x: 0", "assigns an entry of builtins.__dict__"),
    ("__builtins__.print = None", "assigns an attribute of builtins"),
    ("__builtins__['print'] = None", "assigns an entry of builtins"),
    ("vars(torch)['allclose'] = 1", "assigns an entry of torch.__dict__"),
    ("mh.checks.check_softmax = lambda f: None", "assigns an attribute of manyheads.checks"),
    ("getattr(mh, 'checks').check_softmax = print", "assigns an attribute of manyheads.checks"),
    ("import torch.nn.functional as F\nF.softmax = softmax", "assigns an attribute of torch.nn.functional"),
    ("del torch.testing.assert_close", "deletes an attribute of torch.testing"),
    ("setattr(torch.testing, 'assert_close', print)", "setattr on torch.testing"),
    ("import numpy as np\nnp.testing.assert_allclose = print", "assigns an attribute of numpy.testing"),
    ("import sys\nsys.modules['torch'] = None", "edits sys.modules"),
    ("import sys\nsys.modules.pop('manyheads.checks')", "edits sys.modules"),
    ("from importlib import reload\nreload(mh.checks)", "reloads a module"),
    ("import sys\nsys.settrace(print)", "sets a trace function"),
    ("import inspect\nframe = inspect.currentframe().f_back", "reaches into the call stack's frames"),
    ("import os\nhome = os.environ.get('HOME')", "reads the environment variables"),
    ("from os import environ as env\nprint(env['PATH'])", "reads the environment variables"),
    ("import os\nos.getenv('USER')", "reads an environment variable"),
    ("%env", "reads the environment variables"),
    ("!cat ../../solutions/*.ipynb", "runs a shell command"),
    ("import subprocess\nsubprocess.run(['ls', '/'])", "runs a shell command"),
    ("print(open('/etc/passwd').read())", "open of `/etc/passwd`, outside the notebook's folder"),
    ("from pathlib import Path\nPath('..', 'solutions').read_text()", "Path.read_text of `../solutions`, outside"),
    ("import numpy as np\nnp.load('/srv/grades.npy')", "numpy.load of `/srv/grades.npy`, outside"),
    ("import glob\nglob.glob('../*')", "glob.glob of `../*`, outside"),
    ("path = input()\ntorch.load(path)", "torch.load of a path computed at run time"),
    ("def _reference(q, k, v, mask=None):\n    return q", "redefines `_reference`"),
    ("import numpy as torch", "rebinds `torch`"),
    ("math = None", "rebinds `math`"),
    ("exec('import os')", "runs code built from a string"),
]


@pytest.mark.parametrize("code, what", TAMPERING, ids=[f"t{i}" for i in range(len(TAMPERING))])
def test_tampering_is_flagged_with_the_line(code, what):
    found = flags.tampering([("extra cell 9", code)], corpus.release(), {"_reference"})
    assert any(what in f for f in found), found
    line = code.splitlines()[-1] if what != "redefines `_reference`" else code.splitlines()[0]
    n = code.splitlines().index(line) + 1
    assert any(f.startswith(f"tampering: extra cell 9, line {n}: ") and f.endswith(f"`{line.strip()}`") for f in found)


LEGITIMATE = [
    "docs = mh.data.lee_documents()\nsims = mh.data.lee_similarities()",
    "text = open(mh.data_path('coreference.txt')).read()",
    "import numpy as np\np = mh.data.data_path('coreference.txt')\nwith open(p) as f:\n    lines = f.readlines()",
    "from pathlib import Path\nPath(mh.data_path('coreference.txt')).read_text()",
    "with open('my_notes.txt', 'w') as f:\n    f.write('done')\nprint(open('my_notes.txt').read())",
    "x = torch.randn(3)\nx.requires_grad = True\ntokens = ['a', 'b']\nkeys = torch.zeros(2, 2)",
    "import torch\nimport manyheads as mh\nimport math\nfrom manyheads import checks\nmh.checks.check_softmax(softmax)",
    "import sys\nsys.modules['manyheads.attention'].softmax",  # a read: the own-work rule's business, not tampering
    "def helper(x):\n    environ = {'a': 1}\n    return environ['a'] + x",
    "def softmax(scores):\n    e = scores.exp()\n    return e / e.sum(-1, keepdim=True)",
    "this is not python (",
]


@pytest.mark.parametrize("code", LEGITIMATE, ids=[f"ok{i}" for i in range(len(LEGITIMATE))])
def test_the_course_data_loaders_and_ordinary_code_are_not_flagged(code):
    assert flags.tampering([("extra cell 9", code)], corpus.release(), {"_reference"}) == []


def test_line_numbers_are_the_cells_own_after_blank_lines_and_magics():
    code = "\n\n%matplotlib inline\n!ls\nimport os\nprint(os.getenv('HOME'))\n"
    assert flags.tampering([("extra cell 3", code)]) == [
        "tampering: extra cell 3, line 4: runs a shell command (it can read anything the kernel can): `!ls`",
        "tampering: extra cell 3, line 6: reads an environment variable: `print(os.getenv('HOME'))`",
    ]


def test_an_alias_made_in_one_cell_is_followed_into_the_next():
    cells = [("extra cell 5", "import torch.testing as tt"), ("answer cell softmax", "tt.assert_close = print")]
    assert flags.tampering(cells) == [
        "tampering: answer cell softmax, line 1: assigns an attribute of torch.testing: `tt.assert_close = print`"
    ]


# ------------------------------------------------------------------------------------------------------------------
# one small class through the real command (slow)

OWN_ATTENTION = '''def scaled_dot_product_attention(q, k, v, mask=None):
    """My attention."""
    logits = torch.matmul(q, k.transpose(-1, -2)) / q.size(-1) ** 0.5
    if mask is not None:
        logits = logits.masked_fill(mask.logical_not(), -math.inf)  # masked keys get weight 0
    attn = softmax(logits)
    return torch.matmul(attn, v), attn'''
OWN_ATTENTION_RELAID = OWN_ATTENTION.replace('    """My attention."""\n', "    # my attention\n\n").replace(
    "  # masked keys get weight 0", ""
)
TAMPER = """import os
user = os.environ.get("USER", "")
torch.allclose = lambda *a, **k: True
try:
    print(len(open("/etc/hostname").read()))
except OSError as exc:
    print(type(exc).__name__)"""


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    if sandbox.available():  # a reason string when bubblewrap is missing; `make test` installs it
        pytest.fail(sandbox.available())
    base = tmp_path_factory.mktemp("flags")
    submitted, _ = _out_of_order_case()
    notebooks = {
        "ooo": submitted,  # the reference answers, cells run out of order
        "copy_a": corpus.answered({"softmax": OWN_SOFTMAX, "scaled_dot_product_attention": OWN_ATTENTION}),
        "copy_b": corpus.answered(
            {"softmax": OWN_SOFTMAX_RELAID, "scaled_dot_product_attention": OWN_ATTENTION_RELAID}
        ),
        "tamper": corpus.release(),
    }
    # Part 3 answered alone (its one line is too short to count as copied), then a cell that tampers
    tamper = notebooks["tamper"]
    tamper.cells[corpus.cell_index(tamper, "attention_entropy")].source = corpus.answers()["attention_entropy"]
    notebooks["tamper"] = corpus.with_extra(tamper, TAMPER)
    for student, nb in notebooks.items():
        (base / "subs" / student).mkdir(parents=True)
        (base / "subs" / student / f"{EX1}.ipynb").write_bytes(corpus.dump(nb))
    rows, facts = grade(EX1, base / "subs", base / "out", Options(jobs=2, timeout=20))
    report.write_report(base / "out" / "report.md", rows, facts)  # as the command writes them
    report.write_html(base / "out" / "report.html", rows, facts)
    return {r.student_id: r for r in rows}, notebooks, base / "out"


@pytest.mark.slow
def test_a_small_class_gets_its_flags_and_the_same_scores(flagged):
    rows, notebooks, out = flagged
    # the scores of the same code without anything to flag: the corpus's correct and blank cases, Part 3 alone
    assert {s: (r.status, r.score) for s, r in rows.items()} == {
        "ooo": ("graded", corpus.FULL),
        "copy_a": ("graded", corpus.FULL),
        "copy_b": ("graded", corpus.FULL),
        "tamper": ("graded", 2.0),
    }, {s: r.problems for s, r in rows.items()}
    assert all(
        not any(p.startswith(("out of order", "identical", "tampering")) for p in texts(r.problems))
        for r in rows.values()
    )
    [ooo] = rows["ooo"].flags
    # its answers are the published reference solution's (it is built from them): marked as such
    assert [f for f in rows["ooo"].copied if "is the published reference solution" in f], rows["ooo"].copied
    assert ooo.startswith("out of order: ") and "showed `scale 0.125`, the re-run gives `NameError`" in ooo, ooo
    assert "not increasing" in ooo
    # the cell behind it, whole, on this student's row only, and in the report under this student
    assert [(c.source, c.handed_in, c.rerun) for c in rows["ooo"].evidence] == [
        ("print('scale', scale)", ("scale 0.125",), ("NameError",))
    ]
    assert [s for s, r in rows.items() if r.evidence] == ["ooo"]
    page = (out / "report.html").read_text()
    block = page.split('id="out-of-order-cells"', 1)[1].split("</section>", 1)[0]
    assert block.count("<details") == 1 and "<summary>ooo: 1 cell</summary>" in block
    assert "print(&#39;scale&#39;, scale)" in block and "scale 0.125" in block and "NameError" in block
    md = (out / "report.md").read_text()
    assert "#### ooo\n\n" in md and "```python\nprint('scale', scale)\n```" in md
    for student, other in (("copy_a", "copy_b"), ("copy_b", "copy_a")):
        assert rows[student].flags == [] and sorted(rows[student].copied) == [
            f"identical answer: answer cell scaled_dot_product_attention has the same code as {other} (comments, "
            "docstrings and blank lines aside; it starts "
            "`logits = torch.matmul(q, k.transpose(-1, -2)) / q.size(-1) …`)",
            f"identical answer: answer cell softmax has the same code as {other} (comments, docstrings and blank "
            "lines aside; it starts `peak = scores.amax(dim=-1, keepdim=True)`)",
        ], rows[student].copied
    tamper = rows["tamper"].flags
    assert [f.split(": ")[2] for f in tamper] == [
        "reads the environment variables",
        "assigns an attribute of torch",
        "open of `/etc/hostname`, outside the notebook's folder",
    ], tamper
    assert all(f.startswith("tampering: extra cell ") for f in tamper)
    # the flags are what the detectors find in the graded rows' own cells: nothing added or lost on the way
    release = corpus.release()
    assert flags.tampering(student_cells(rows["tamper"].notebook, release), release) == tamper
