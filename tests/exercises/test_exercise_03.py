"""Exercise 3 (head size): its contract, its visible checks, its hidden tests, and real nbgrader grading correct
alternatives (einsum, torch.chunk, loops over heads, integer-valued floats) with full marks and the known bugs
(reshape without transpose, splitting the sequence axis, no 1/√d_head, softmax over the wrong axis, no w_o) with
lost points. The generic release checks (regeneration, validate, metadata) are in test_exercises.py.
"""

from __future__ import annotations

import math

import nbformat
import pytest
import torch

from manyheads.checks import head_size as checks
from manyheads.course import release
from manyheads.attention import merge_heads as ref_merge
from manyheads.attention import split_heads as ref_split

from helpers.nbgrader_course import (ROOT, assert_autograde_ran_cleanly,
                             assert_blank_gets_zero_with_only_not_implemented_errors,
                             assert_solution_gets_full_marks_and_written_answer_waits, auto_scores,
                             autograde_submissions, once_per_run, run_hidden_tests)

EX3 = "03_head_size"
SOURCE = ROOT / release.SOURCE_DIR / EX3 / f"{EX3}.ipynb"
PARTS = ["head_dim", "split_heads", "merge_heads", "mha_param_count", "multi_head_attention"]
FULL = {"test_head_dim": 1.0, "test_split_heads": 2.0, "test_merge_heads": 1.0, "test_mha_param_count": 1.0,
        "test_multi_head_attention": 4.0}


def test_contract_and_anatomy():
    nb = nbformat.read(SOURCE, as_version=4)
    meta = {c.metadata["nbgrader"]["grade_id"]: (c, c.metadata["nbgrader"]) for c in nb.cells if "nbgrader" in c.metadata}
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    signatures = {
        "head_dim": "def head_dim(d_model, n_heads):",
        "split_heads": "def split_heads(x, n_heads):",
        "merge_heads": "def merge_heads(x):",
        "mha_param_count": "def mha_param_count(d_model, n_heads, bias=True):",
        "multi_head_attention": "def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):",
    }
    for name in PARTS:
        cell, m = meta[name]
        assert m["solution"] and not m["grade"] and signatures[name] in cell.source
        i = order.index(name)
        assert order[i + 1 : i + 3] == [f"check_{name}", f"test_{name}"]
        test_cell, test_meta = meta[f"test_{name}"]
        assert test_meta["locked"] and test_meta["points"] == FULL[f"test_{name}"]
        assert test_cell.source.startswith('"""Part ') and "### BEGIN HIDDEN TESTS" in test_cell.source
        assert f"mh.checks.check_{name}({name})" in meta[f"check_{name}"][0].source
        header = nb.cells[i - 1].source
        assert "<details>" in header and "difficulty" in header and "minutes" in header
    written = [g for g, (c, m) in meta.items() if m["grade"] and m["solution"] and c.cell_type == "markdown"]
    assert written == ["more_heads_cost"]
    assert "1024" in nb.cells[order.index("more_heads_cost") - 1].source  # the design card's d_k example


# ------------------------------------------------------------------------------------------------------------------
# Implementations: correct alternatives and the known bugs, as source text (what a student types) and as functions.

CORRECT = {
    "head_dim": '''
def head_dim(d_model, n_heads):
    if not (isinstance(d_model, int) and isinstance(n_heads, int)) or d_model < 1 or n_heads < 1:
        raise ValueError("both must be positive integers")
    if d_model % n_heads != 0:
        raise ValueError(f"{n_heads} heads do not divide {d_model}")
    return d_model / n_heads  # an integer-valued float is fine
''',
    "split_heads": '''
def split_heads(x, n_heads):
    return torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)
''',
    "merge_heads": '''
def merge_heads(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)
''',
    "mha_param_count": '''
def mha_param_count(d_model, n_heads, bias=True):
    d_head = d_model / n_heads
    return 4.0 * n_heads * d_head * d_model + (4 * d_model if bias else 0)
''',
    "multi_head_attention": '''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, s, d = x.shape
    dh = d // n_heads
    q = torch.einsum("bsd,de->bse", x, w_q).view(b, s, n_heads, dh)
    k = torch.einsum("bsd,de->bse", x, w_k).view(b, s, n_heads, dh)
    v = torch.einsum("bsd,de->bse", x, w_v).view(b, s, n_heads, dh)
    scores = torch.einsum("bqhe,bkhe->bhqk", q, k) * dh ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    weights = scores.softmax(dim=-1)
    heads = torch.einsum("bhqk,bkhe->bqhe", weights, v).reshape(b, s, d)
    return heads @ w_o, weights
''',
}
MHA_LOOP = '''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    d_head = x.shape[-1] // n_heads
    outputs, patterns = [], []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
        if mask is not None:
            m = mask if mask.dim() < 4 else mask[:, 0]
            scores = torch.where(m, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        w = torch.softmax(scores, dim=-1)
        patterns.append(w)
        outputs.append(w @ v)
    return torch.cat(outputs, dim=-1) @ w_o, torch.stack(patterns, dim=1)
'''


def _mha(split="x.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)", scale="math.sqrt(d // n_heads)", dim=-1,
         project="merged @ w_o"):
    return f'''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, s, d = x.shape
    def split(x):
        return {split}
    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / {scale}
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim={dim})
    merged = (weights @ v).transpose(1, 2).reshape(b, s, d)
    return {project}, weights
'''


WRONG = {  # name → (part, source, message of the visible check)
    "split without transpose": ("split_heads", '''
def split_heads(x, n_heads):
    b, s, d = x.shape
    return x.reshape(b, n_heads, s, d // n_heads)
''', "mixes positions between heads"),
    "split the sequence axis": ("split_heads", '''
def split_heads(x, n_heads):
    return torch.stack(torch.chunk(x, n_heads, dim=1), dim=1)
''', "splits the positions"),
    "merge without transpose": ("merge_heads", '''
def merge_heads(x):
    b, h, s, d = x.shape
    return x.reshape(b, s, h * d)
''', "move the head axis"),
    "no divisibility check": ("head_dim", '''
def head_dim(d_model, n_heads):
    return d_model // n_heads
''', "should raise ValueError"),
    "only divisibility check": ("head_dim", '''
def head_dim(d_model, n_heads):
    if d_model % n_heads:
        raise ValueError("does not divide")
    return d_model // n_heads
''', "d_model = 0 is not positive"),
    "params without W_o": ("mha_param_count", '''
def mha_param_count(d_model, n_heads, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)
''', "output projection W_o"),
    "params with full-width heads": ("mha_param_count", '''
def mha_param_count(d_model, n_heads, bias=True):
    return n_heads * 4 * d_model * d_model + (4 * d_model if bias else 0)
''', "expected"),
    "mha reshape without transpose": ("multi_head_attention",
                                      _mha(split="x.reshape(b, n_heads, s, d // n_heads)"), "how the heads are split"),
    "mha no scaling": ("multi_head_attention", _mha(scale="1"), r"divide by √d_head"),
    "mha scales by d_model": ("multi_head_attention", _mha(scale="math.sqrt(d)"), "√d_model"),
    "mha softmax over queries": ("multi_head_attention", _mha(dim=-2), "softmax over the keys"),
    "mha forgets w_o": ("multi_head_attention", _mha(project="merged"), "apply the output projection w_o"),
}


def _function(source: str):
    namespace = {"torch": torch, "math": math}
    exec(compile(source, "answer", "exec"), namespace)
    return namespace


def _stub(*args, **kwargs):
    raise NotImplementedError()


# ------------------------------------------------------------------------------------------------------------------
# Visible checks (fast)


def test_visible_checks_pass_on_the_reference_and_on_correct_alternatives(capsys):
    solution = _function("\n".join(c.source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", "")
                                   for c in nbformat.read(SOURCE, as_version=4).cells
                                   if c.metadata.get("nbgrader", {}).get("grade_id") in PARTS))
    alternatives = _function("\n".join(CORRECT.values()))
    loop = _function(MHA_LOOP)["multi_head_attention"]
    for name in PARTS:
        getattr(checks, f"check_{name}")(solution[name])
        getattr(checks, f"check_{name}")(alternatives[name])
    checks.check_split_heads(ref_split)
    checks.check_merge_heads(ref_merge)
    checks.check_multi_head_attention(checks.reference_multi_head_attention)
    checks.check_multi_head_attention(loop)
    assert capsys.readouterr().out.count("all visible checks passed") == 2 * len(PARTS) + 4


@pytest.mark.parametrize("name", PARTS)
def test_visible_checks_let_the_stub_s_not_implemented_error_through(name):
    with pytest.raises(NotImplementedError):
        getattr(checks, f"check_{name}")(_stub)


@pytest.mark.parametrize("bug", WRONG)
def test_visible_checks_explain_the_bug(bug):
    part, source, message = WRONG[bug]
    with pytest.raises(AssertionError, match=message):
        getattr(checks, f"check_{part}")(_function(source)[part])


def test_reference_equals_the_package_module():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 12, generator=gen)
    w = [torch.randn(12, 12, generator=gen) / 4 for _ in range(4)]
    from manyheads.attention import MultiHeadAttention

    mha = MultiHeadAttention(12, 3, bias=False)
    with torch.no_grad():
        for layer, weight in zip((mha.W_q, mha.W_k, mha.W_v, mha.W_o), w):
            layer.weight.copy_(weight.T)  # nn.Linear computes x @ weight.T
    out, weights = mha(x)
    ref_out, ref_weights = checks.reference_multi_head_attention(x, *w, 3)
    assert torch.allclose(out, ref_out, atol=1e-5) and torch.allclose(weights, ref_weights, atol=1e-6)


# ------------------------------------------------------------------------------------------------------------------
# Hidden tests in this process (fast): right answers pass, each known bug fails even without the visible check.


def _run_hidden(part: str, answer: str) -> None:
    run_hidden_tests(EX3, f"test_{part}", answer)


@pytest.mark.parametrize("part", PARTS)
def test_hidden_tests_accept_correct_alternatives(part):
    _run_hidden(part, CORRECT[part])


def test_hidden_tests_accept_a_loop_over_heads():
    _run_hidden("multi_head_attention", MHA_LOOP)


@pytest.mark.parametrize("bug", WRONG)
def test_hidden_tests_reject_the_known_bugs(bug):
    part, source, _ = WRONG[bug]
    with pytest.raises(Exception):
        _run_hidden(part, source)


# ------------------------------------------------------------------------------------------------------------------
# Real nbgrader (slow): every variant submitted and autograded in one run.

SUBMISSIONS = {  # student → (answers by grade_id, expected automatic scores)
    "alternatives": (CORRECT, FULL),
    "loop": ({"multi_head_attention": MHA_LOOP}, FULL),
    "nodivcheck": ({"head_dim": WRONG["only divisibility check"][1]}, {**FULL, "test_head_dim": 0.0}),
    # The reference multi_head_attention calls the student's split_heads and merge_heads, so their bugs cost Part 5 too.
    "splitnotranspose": ({"split_heads": WRONG["split without transpose"][1]},
                         {**FULL, "test_split_heads": 0.0, "test_multi_head_attention": 0.0}),
    "splitseq": ({"split_heads": WRONG["split the sequence axis"][1]},
                 {**FULL, "test_split_heads": 0.0, "test_multi_head_attention": 0.0}),
    "mergenotranspose": ({"merge_heads": WRONG["merge without transpose"][1]},
                         {**FULL, "test_merge_heads": 0.0, "test_multi_head_attention": 0.0}),
    # A correct part 5 written without the helpers keeps its points when a helper is wrong.
    "splitwrongmhaloop": ({"split_heads": WRONG["split without transpose"][1], "multi_head_attention": MHA_LOOP},
                          {**FULL, "test_split_heads": 0.0}),
    "paramsnowo": ({"mha_param_count": WRONG["params without W_o"][1]}, {**FULL, "test_mha_param_count": 0.0}),
    **{student: ({"multi_head_attention": WRONG[bug][1]}, {**FULL, "test_multi_head_attention": 0.0})
       for student, bug in [("mhanotranspose", "mha reshape without transpose"), ("mhanoscale", "mha no scaling"),
                            ("mhawrongaxis", "mha softmax over queries"), ("mhanowo", "mha forgets w_o")]},
}


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    return once_per_run(tmp_path_factory, worker_id, "autograde-exercise-3",
                        lambda: autograde_submissions(tmp_path_factory.mktemp("course3"), EX3,
                                                      {student: answers for student, (answers, _) in SUBMISSIONS.items()}))



@pytest.mark.slow
def test_autograde_ran_cleanly(autograded):
    assert_autograde_ran_cleanly(autograded, SUBMISSIONS)


@pytest.mark.slow
def test_solution_gets_full_marks_and_the_written_answer_waits_for_a_person(autograded):
    assert_solution_gets_full_marks_and_written_answer_waits(autograded, FULL, "more_heads_cost")


@pytest.mark.slow
def test_released_exercise_gets_zero_and_fails_only_with_not_implemented_error(autograded):
    assert_blank_gets_zero_with_only_not_implemented_errors(autograded, FULL)


@pytest.mark.slow
@pytest.mark.parametrize("student", SUBMISSIONS)
def test_variants_get_the_points_they_deserve(autograded, student):
    assert auto_scores(autograded, student) == SUBMISSIONS[student][1]
