"""Exercise 2 (representation subspaces): contract and anatomy, visible checks, hidden tests, and real nbgrader.

The assignment-independent pipeline checks (committed release, regeneration, validate) are parametrised over every
assignment in test_exercises.py; this file adds what is specific to 02_subspaces, in the same layout.
"""

from __future__ import annotations

import math
import re

import nbformat
import pytest
import torch

import manyheads as mh
from manyheads.checks import subspaces as checks
from manyheads.analysis import circuits as subspaces

from helpers.nbgrader_course import (assert_autograde_ran_cleanly, assert_blank_gets_zero_with_only_not_implemented_errors,
                             assert_solution_gets_full_marks_and_written_answer_waits, auto_scores,
                             autograde_submissions, hidden_tests, once_per_run)
from test_exercises import nbgrader_cells, source_path

EX2 = "02_subspaces"
PARTS = ("qk_circuits", "head_scores", "principal_angles")
FULL = {"test_qk_circuits": 3.0, "test_head_scores": 3.0, "test_principal_angles": 3.0}


def test_exercise_2_contract_and_anatomy():
    cells = nbgrader_cells(source_path(EX2))
    nb = nbformat.read(source_path(EX2), as_version=4)
    tests = {g: m for g, m in cells.items() if m["grade"] and not m["solution"]}
    assert set(tests) == set(FULL) and all(m["locked"] and m["points"] == FULL[g] for g, m in tests.items())
    written = [g for g, m in cells.items() if m["grade"] and m["solution"] and m["cell_type"] == "markdown"]
    assert written == ["one_wide_or_four_narrow"]
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    for answer in PARTS:
        i = order.index(answer)
        assert cells[answer]["solution"] and not cells[answer]["grade"]
        assert f"def {answer}(" in nb.cells[i].source
        assert order[i + 1 : i + 3] == [f"check_{answer}", f"test_{answer}"], order[i : i + 3]
        assert f"mh.checks.check_{answer}({answer})" in nb.cells[i + 1].source
        assert re.match(r'"""Part \d \(\d points?\): ', nb.cells[i + 2].source)
        assert "### BEGIN HIDDEN TESTS" in nb.cells[i + 2].source
        header = nb.cells[i - 1].source
        assert "<details>" in header and "difficulty" in header and "minutes" in header
    assert cells["imports"]["locked"]


# ------------------------------------------------------------------------------------------------------------------
# Right and wrong implementations (as source, so the same text feeds the fast tests and real nbgrader)

CIRCUITS_LOOP = '''
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    return torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_k[:, h * d_head:(h + 1) * d_head].T
                        for h in range(n_heads)])
'''
CIRCUITS_CHUNK_EINSUM = '''
def qk_circuits(w_q, w_k, n_heads):
    q = torch.stack(torch.chunk(w_q, n_heads, dim=1))
    k = torch.stack(torch.chunk(w_k, n_heads, dim=1))
    return torch.einsum("hde,hfe->hdf", q, k)
'''
CIRCUITS_ROWS = '''
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[0] // n_heads
    return torch.stack([w_q[h * d_head:(h + 1) * d_head].T @ w_k[h * d_head:(h + 1) * d_head]
                        for h in range(n_heads)])
'''
CIRCUITS_TRANSPOSED = '''
def qk_circuits(w_q, w_k, n_heads):
    d_head = w_q.shape[1] // n_heads
    return torch.stack([w_k[:, h * d_head:(h + 1) * d_head] @ w_q[:, h * d_head:(h + 1) * d_head].T
                        for h in range(n_heads)])
'''
CIRCUITS_NO_SPLIT = '''
def qk_circuits(w_q, w_k, n_heads):
    return (w_q @ w_k.T).expand(n_heads, -1, -1)
'''
CIRCUITS_BAD_RESHAPE = '''
def qk_circuits(w_q, w_k, n_heads):
    d_model = w_q.shape[0]
    q = w_q.reshape(n_heads, d_model, d_model // n_heads)
    k = w_k.reshape(n_heads, d_model, d_model // n_heads)
    return q @ k.transpose(-2, -1)
'''

SCORES_VIA_CIRCUITS = '''
def head_scores(x, w_q, w_k, n_heads):
    d_head = x.shape[-1] // n_heads
    circuits = qk_circuits(w_q, w_k, n_heads)
    return torch.einsum("bid,hde,bje->bhij", x, circuits, x) / d_head ** 0.5
'''
SCORES_EINSUM = '''
def head_scores(x, w_q, w_k, n_heads):
    b, s, d = x.shape
    q = (x @ w_q).view(b, s, n_heads, d // n_heads)
    k = (x @ w_k).view(b, s, n_heads, d // n_heads)
    return torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d // n_heads)
'''


def _scores(scale="math.sqrt(d_head)", reshape="ok", swap=False):
    split = ("(x @ {w}).reshape(batch, seq, n_heads, d_head).transpose(1, 2)" if reshape == "ok"
             else "(x @ {w}).reshape(batch, n_heads, seq, d_head)")
    first, second = ("k", "q") if swap else ("q", "k")
    return f'''
def head_scores(x, w_q, w_k, n_heads):
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    q = {split.format(w="w_q")}
    k = {split.format(w="w_k")}
    return {first} @ {second}.transpose(-2, -1) / {scale}
'''


ANGLES_NUMPY = '''
import numpy as np

def principal_angles(a, b):
    qa, _ = np.linalg.qr(a.detach().double().numpy())
    qb, _ = np.linalg.qr(b.detach().double().numpy())
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return torch.from_numpy(np.sort(np.arccos(np.clip(s, -1, 1))))
'''
ANGLES_SVD_BASIS = '''
def principal_angles(a, b):
    ua = torch.linalg.svd(a, full_matrices=False)[0]
    ub = torch.linalg.svd(b, full_matrices=False)[0]
    cos = torch.linalg.svd(ua.T @ ub)[1]
    return torch.acos(torch.clamp(cos, max=1.0)).sort().values
'''


def _angles(orthonormalise=True, post="torch.arccos(cosines)"):
    prep = ("qa, qb = torch.linalg.qr(a)[0], torch.linalg.qr(b)[0]" if orthonormalise
            else "qa, qb = a / a.norm(dim=0), b / b.norm(dim=0)")
    return f'''
def principal_angles(a, b):
    {prep}
    cosines = torch.linalg.svdvals(qa.T @ qb).clamp(-1.0, 1.0)
    return {post}
'''


RIGHT = {
    "qk_circuits": {"loop": CIRCUITS_LOOP, "chunk_einsum": CIRCUITS_CHUNK_EINSUM},
    "head_scores": {"via_circuits": SCORES_VIA_CIRCUITS, "einsum": SCORES_EINSUM},
    "principal_angles": {"numpy": ANGLES_NUMPY, "svd_basis": ANGLES_SVD_BASIS},
}
WRONG = {  # name: (source, what the visible check says)
    "qk_circuits": {
        "rows": (CIRCUITS_ROWS, "columns"),
        "transposed": (CIRCUITS_TRANSPOSED, "transposed"),
        "no_split": (CIRCUITS_NO_SPLIT, "full w_q @ w_k"),
        "bad_reshape": (CIRCUITS_BAD_RESHAPE, "differs from"),
    },
    "head_scores": {
        "unscaled": (_scores(scale="1"), "not scaled"),
        "sqrt_d_model": (_scores(scale="math.sqrt(d_model)"), "√d_model"),
        "swapped": (_scores(swap=True), "swapped"),
        "no_transpose": (_scores(reshape="bad"), "transpose"),
    },
    "principal_angles": {
        "not_orthonormal": (_angles(orthonormalise=False), "orthonormalise"),
        "degrees": (_angles(post="torch.rad2deg(torch.arccos(cosines))"), "degrees"),
        "cosines": (_angles(post="cosines"), "cosines"),
        "descending": (_angles(post="torch.arccos(cosines).flip(0)"), "ascending"),
    },
}


def _define(source: str, namespace: dict | None = None) -> dict:
    namespace = {"torch": torch, "math": math, "mh": mh, **(namespace or {})}
    exec(compile(source, "answer", "exec"), namespace)
    return namespace


def _reference_namespace() -> dict:
    """The solution's own answer cells, as a student namespace (so head_scores may call qk_circuits)."""
    nb = nbformat.read(source_path(EX2), as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in PARTS:
            namespace = _define(cell.source, namespace)
    return namespace


def _hidden_tests(grade_id: str) -> str:
    return hidden_tests(EX2, grade_id)


# ------------------------------------------------------------------------------------------------------------------
# Visible checks (fast)


@pytest.mark.parametrize("part", PARTS)
def test_visible_checks_pass_on_the_solution_and_right_variants(part, capsys):
    check = getattr(checks, f"check_{part}")
    check(_reference_namespace()[part])
    for source in RIGHT[part].values():
        check(_define(source, _reference_namespace())[part])
    assert capsys.readouterr().out.count("all visible checks passed") == 1 + len(RIGHT[part])


@pytest.mark.parametrize("part", PARTS)
def test_visible_checks_let_the_stub_s_not_implemented_error_through(part):
    def stub(*args):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        getattr(checks, f"check_{part}")(stub)


@pytest.mark.parametrize("part, bug", [(p, b) for p in PARTS for b in WRONG[p]])
def test_visible_checks_explain_the_bug(part, bug):
    source, message = WRONG[part][bug]
    with pytest.raises(AssertionError, match=re.escape(message)):
        getattr(checks, f"check_{part}")(_define(source, _reference_namespace())[part])


def test_package_functions_pass_the_visible_checks():
    """The package's own analysis functions agree with the exercise's contract."""
    checks.check_principal_angles(subspaces.principal_angles)
    checks.check_qk_circuits(lambda w_q, w_k, n: subspaces.qk_circuit(
        w_q.reshape(w_q.shape[0], n, -1).permute(1, 0, 2), w_k.reshape(w_k.shape[0], n, -1).permute(1, 0, 2)))


# ------------------------------------------------------------------------------------------------------------------
# Hidden tests on their own (fast): right answers pass, every wrong one fails even without the visible check.


@pytest.mark.parametrize("part, variant", [(p, v) for p in PARTS for v in ["solution", *RIGHT[p]]])
def test_hidden_tests_pass_right_answers(part, variant):
    namespace = _reference_namespace()
    if variant != "solution":
        namespace = _define(RIGHT[part][variant], namespace)
    exec(compile(_hidden_tests(f"test_{part}"), part, "exec"), namespace)


@pytest.mark.parametrize("part, bug", [(p, b) for p in PARTS for b in WRONG[p]])
def test_hidden_tests_fail_wrong_answers(part, bug):
    namespace = _define(WRONG[part][bug][0], _reference_namespace())
    with pytest.raises(Exception):
        exec(compile(_hidden_tests(f"test_{part}"), part, "exec"), namespace)


# ------------------------------------------------------------------------------------------------------------------
# Real nbgrader (slow): every variant above as a student submission.

SUBMISSIONS = {  # student id (letters and digits only) → (answers by grade_id, expected auto scores)
    **{f"right{part.replace('_', '')}{name.replace('_', '')}": ({part: source}, FULL)
       for part in PARTS for name, source in RIGHT[part].items()},
    **{f"wrong{part.replace('_', '')}{name.replace('_', '')}": ({part: source}, {**FULL, f"test_{part}": 0.0})
       for part in PARTS for name, (source, _) in WRONG[part].items()},
}


@pytest.fixture(scope="session")
def autograded_2(tmp_path_factory, worker_id):
    return once_per_run(
        tmp_path_factory, worker_id, "autograde-exercise-2",
        lambda: autograde_submissions(tmp_path_factory.mktemp("course2"), EX2,
                                      {s: answers for s, (answers, _) in SUBMISSIONS.items()}),
    )



@pytest.mark.slow
def test_exercise_2_autograde_ran_cleanly(autograded_2):
    assert_autograde_ran_cleanly(autograded_2, SUBMISSIONS)


@pytest.mark.slow
def test_exercise_2_solution_gets_full_marks_and_blank_gets_zero(autograded_2):
    assert_solution_gets_full_marks_and_written_answer_waits(autograded_2, FULL, "one_wide_or_four_narrow")
    assert_blank_gets_zero_with_only_not_implemented_errors(autograded_2, FULL)


@pytest.mark.slow
@pytest.mark.parametrize("student", SUBMISSIONS)
def test_exercise_2_variants_get_the_points_they_deserve(autograded_2, student):
    assert auto_scores(autograded_2, student) == SUBMISSIONS[student][1]
