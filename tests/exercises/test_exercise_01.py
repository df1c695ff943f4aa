"""The exercise pipeline: solutions/ → exercises/ with real nbgrader, grading both ways, and the visible checks.

Fast tests: the committed release against its source (no nbgrader run), and manyheads.checks on right and wrong
functions. Slow tests (``-m slow``) run nbgrader itself in temporary courses: regenerate, validate, and autograde
the solution, the blank exercise and a set of right and wrong implementations, all in one autograde run.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

from manyheads import checks
from manyheads.course import release
from manyheads.attention import scaled_dot_product_attention as reference_attention
from manyheads.course.hygiene import setup_cell_source

from helpers.nbgrader_course import (ROOT, assert_autograde_ran_cleanly,
                             assert_blank_gets_zero_with_only_not_implemented_errors,
                             assert_solution_gets_full_marks_and_written_answer_waits, auto_scores,
                             autograde_submissions, nbgrader_errors, once_per_run, run_hidden_tests,
                             run_nbgrader)

ASSIGNMENTS = release.assignments(ROOT)
EX1 = "01_single_head_bottleneck"


def source_path(name: str) -> Path:
    return ROOT / release.SOURCE_DIR / name / f"{name}.ipynb"


def release_path(name: str) -> Path:
    return ROOT / release.RELEASE_DIR / name / f"{name}.ipynb"


def nbgrader_cells(path: Path) -> dict[str, dict]:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: {**c.metadata["nbgrader"], "cell_type": c.cell_type}
            for c in nb.cells if "nbgrader" in c.metadata}


# ------------------------------------------------------------------------------------------------------------------
# The committed release and its source (fast)


def test_every_assignment_has_a_committed_release():
    assert EX1 in ASSIGNMENTS
    for name in ASSIGNMENTS:
        assert release_path(name).is_file(), f"run `make exercises`: {release_path(name)} is missing"
    assert sorted(p.name for p in (ROOT / release.RELEASE_DIR).iterdir() if p.is_dir()) == ASSIGNMENTS


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_follows_the_rules(name):
    assert release.release_problems(release_path(name)) == []
    nb = nbformat.read(release_path(name), as_version=4)
    assert nb.cells[0].source == setup_cell_source(ROOT)
    assert "generated" in nb.metadata["manyheads"]["note"]
    assert nb.metadata["mystnb"]["execution_mode"] == "off", "the book must render the exercise without running it"


def test_release_problems_catch_leaks_and_missing_pieces(tmp_path):
    nb = nbformat.read(release_path(EX1), as_version=4)
    nb.cells[1].source += "\n### BEGIN SOLUTION"
    nb.cells.pop(0)
    del nb.metadata["manyheads"]
    bad = tmp_path / "bad.ipynb"
    bad.write_text(nbformat.writes(nb), encoding="utf-8")  # no trailing newline: not canonical
    found = "\n".join(release.release_problems(bad))
    for expected in ("BEGIN SOLUTION", "set-up cell", "generated", "canonical"):
        assert expected in found


def test_generate_refuses_unknown_assignments():
    with pytest.raises(ValueError, match="no such assignment"):
        release.generate(ROOT, ["99_no_such_exercise"])


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_keeps_nbgrader_metadata_and_hides_answers(name):
    source, released = nbgrader_cells(source_path(name)), nbgrader_cells(release_path(name))
    assert list(released) == list(source), "the release has the same graded and locked cells, in the same order"
    for grade_id, meta in source.items():
        for key in ("grade", "solution", "locked", "points", "cell_type"):
            assert released[grade_id].get(key) == meta.get(key), (grade_id, key)
    text = release_path(name).read_text(encoding="utf-8")
    src = nbformat.read(source_path(name), as_version=4)
    # No solution line and no model written answer reaches the student.
    for cell in src.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            body = cell.source
            if cell.cell_type == "code":
                body = body.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
            for line in (line.strip() for line in body.splitlines()):
                if len(line) > 25:
                    assert line not in text, f"{meta['grade_id']}: solution text in the release: {line!r}"


def test_exercise_1_contract_and_anatomy():
    cells = nbgrader_cells(source_path(EX1))
    nb = nbformat.read(source_path(EX1), as_version=4)
    assert cells["scaled_dot_product_attention"]["solution"] and not cells["scaled_dot_product_attention"]["grade"]
    assert "def scaled_dot_product_attention(q, k, v, mask=None):" in next(
        c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "scaled_dot_product_attention"
    )
    tests = {g: m for g, m in cells.items() if m["grade"] and not m["solution"]}
    assert set(tests) >= {"test_softmax", "test_scaled_dot_product_attention", "test_attention_entropy"}
    assert all(m["locked"] and m["points"] > 0 for m in tests.values())
    written = [g for g, m in cells.items() if m["grade"] and m["solution"] and m["cell_type"] == "markdown"]
    assert written, "every assignment has a manually graded written answer"
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    for answer in ("softmax", "scaled_dot_product_attention", "attention_entropy"):
        i = order.index(answer)
        # answer cell, then its visible check, then the locked graded test
        assert order[i + 1 : i + 3] == [f"check_{answer}", f"test_{answer}"], order[i : i + 3]
        check_cell, test_cell = nb.cells[i + 1], nb.cells[i + 2]
        assert f"mh.checks.check_{answer}({answer})" in check_cell.source
        assert re.match(r'"""Part \d \(\d points?\): ', test_cell.source), "test cells open with a docstring line"
        assert "### BEGIN HIDDEN TESTS" in test_cell.source
        header = nb.cells[i - 1].source
        assert "<details>" in header and "difficulty" in header and "minutes" in header
    imports = nb.cells[order.index("imports")].source
    assert "import torch" in imports and "import math" in imports and cells["imports"]["locked"]


# ------------------------------------------------------------------------------------------------------------------
# Visible checks (fast, no nbgrader)


def _softmax(scores):
    e = (scores - scores.max(dim=-1, keepdim=True).values).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


def _stub(*args, **kwargs):
    raise NotImplementedError()


def _attention_variant(scale=True, dim=-1, mask_mode="ok", transpose_weights=False, k_t=False):
    def attention(q, k, v, mask=None):
        # k_t: the classic `k.T`, which reverses every axis (spelled out to avoid torch's deprecation warning)
        scores = q @ (k.permute(*reversed(range(k.dim()))) if k_t else k.transpose(-2, -1))
        if scale:
            scores = scores / math.sqrt(q.shape[-1])
        if mask is not None and mask_mode == "ok":
            scores = scores.masked_fill(~mask, float("-inf"))
        elif mask is not None and mask_mode == "inverted":
            scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=dim)
        return weights @ v, (weights.transpose(-2, -1) if transpose_weights else weights)

    return attention


def test_visible_checks_pass_on_reference_implementations(capsys):
    checks.check_softmax(_softmax)
    checks.check_softmax(lambda s: torch.softmax(s.float(), dim=-1))  # float32 inside is fine
    checks.check_scaled_dot_product_attention(reference_attention)
    checks.check_scaled_dot_product_attention(_attention_variant())
    checks.check_attention_entropy(_entropy)
    assert capsys.readouterr().out.count("all visible checks passed") == 5


@pytest.mark.parametrize("check", [checks.check_softmax, checks.check_scaled_dot_product_attention,
                                   checks.check_attention_entropy])
def test_visible_checks_let_the_stub_s_not_implemented_error_through(check):
    with pytest.raises(NotImplementedError):
        check(_stub)


WRONG_SOFTMAX = {
    "returns None": (lambda s: None, "should be a torch.Tensor"),
    "no max subtraction": (lambda s: s.exp() / s.exp().sum(-1, keepdim=True), "Subtract each row's maximum"),
    "wrong axis": (lambda s: torch.softmax(s, dim=-2), "columns sum to 1"),
    "not normalised": (lambda s: (s - s.max(-1, keepdim=True).values).exp(), "each row should sum to 1"),
    "reduces the axis": (lambda s: s.exp().sum(-1), "should keep the shape"),
    "crashes": (lambda s: s.foo(), "raised AttributeError"),
}

WRONG_ATTENTION = {
    "no 1/sqrt(d_k)": (_attention_variant(scale=False), "divide the scores by √d_k"),
    "softmax over queries": (_attention_variant(dim=-2), "softmax runs over the wrong axis"),
    "mask ignored": (_attention_variant(mask_mode="ignored"), "the mask is ignored"),
    "mask inverted": (_attention_variant(mask_mode="inverted"), "the mask is inverted"),
    "weights transposed": (_attention_variant(transpose_weights=True), r"should be \(2, 3, 5\).*did you transpose\?"),
    "k.T on 3-D inputs": (_attention_variant(k_t=True), "raised RuntimeError on q"),
    "divides by d_k": (lambda q, k, v, mask=None: reference_attention(q / math.sqrt(q.shape[-1]), k, v, mask),
                       "not d_k"),
    "returns output only": (lambda q, k, v, mask=None: reference_attention(q, k, v, mask)[0], "should return a tuple"),
}

WRONG_ENTROPY = {
    "0 log 0 = nan": (lambda w: -(w * w.log()).sum(-1), "0 · log 0"),
    "minus sign": (lambda w: torch.special.xlogy(w, w).sum(-1), "minus sign"),
    "bits": (lambda w: _entropy(w) / math.log(2), "natural logarithm"),
    "sums everything": (lambda w: _entropy(w).sum(), r"one number per query, \(2, 3\)"),
}


@pytest.mark.parametrize("bug", WRONG_SOFTMAX)
def test_check_softmax_explains_the_bug(bug):
    fn, message = WRONG_SOFTMAX[bug]
    with pytest.raises(AssertionError, match=message):
        checks.check_softmax(fn)


@pytest.mark.parametrize("bug", WRONG_ATTENTION)
def test_check_attention_explains_the_bug(bug):
    fn, message = WRONG_ATTENTION[bug]
    with pytest.raises(AssertionError, match=message):
        checks.check_scaled_dot_product_attention(fn)


@pytest.mark.parametrize("bug", WRONG_ENTROPY)
def test_check_entropy_explains_the_bug(bug):
    fn, message = WRONG_ENTROPY[bug]
    with pytest.raises(AssertionError, match=message):
        checks.check_attention_entropy(fn)


def test_visible_checks_leave_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    checks.check_scaled_dot_product_attention(reference_attention)
    assert torch.equal(torch.rand(3), expected)


# ------------------------------------------------------------------------------------------------------------------
# Student submissions of exercise 1: each replaces answer cells of the release (keys are grade_ids).
SOFTMAX_STABLE = '''
def softmax(scores):
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
'''
SOFTMAX_OVERFLOWS = '''
def softmax(scores):
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)
'''
ENTROPY_WHERE = '''
def attention_entropy(weights):
    terms = torch.where(weights > 0, weights * torch.log(weights), torch.zeros_like(weights))
    return -terms.sum(dim=-1)
'''
ENTROPY_NAN = '''
def attention_entropy(weights):
    return -(weights * weights.log()).sum(dim=-1)
'''
ENTROPY_BITS = '''
def attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1) / math.log(2)
'''
SDPA_EINSUM = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
'''
SDPA_FLOAT64_MANUAL = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return (weights @ v).to(dtype), weights.to(dtype)
'''
SDPA_MATMUL_BIG_NEGATIVE = '''
import torch.nn.functional as F

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.size(-1) ** -0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -1e9)
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
'''


def _sdpa(scores="q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])", mask="scores.masked_fill(~mask, float('-inf'))",
          dim=-1, weights="weights"):
    return f'''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = {scores}
    if mask is not None:
        scores = {mask}
    weights = torch.softmax(scores, dim={dim})
    return weights @ v, {weights}
'''


# student id → (answers, expected auto scores {test grade_id: points})
FULL = {"test_softmax": 2.0, "test_scaled_dot_product_attention": 4.0, "test_attention_entropy": 2.0}
SUBMISSIONS = {
    "einsum": ({"scaled_dot_product_attention": SDPA_EINSUM, "softmax": SOFTMAX_STABLE,
                "attention_entropy": ENTROPY_WHERE}, FULL),
    "float64manual": ({"scaled_dot_product_attention": SDPA_FLOAT64_MANUAL, "softmax": SOFTMAX_OVERFLOWS,
                       "attention_entropy": ENTROPY_NAN},
                      {**FULL, "test_softmax": 0.0, "test_attention_entropy": 0.0}),
    "matmulbignegative": ({"scaled_dot_product_attention": SDPA_MATMUL_BIG_NEGATIVE, "softmax": SOFTMAX_STABLE,
                           "attention_entropy": ENTROPY_BITS}, {**FULL, "test_attention_entropy": 0.0}),
    "noscaling": ({"scaled_dot_product_attention": _sdpa(scores="q @ k.transpose(-2, -1)")}, {}),
    "wrongaxis": ({"scaled_dot_product_attention": _sdpa(dim=-2)}, {}),
    "maskignored": ({"scaled_dot_product_attention": _sdpa(mask="scores")}, {}),
    "maskinverted": ({"scaled_dot_product_attention": _sdpa(mask="scores.masked_fill(mask, float('-inf'))")}, {}),
    "weightstransposed": ({"scaled_dot_product_attention": _sdpa(weights="weights.transpose(-2, -1)")}, {}),
    "transpose12": ({"scaled_dot_product_attention": _sdpa(scores="q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])")},
                    {}),
}



# The hidden tests on their own (fast, in this process): the wrong answers must fail them even without the visible
# check that the graded cells run first, and the right ones must pass.


def _run_hidden_tests(grade_id: str, answer: str) -> None:
    run_hidden_tests(EX1, grade_id, answer)


HIDDEN_TEST_CASES = [
    ("test_softmax", "SOFTMAX_STABLE", True), ("test_softmax", "SOFTMAX_OVERFLOWS", False),
    ("test_attention_entropy", "ENTROPY_WHERE", True), ("test_attention_entropy", "ENTROPY_NAN", False),
    ("test_attention_entropy", "ENTROPY_BITS", False),
]


@pytest.mark.parametrize("grade_id, answer, correct", HIDDEN_TEST_CASES)
def test_hidden_tests_tell_right_from_wrong_parts_1_and_3(grade_id, answer, correct):
    if correct:
        _run_hidden_tests(grade_id, globals()[answer])
    else:
        with pytest.raises(AssertionError):
            _run_hidden_tests(grade_id, globals()[answer])


@pytest.mark.parametrize("student", SUBMISSIONS)
def test_hidden_tests_tell_right_from_wrong_attention(student):
    answer = SUBMISSIONS[student][0]["scaled_dot_product_attention"]
    if SUBMISSIONS[student][1]:
        _run_hidden_tests("test_scaled_dot_product_attention", answer)
    else:
        with pytest.raises(Exception):
            _run_hidden_tests("test_scaled_dot_product_attention", answer)


# ------------------------------------------------------------------------------------------------------------------
# Real nbgrader (slow)


@pytest.mark.slow
def test_regenerating_the_release_reproduces_the_committed_files(tmp_path):
    written = release.generate_into(tmp_path, ASSIGNMENTS, source_root=ROOT)
    assert [p.relative_to(tmp_path) for p in written] == [release_path(n).relative_to(ROOT) for n in ASSIGNMENTS]
    for path in written:
        committed = ROOT / path.relative_to(tmp_path)
        assert path.read_bytes() == committed.read_bytes(), f"{committed} is stale: run `make exercises`"
    assert not (tmp_path / "gradebook.db").exists(), "--no-db must not create a gradebook"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["source", "release"])
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_nbgrader_validate(tmp_path, name, which):
    """As in nbgrader's course example: the source passes every test, the release (inverted) passes none."""
    (tmp_path / release.CONFIG_FILE).write_bytes((ROOT / release.CONFIG_FILE).read_bytes())
    path = source_path(name) if which == "source" else release_path(name)
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    args = ["validate", str(copy)] + (["--invert"] if which == "release" else [])
    status, output = run_nbgrader(tmp_path, *args)
    expected = "Success! Your notebook passes all the tests." if which == "source" else (
        "Success! The notebook does not pass any tests.")
    assert status == 0 and expected in output, output


def _autograde_exercise_1(base: Path) -> dict:
    """Release exercise 1 with a gradebook, submit every variant, autograde them, and collect what nbgrader decided."""
    return autograde_submissions(base, EX1, {student: answers for student, (answers, _) in SUBMISSIONS.items()})


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    return once_per_run(
        tmp_path_factory, worker_id, "autograde-exercise-1",
        lambda: _autograde_exercise_1(tmp_path_factory.mktemp("course")),
    )



@pytest.mark.slow
def test_autograde_ran_cleanly(autograded):
    assert_autograde_ran_cleanly(autograded, SUBMISSIONS)


@pytest.mark.slow
def test_solution_gets_full_automatic_marks(autograded):
    assert_solution_gets_full_marks_and_written_answer_waits(autograded, FULL, "one_head_two_targets")


@pytest.mark.slow
def test_released_exercise_gets_zero_and_fails_only_with_not_implemented_error(autograded):
    assert_blank_gets_zero_with_only_not_implemented_errors(autograded, FULL)
    assert sum(s[0] or 0.0 for s in autograded["grades"]["blank"].values()) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("student", SUBMISSIONS)
def test_implementation_variants_get_the_points_they_deserve(autograded, student):
    _, expected = SUBMISSIONS[student]
    expected = expected or {**FULL, "test_scaled_dot_product_attention": 0.0}
    assert auto_scores(autograded, student) == expected


def test_nbgrader_errors_sees_nbgrader_records_but_not_kernel_shutdown_noise():
    log = "\n".join([
        "[AutogradeApp | INFO] Autograding /tmp/course/autograded/ada/01/01.ipynb",
        "[AutogradeApp | WARNING] Attribute 'checksum' for cell test_head_dim has changed!",
        "ERROR:tornado.general:Uncaught exception in ZMQStream callback",
        "zmq.error.ZMQError: Socket operation on non-socket",
        "[AutogradeApp | ERROR] Timeout waiting for execute reply (60s).",
        "[AutogradeApp | CRITICAL] Kernel died",
    ])
    assert nbgrader_errors(log) == ["[AutogradeApp | ERROR] Timeout waiting for execute reply (60s).",
                                    "[AutogradeApp | CRITICAL] Kernel died"]
