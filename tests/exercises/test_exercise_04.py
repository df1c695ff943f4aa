"""Exercise 4 (what heads learn): its contract, its hidden tests, and real nbgrader grading correct alternatives
with full marks and the known bugs (summing instead of averaging, 0·log 0 = nan, counting off-edge queries as
zeros, the wrong sign of the offset, not excluding the word itself, counts instead of fractions) with lost points.
The generic release checks (regeneration, validate, metadata) are in test_exercises.py; the visible checks are
tested in test_probes_analysis.py.
"""

from __future__ import annotations


import nbformat
import pytest
import torch

from manyheads import analysis
from manyheads.course import release

from helpers.nbgrader_course import (ROOT, assert_autograde_ran_cleanly,
                             assert_blank_gets_zero_with_only_not_implemented_errors,
                             assert_solution_gets_full_marks_and_written_answer_waits, auto_scores,
                             autograde_submissions, once_per_run, run_hidden_tests)

EX4 = "04_specialization"
SOURCE = ROOT / release.SOURCE_DIR / EX4 / f"{EX4}.ipynb"
PARTS = ["attention_entropy", "offset_attention", "relation_accuracy"]
FULL = {"test_attention_entropy": 2.0, "test_offset_attention": 2.0, "test_relation_accuracy": 3.0}


def _cells():
    nb = nbformat.read(SOURCE, as_version=4)
    return nb, {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


def test_contract_and_anatomy():
    nb, cells = _cells()
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    signatures = {"attention_entropy": "def attention_entropy(weights):",
                  "offset_attention": "def offset_attention(weights, offset):",
                  "relation_accuracy": "def relation_accuracy(weights, arcs):"}
    for name in PARTS:
        meta = cells[name].metadata["nbgrader"]
        assert meta["solution"] and not meta["grade"] and signatures[name] in cells[name].source
        i = order.index(name)
        assert order[i + 1 : i + 3] == [f"check_{name}", f"test_{name}"]  # grade_id = name, test cell test_ + name
        test_meta = cells[f"test_{name}"].metadata["nbgrader"]
        assert test_meta["locked"] and test_meta["points"] == FULL[f"test_{name}"]
        assert cells[f"test_{name}"].source.startswith('"""Part ') and "### BEGIN HIDDEN TESTS" in cells[f"test_{name}"].source
        assert f"mh.checks.check_{name}({name})" in cells[f"check_{name}"].source
        header = nb.cells[i - 1].source
        assert "<details>" in header and "difficulty" in header and "minutes" in header
    written = [g for g, c in cells.items() if c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["solution"]
               and c.cell_type == "markdown"]
    assert written == ["reading_heads"]
    assert nb.metadata["mystnb"]["execution_mode"] == "off"


# ------------------------------------------------------------------------------------------------------------------
# Implementations as source text (what a student types): correct alternatives and the known bugs.

CORRECT = {
    "attention_entropy": '''
def attention_entropy(weights):
    terms = torch.where(weights > 0, weights * torch.log(weights.clamp_min(1e-300)), torch.zeros_like(weights))
    return -terms.sum(-1).sum(-1) / weights.shape[-2]
''',
    "offset_attention": '''
def offset_attention(weights, offset):
    seq_q, seq_k = weights.shape[-2:]
    valid = [i for i in range(seq_q) if 0 <= i + offset < seq_k]
    return sum(weights[..., i, i + offset] for i in valid) / len(valid)
''',
    "relation_accuracy": '''
def relation_accuracy(weights, arcs):
    n_layers, n_heads, seq, _ = weights.shape
    out = torch.zeros(n_layers, n_heads)
    for l in range(n_layers):
        for h in range(n_heads):
            hits = 0
            for d, g in arcs:
                row = weights[l, h, d].clone()
                row[d] = -1.0
                hits += int(row.argmax()) == g
            out[l, h] = hits / len(arcs)
    return out
''',
}

BUGS = {  # student: (part, source)
    "entropy_sums_queries": ("attention_entropy", '''
def attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1).sum(dim=-1)
'''),
    "entropy_nan": ("attention_entropy", '''
def attention_entropy(weights):
    return -(weights * weights.log()).sum(dim=-1).mean(dim=-1)
'''),
    "offset_pads_zeros": ("offset_attention", '''
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=offset, dim1=-2, dim2=-1).sum(dim=-1) / weights.shape[-2]
'''),
    "offset_sign": ("offset_attention", '''
def offset_attention(weights, offset):
    return torch.diagonal(weights, offset=-offset, dim1=-2, dim2=-1).mean(dim=-1)
'''),
    "relation_keeps_self": ("relation_accuracy", '''
def relation_accuracy(weights, arcs):
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (weights.argmax(dim=-1)[..., d] == h).float().mean(dim=-1)
'''),
    "relation_counts": ("relation_accuracy", '''
def relation_accuracy(weights, arcs):
    eye = torch.eye(weights.shape[-1], dtype=torch.bool)
    pred = weights.masked_fill(eye, float("-inf")).argmax(dim=-1)
    d = torch.tensor([a for a, _ in arcs]); h = torch.tensor([b for _, b in arcs])
    return (pred[..., d] == h).float().sum(dim=-1)
'''),
}


def _solution(name: str) -> str:
    _, cells = _cells()
    return cells[name].source


def _run_hidden(part: str, answer: str) -> None:
    run_hidden_tests(EX4, f"test_{part}", answer)


@pytest.mark.parametrize("part", PARTS)
def test_hidden_tests_pass_the_solution_and_correct_alternatives(part):
    _run_hidden(part, _solution(part))
    _run_hidden(part, CORRECT[part])


@pytest.mark.parametrize("student", BUGS)
def test_hidden_tests_reject_the_known_bugs(student):
    part, source = BUGS[student]
    with pytest.raises(AssertionError):
        _run_hidden(part, source)


@pytest.mark.parametrize("part", PARTS)
def test_solution_equals_the_package_reference(part):
    """The chapter uses manyheads.analysis; the exercise's reference solution must agree with it."""
    namespace = {"torch": torch}
    exec(compile(_solution(part), part, "exec"), namespace)
    student, reference = namespace[part], getattr(analysis, part)
    gen = torch.Generator().manual_seed(7)
    w = torch.softmax(torch.randn(2, 3, 6, 6, generator=gen), dim=-1)
    if part == "offset_attention":
        for o in (-2, -1, 1, 3):
            torch.testing.assert_close(student(w, o), reference(w, o))
    elif part == "relation_accuracy":
        arcs = [(0, 2), (1, 0), (3, 5), (4, 3)]
        torch.testing.assert_close(student(w, arcs), reference(w, arcs))
    else:
        torch.testing.assert_close(student(w), reference(w))


# ------------------------------------------------------------------------------------------------------------------
# Real nbgrader (slow)

SUBMISSIONS = {"alternatives": dict(CORRECT), **{s: {part: src} for s, (part, src) in BUGS.items()}}


@pytest.fixture(scope="session")
def autograded(tmp_path_factory, worker_id):
    return once_per_run(tmp_path_factory, worker_id, "autograde-exercise-4",
                        lambda: autograde_submissions(tmp_path_factory.mktemp("course4"), EX4, SUBMISSIONS))



@pytest.mark.slow
def test_autograde_ran_cleanly(autograded):
    assert_autograde_ran_cleanly(autograded, SUBMISSIONS)


@pytest.mark.slow
def test_solution_and_alternatives_get_full_marks_and_the_written_answer_waits(autograded):
    assert_solution_gets_full_marks_and_written_answer_waits(autograded, FULL, "reading_heads")
    assert auto_scores(autograded, "alternatives") == FULL


@pytest.mark.slow
def test_released_exercise_gets_zero_and_fails_only_with_not_implemented_error(autograded):
    assert_blank_gets_zero_with_only_not_implemented_errors(autograded, FULL)


@pytest.mark.slow
@pytest.mark.parametrize("student", BUGS)
def test_each_known_bug_loses_exactly_its_part(autograded, student):
    part, _ = BUGS[student]
    assert auto_scores(autograded, student) == {**FULL, f"test_{part}": 0.0}
