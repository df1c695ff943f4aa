"""The own-work rule (its guard, manyheads.checks.own_work; its evidence, manyheads_grader.review.own_work): an answer
that hands its part to the course's own implementation is refused by every route a student can take to it, in the
grading kernel and in the visible checks, while the package's own use of those functions and the student's legitimate
use of the package keep working.

The grading-time rule lasts for the whole interpreter, so those cases run in a fresh one (one per exercise, every
route in it); the visible checks' rule lasts only while a check runs, so those run here.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import subprocess
import sys

import pytest
import torch

import manyheads as mh
from manyheads.checks import own_work as guard
from manyheads.checks.own_work import OwnWorkError
from manyheads.course.exercises import EXERCISES
from manyheads.course.layout import REPO_ROOT
from manyheads_grader.review import own_work as evidence

# Each route defines the answer the way a student might; "refused" routes must raise OwnWorkError when the
# hidden test calls the answer, "allowed" ones must return the right result.
SDPA_ROUTES = {
    "direct": """
def scaled_dot_product_attention(q, k, v, mask=None):
    return mh.scaled_dot_product_attention(q, k, v, mask)
""",
    "alias": """
from manyheads.attention import scaled_dot_product_attention as f
def scaled_dot_product_attention(q, k, v, mask=None):
    return f(q, k, v, mask)
""",
    "wrapper": """
def my_helper(q, k, v, mask):
    return mh.attention.scaled_dot_product_attention(q, k, v, mask=mask)
def scaled_dot_product_attention(q, k, v, mask=None):
    return my_helper(q, k, v, mask)
""",
    "import_inside": """
def scaled_dot_product_attention(q, k, v, mask=None):
    from manyheads import attention
    return attention.scaled_dot_product_attention(q, k, v, mask)
""",
    "importlib": """
import importlib
def scaled_dot_product_attention(q, k, v, mask=None):
    return importlib.import_module("manyheads.attention").scaled_dot_product_attention(q, k, v, mask)
""",
    "sys_modules": """
import sys
def scaled_dot_product_attention(q, k, v, mask=None):
    import manyheads.attention
    return sys.modules["manyheads.attention"].scaled_dot_product_attention(q, k, v, mask)
""",
    "getattr": """
def scaled_dot_product_attention(q, k, v, mask=None):
    return getattr(mh, "scaled_" + "dot_product_attention")(q, k, v, mask)
""",
    "bound_name": "scaled_dot_product_attention = mh.scaled_dot_product_attention\n",
    "from_import": "from manyheads.attention import scaled_dot_product_attention\n",
    "lambda": "scaled_dot_product_attention = lambda q, k, v, mask=None: mh.scaled_dot_product_attention(q, k, v)\n",
    "partial": "import functools\nscaled_dot_product_attention = functools.partial(mh.scaled_dot_product_attention)\n",
    "renamed": """
def mine(q, k, v, mask=None):
    return mh.scaled_dot_product_attention(q, k, v, mask)
scaled_dot_product_attention = mine
""",
    "class_of_the_course": """
def scaled_dot_product_attention(q, k, v, mask=None):
    layer = mh.MultiHeadAttention(q.shape[-1], 1, bias=False)
    return layer.attend(q, k, v, mask)
""",
    "thread": """
from concurrent.futures import ThreadPoolExecutor
def scaled_dot_product_attention(q, k, v, mask=None):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(mh.scaled_dot_product_attention, q, k, v, mask).result()
""",
    "reloaded_module": """
import importlib, manyheads.attention
fresh = importlib.reload(manyheads.attention)
def scaled_dot_product_attention(q, k, v, mask=None):
    return fresh.scaled_dot_product_attention(q, k, v, mask)
""",
    "checks_reference": """
def scaled_dot_product_attention(q, k, v, mask=None):
    return mh.checks.single_head_bottleneck._reference_attention(q, k, v, mask)
""",
    "caught_and_faked": """
def scaled_dot_product_attention(q, k, v, mask=None):
    try:
        return mh.scaled_dot_product_attention(q, k, v, mask)
    except Exception:
        return q, q
""",
    # legitimate: the student's own computation, with the package used for what is not the part's answer
    "own_work": """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
""",
    "own_work_with_legit_helpers": """
def scaled_dot_product_attention(q, k, v, mask=None):
    torch.manual_seed(mh.runtime.__name__.__len__())  # any harmless use of the package
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
""",
}
SDPA_ROUTES["own_work_calling_a_softmax_that_uses_torch"] = """
def softmax(scores):  # zeroed in Part 1 (torch.softmax is ruled out there); Part 2 may call it
    return torch.softmax(scores, dim=-1)
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores)
    return w @ v, w
"""
SDPA_ALLOWED = {"own_work", "own_work_with_legit_helpers", "own_work_calling_a_softmax_that_uses_torch"}

HARNESS = r"""
import io, json, linecache, math, sys, torch
from manyheads.checks import own_work as guard
STEM, ROUTES, HIDDEN = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
assert guard.require_own_work(STEM)
import manyheads as mh  # the notebook's first cell, after the kernel's start-up installed the rule
results = {}
for name, source in ROUTES.items():
    filename = f"<cell {name}>"  # a notebook cell, as ipykernel names them
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    err, sys.stderr = sys.stderr, io.StringIO()  # the cell's stderr, where the guard leaves its evidence
    try:
        exec(compile(source, filename, "exec"), globals())
        exec(compile(HIDDEN, "<hidden test>", "exec"), globals())
        results[name] = "passed"
    except guard.OwnWorkError as exc:
        results[name] = "refused: " + str(exc)
    except Exception as exc:
        results[name] = f"error: {type(exc).__name__}: {exc}"
    finally:
        err, sys.stderr = sys.stderr, err
    if guard.MARKER in err.getvalue():
        results[name] += " [evidence written]"
# the package's own use of the guarded functions keeps working, outside the answers
layer = mh.MultiHeadAttention(8, 2)
out, w = layer(torch.randn(2, 3, 8))
results["package_internal"] = "passed" if tuple(w.shape) == (2, 2, 3, 3) else "wrong"
print("RESULTS" + json.dumps(results))
"""

SDPA_HIDDEN = """
_g = torch.Generator().manual_seed(0)
_q, _k, _v = (torch.randn(2, 3, 4, generator=_g) for _ in range(3))
_out, _w = scaled_dot_product_attention(_q, _k, _v)
_ref = torch.softmax(_q @ _k.transpose(-2, -1) / 2, dim=-1)
assert torch.allclose(_w, _ref, atol=1e-6) and torch.allclose(_out, _ref @ _v, atol=1e-6), "wrong attention"
mh.checks.check_scaled_dot_product_attention(scaled_dot_product_attention)
"""


def run_routes(stem: str, routes: dict[str, str], hidden: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, stem, json.dumps(routes), hidden], capture_output=True, text=True, timeout=300
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULTS")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(line[len("RESULTS") :])


@pytest.fixture(scope="module")
def sdpa_results():
    return run_routes("01_single_head_bottleneck", SDPA_ROUTES, SDPA_HIDDEN)


@pytest.mark.parametrize("route", sorted(SDPA_ROUTES))
def test_every_route_to_the_courses_attention_is_refused_at_grading(sdpa_results, route):
    got = sdpa_results[route]
    if route in SDPA_ALLOWED:
        assert got == "passed", got
    elif route == "caught_and_faked":  # the refusal was caught: the test fails on the fake result, with evidence
        assert got.startswith("error: ") and got.endswith("[evidence written]"), got
    else:
        assert got.endswith("[evidence written]"), got
        assert got.startswith("refused: scaled_dot_product_attention: your answer uses "), got
        assert "write the computation yourself" in got
        # the message names what was used, never how the reference computes it
        assert "softmax" not in got.lower().replace("scaled_dot_product_attention", "")


def test_the_refusal_names_the_students_line_as_evidence(sdpa_results):
    assert "line 3: return mh.scaled_dot_product_attention(q, k, v, mask)" in sdpa_results["direct"]
    assert "mh.scaled_dot_product_attention" in sdpa_results["direct"]
    assert "the course's function itself" in sdpa_results["bound_name"]
    assert "mh.MultiHeadAttention" in sdpa_results["class_of_the_course"]


def test_the_package_keeps_using_its_own_functions_under_the_rule(sdpa_results):
    assert sdpa_results["package_internal"] == "passed"


MHA_ROUTES = {
    "checks_reference": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    return mh.checks.head_size.reference_multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask)
""",
    "courses_sdpa_per_head": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    b, s, d = x.shape
    split = lambda t: t.reshape(b, s, n_heads, d // n_heads).transpose(1, 2)
    out, w = mh.scaled_dot_product_attention(split(x @ w_q), split(x @ w_k), split(x @ w_v), mask)
    return out.transpose(1, 2).reshape(b, s, d) @ w_o, w
""",
    # legitimate in this part: the course's split_heads/merge_heads are other parts' answers, not this one's
    "own_attention_with_course_split": """
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (mh.split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return mh.merge_heads(w @ v) @ w_o, w
""",
}

MHA_HIDDEN = """
_g = torch.Generator().manual_seed(1)
_x = torch.randn(2, 5, 6, generator=_g, dtype=torch.float64)
_ws = [torch.randn(6, 6, generator=_g, dtype=torch.float64) for _ in range(4)]
_want, _ = mh.checks.head_size.reference_multi_head_attention(_x, *_ws, 3)  # the test's own use: allowed
_got, _ = multi_head_attention(_x, *_ws, 3)
assert torch.allclose(_got, _want), "wrong multi-head attention"
"""


def test_exercise_3_refuses_the_checks_reference_and_the_course_attention_but_not_other_parts():
    got = run_routes("03_head_size", MHA_ROUTES, MHA_HIDDEN)
    assert got["checks_reference"].startswith("refused: multi_head_attention: your answer uses "), got
    assert "reference_multi_head_attention" in got["checks_reference"]
    assert got["courses_sdpa_per_head"].startswith("refused: "), got
    assert got["own_attention_with_course_split"] == "passed", got
    assert got["package_internal"] == "passed"


SPLIT_BOUND = {
    "split_bound": """
split_heads = mh.split_heads  # hands Part 2 of exercise 3 to the course
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return (w @ v).transpose(1, 2).flatten(-2) @ w_o, w
"""
}
SPLIT_HIDDEN = """
_x = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(2))
assert tuple(split_heads(_x, 3).shape) == (2, 3, 5, 2)
"""


def test_the_rule_belongs_to_the_part_whose_test_runs():
    """A part may use what another part must not: the outermost answer on the stack decides."""
    assert run_routes("03_head_size", SPLIT_BOUND, MHA_HIDDEN)["split_bound"] == "passed"
    got = run_routes("03_head_size", SPLIT_BOUND, SPLIT_HIDDEN)["split_bound"]
    assert got.startswith("refused: split_heads: your answer uses mh.split_heads"), got
    assert "the course's function itself" in got


# ------------------------------------------------------------------------------------------------------------------
# library routes a part's text rules out (CodePart.forbidden): exercise 1's softmax, refused by every route the text
# names, only where the student's own code calls them

EX1 = next(e for e in EXERCISES if e.stem == "01_single_head_bottleneck")
SOFTMAX_PART = next(p for p in EX1.code_parts if p.function == "softmax")
# route -> (the answer, the routine the refusal must name)
SOFTMAX_ROUTES = {
    "torch_softmax": ("def softmax(scores):\n    return torch.softmax(scores, dim=-1)\n", "torch.softmax"),
    "functional": (
        "import torch.nn.functional as F\ndef softmax(scores):\n    return F.softmax(scores, dim=-1)\n",
        "torch.nn.functional.softmax",
    ),
    "tensor_method": ("def softmax(scores):\n    return scores.softmax(dim=-1)\n", "torch.Tensor.softmax"),
    "module": ("def softmax(scores):\n    return torch.nn.Softmax(dim=-1)(scores)\n", "torch.nn.Softmax"),
    "module_as_answer": ("softmax = torch.nn.Softmax(dim=-1)\n", "torch.nn.Softmax"),
    "log_softmax_exp": (
        "def softmax(scores):\n    return torch.log_softmax(scores, dim=-1).exp()\n",
        "torch.log_softmax",
    ),
    "functional_log_softmax": (
        "from torch.nn import functional\ndef softmax(scores):\n    return functional.log_softmax(scores, -1).exp()\n",
        "torch.nn.functional.log_softmax",
    ),
    "tensor_log_softmax": (
        "def softmax(scores):\n    return scores.log_softmax(-1).exp()\n",
        "torch.Tensor.log_softmax",
    ),
    "special": ("def softmax(scores):\n    return torch.special.softmax(scores, -1)\n", "torch.special.softmax"),
    "softmin": (
        "def softmax(scores):\n    return torch.nn.functional.softmin(-scores, dim=-1)\n",
        "torch.nn.functional.softmin",
    ),
    "from_import": (
        "from torch import softmax as sm\ndef softmax(scores):\n    return sm(scores, -1)\n",
        "torch.softmax",
    ),
    "partial": ("import functools\nsoftmax = functools.partial(torch.softmax, dim=-1)\n", "torch.softmax"),
    "helper": (
        "def stable(x):\n    return torch.softmax(x, dim=-1)\ndef softmax(scores):\n    return stable(scores)\n",
        "torch.softmax",
    ),
    "thread": (
        "from concurrent.futures import ThreadPoolExecutor\ndef softmax(scores):\n"
        "    with ThreadPoolExecutor(1) as pool:\n        return pool.submit(torch.softmax, scores, -1).result()\n",
        "torch.softmax",
    ),
}
SOFTMAX_KEPT = {  # never zeroed: the student's own computation, and ways around that only a human judges
    "own_work": """
def softmax(scores):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
""",
    "library_function_that_uses_softmax_inside": """
def softmax(scores):
    return torch.distributions.Categorical(logits=scores).probs
""",
}


@pytest.fixture(scope="module")
def softmax_results():
    from helpers.nbgrader_course import cell_source

    test_cell = cell_source(REPO_ROOT / "solutions" / EX1.stem / f"{EX1.stem}.ipynb", SOFTMAX_PART.test_id)
    routes = {name: source for name, (source, _) in SOFTMAX_ROUTES.items()} | SOFTMAX_KEPT
    return run_routes(EX1.stem, routes, test_cell)  # the graded test cell: the visible check, then the hidden tests


def test_the_part_names_every_route_it_rules_out_and_the_header_repeats_them():
    import nbformat

    from manyheads.course import release

    nb = nbformat.read(REPO_ROOT / "solutions" / EX1.stem / f"{EX1.stem}.ipynb", as_version=4)
    text = next(c.source for c in nb.cells if c.source.startswith("## Part 1"))
    assert all(f"`{route}`" in text for route in SOFTMAX_PART.forbidden), text
    assert {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.nn.Softmax"} <= set(
        SOFTMAX_PART.forbidden
    ) and any("log_softmax" in r for r in SOFTMAX_PART.forbidden)
    assert release.add_own_work_rule(nb, EX1.stem)
    header = " ".join(next(c.source for c in nb.cells if release.OWN_WORK_MARK in c.source).split())
    assert all(f"`{route}`" in header for route in SOFTMAX_PART.forbidden), header


@pytest.mark.parametrize("route", sorted(SOFTMAX_ROUTES))
def test_every_named_route_to_torchs_softmax_zeroes_the_part_at_grading(softmax_results, route):
    got, routine = softmax_results[route], SOFTMAX_ROUTES[route][1]
    assert got.startswith(f"refused: softmax: your answer calls {routine}, a library routine that this part rules out")
    assert got.endswith("[evidence written]") and "gets no points" in got, got


def test_own_work_and_other_ways_around_keep_their_points_at_grading(softmax_results):
    assert {name: softmax_results[name] for name in SOFTMAX_KEPT} == dict.fromkeys(SOFTMAX_KEPT, "passed")
    assert softmax_results["package_internal"] == "passed"  # MultiHeadAttention's own torch.softmax
    assert "line 3: return stable(scores)" not in softmax_results["helper"]
    assert "line 2: return torch.softmax(x, dim=-1)" in softmax_results["helper"]  # the line that calls it
    assert "your answer is torch.nn.Softmax itself" in softmax_results["module_as_answer"]
    assert "your answer is torch.softmax itself" in softmax_results["partial"]


def test_the_routes_are_guarded_when_torch_is_imported_after_the_rule():
    """The plain launcher applies the rule before the notebook imports torch."""
    code = (
        "import sys\nfrom manyheads.checks import own_work as g\nassert g.require_own_work(sys.argv[1])\n"
        "assert 'torch' not in sys.modules\nimport torch\n"
        "def softmax(scores):\n    return scores.softmax(-1)\n"
        "try:\n    softmax(torch.randn(3))\nexcept g.OwnWorkError as e:\n    print('REFUSED', e)\n"
        "print('ROUTINE', torch.softmax(torch.zeros(2), -1).tolist())"
    )
    done = subprocess.run([sys.executable, "-c", code, EX1.stem], capture_output=True, text=True, timeout=300)
    assert "REFUSED softmax: your answer calls torch.Tensor.softmax" in done.stdout, done.stdout + done.stderr
    assert "ROUTINE [0.5, 0.5]" in done.stdout


def _define(source: str, name: str = "softmax"):
    namespace = {"torch": torch, "math": __import__("math"), "mh": mh}
    exec(compile(source, f"<answer {name}>", "exec"), namespace)  # noqa: S102 (a student's cell)
    return namespace[name]


@pytest.mark.parametrize("route", sorted(SOFTMAX_ROUTES))
def test_the_visible_check_refuses_every_named_route_saying_why(route):
    source, routine = SOFTMAX_ROUTES[route]
    with pytest.raises(OwnWorkError, match=rf"softmax: your answer calls {re.escape(routine)}, a library routine"):
        mh.checks.check_softmax(_define(source))


def test_the_visible_checks_keep_own_work_and_other_parts_that_use_torchs_softmax(capsys):
    for source in SOFTMAX_KEPT.values():
        mh.checks.check_softmax(_define(source))
    torch_softmax = _define(SOFTMAX_ROUTES["torch_softmax"][0])  # zeroed in Part 1, fine inside Part 2
    attention = _define(SDPA_ROUTES["own_work_calling_a_softmax_that_uses_torch"], "scaled_dot_product_attention")
    attention.__globals__["softmax"] = torch_softmax
    mh.checks.check_scaled_dot_product_attention(attention)
    mh.checks.check_scaled_dot_product_attention(_own_sdpa)  # calls torch.softmax itself
    mh.checks.check_attention_entropy(lambda w: -torch.special.xlogy(w, w).sum(dim=-1))
    assert capsys.readouterr().out.count("all visible checks passed") == 5
    # outside a check, and for the package, torch's softmax is torch's softmax
    x = torch.randn(3, 4, dtype=torch.float64)
    want = torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)
    for got in (torch.softmax(x, -1), x.softmax(-1), torch.nn.Softmax(-1)(x), torch.log_softmax(x, -1).exp()):
        assert torch.allclose(got, want)
    assert torch.allclose(torch.nn.Parameter(x).softmax(-1), want)  # a subclass goes through __torch_function__


# Exercise 7's text rules out transformers' repeat_kv (Part 2) and torch's fused attention with shared K/V heads
# (Part 3)
EX7_ROUTES = {
    "repeat_kv": (
        "from transformers.models.llama.modeling_llama import repeat_kv as hf_repeat_kv\n"
        "def repeat_kv(x, n_rep):\n    return hf_repeat_kv(x, n_rep)\n",
        "transformers.models.llama.modeling_llama.repeat_kv",
    ),
    "grouped_query_attention": (
        "import torch.nn.functional as F\n"
        "def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None):\n"
        "    batch, seq, d_model = x.shape\n"
        "    d_head = d_model // n_heads\n"
        "    q = (x @ w_q).reshape(batch, seq, n_heads, d_head).transpose(1, 2)\n"
        "    k, v = ((x @ w).reshape(batch, seq, n_kv_heads, d_head).transpose(1, 2) for w in (w_k, w_v))\n"
        "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n"
        "    return out.transpose(1, 2).reshape(batch, seq, d_model) @ w_o, None\n",
        "torch.nn.functional.scaled_dot_product_attention",
    ),
}


@pytest.mark.parametrize("part", sorted(EX7_ROUTES))
def test_exercise_7_refuses_the_library_routines_its_text_rules_out(part):
    source, routine = EX7_ROUTES[part]
    check = getattr(mh.checks, f"check_{part}")
    with pytest.raises(OwnWorkError, match=rf"{part}: your answer calls {re.escape(routine)}, a library routine"):
        check(_define(source, part))


def test_every_route_of_every_part_is_one_the_guard_can_hold():
    for ex in EXERCISES:
        for part in ex.code_parts:
            for route in part.forbidden:
                # a library routine (the course's own are computed_by), guarded once its module is imported
                assert route.startswith(("torch.", "transformers.")), route
                if route.startswith("transformers."):  # torch is imported; transformers only when needed
                    importlib.import_module(route.rsplit(".", 1)[0])
                guard._guard_route(route)
                owner, attribute, obj = guard._resolve(route)
                held = obj.forward if isinstance(obj, type) else obj
                assert held.__code__ in guard._trampolines, (part.function, route)
                assert route in guard._trampolines[held.__code__].targets


# ------------------------------------------------------------------------------------------------------------------
# the visible checks (in this process: the rule holds only while a check runs the student's function)


def _own_sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def test_the_visible_check_refuses_an_answer_that_hands_over_and_passes_an_own_one(capsys):
    def scaled_dot_product_attention(q, k, v, mask=None):
        return mh.scaled_dot_product_attention(q, k, v, mask)

    with pytest.raises(OwnWorkError, match="your answer uses mh.scaled_dot_product_attention"):
        mh.checks.check_scaled_dot_product_attention(scaled_dot_product_attention)
    with pytest.raises(OwnWorkError, match="the course's function itself"):
        mh.checks.check_scaled_dot_product_attention(mh.scaled_dot_product_attention)
    mh.checks.check_scaled_dot_product_attention(_own_sdpa)
    assert "all visible checks passed" in capsys.readouterr().out
    # outside a check the rule does not hold: students may call the package in their own cells
    q = torch.randn(2, 3, 4)
    assert scaled_dot_product_attention(q, q, q)[0].shape == (2, 3, 4)


def test_an_alias_taken_before_the_first_check_is_refused_too():
    from manyheads.analysis.heads import attention_entropy as early  # before any check guarded it

    def attention_entropy(weights):
        return early(weights)

    with pytest.raises(OwnWorkError, match="attention_entropy"):
        mh.checks.check_attention_entropy(attention_entropy)


def test_a_wrapped_answer_and_a_lambda_are_refused_by_the_check():
    with pytest.raises(OwnWorkError):
        mh.checks.check_attention_entropy(lambda w: mh.analysis.heads.attention_entropy(w))

    def head_dim(d_model, n_heads):
        return helper(d_model, n_heads)

    def helper(d_model, n_heads):
        return mh.head_dim(d_model, n_heads)

    with pytest.raises(OwnWorkError, match="mh.head_dim"):
        mh.checks.check_head_dim(head_dim)


def test_every_part_of_every_exercise_names_functions_the_guard_can_hold():
    """computed_by drives the rule for every exercise (5, 6, 7 … included): each entry must exist and be guardable."""
    import importlib

    for ex in EXERCISES:
        for part in ex.code_parts:
            for target in part.computed_by:
                module, _, attr = target.rpartition(".")
                obj = getattr(importlib.import_module(module), attr)
                guard._guard_object(obj, target)
                codes = guard._codes(obj)
                assert any(c in guard._trampolines for c in codes), (ex.stem, part.function, target)


def test_a_guarded_function_keeps_its_results_signature_and_source():
    import inspect

    fn = mh.scaled_dot_product_attention
    before = inspect.signature(fn)
    q, k, v = (torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    want = fn(q, k, v)
    guard._guard_object(fn, "manyheads.attention.scaled_dot_product_attention")
    assert fn.__code__ in guard._trampolines and mh.scaled_dot_product_attention is fn
    got = fn(q, k, v, mask=None)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert inspect.signature(fn) == before and "def scaled_dot_product_attention" in inspect.getsource(fn)
    assert not hasattr(fn, "__wrapped__")  # nothing points a student at the original


# ------------------------------------------------------------------------------------------------------------------
# the grader's side: evidence from the graded notebook, and the routes a guard in the same process cannot close


def test_own_work_refusals_reads_zeroed_tests_and_caught_refusals_from_the_outputs():
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"nbgrader": {"grade_id": "test_a"}},
                "outputs": [
                    {"output_type": "stream", "name": "stderr", "text": f"{guard.MARKER} test_a a: msg A\n"},
                    {"output_type": "error", "ename": "OwnWorkError", "evalue": "a: msg A", "traceback": []},
                ],
            },
            {
                "cell_type": "code",
                "metadata": {"nbgrader": {"grade_id": "test_b"}},
                "outputs": [
                    {"output_type": "stream", "name": "stderr", "text": f"{guard.MARKER} test_b b: msg B\n"},
                    {"output_type": "error", "ename": "AssertionError", "evalue": "wrong", "traceback": []},
                ],
            },
        ]
    }
    zeroed, caught = evidence.own_work_refusals(nb, ["test_a", "test_b"])
    assert zeroed == {"test_a": "a: msg A"}
    assert caught == ["test_b b: msg B"]
    assert evidence.own_work_refusals({"cells": []}, ["test_a"]) == ({}, [])


@pytest.mark.parametrize(
    "source, why",
    [
        ("import gc\nfs = [o for o in gc.get_objects() if callable(o)]", "collector"),
        ("f = mh.scaled_dot_product_attention.__code__.co_consts[1]", "internals"),
        ("src = open(mh.attention.__file__).read()\nexec(src, ns)", "source files"),
        ("from multiprocessing import Pool\np = Pool(1)", "another process"),
        ("x = globals()['_reference']", "namespace"),
        ("from manyheads.checks import own_work", "guard"),
    ],
)
def test_open_routes_are_flagged_for_a_human(source, why):
    notes = evidence.open_routes([("answer cell x", source)])
    assert len(notes) == 1 and notes[0].startswith("answer cell x: ") and why in notes[0], notes


def test_open_routes_flag_hidden_test_helpers_and_leave_ordinary_code_alone():
    own = "def f(x):\n    y = torch.compile(x)  # torch.compile is fine\n    return x.exp() / x.exp().sum()"
    assert evidence.open_routes([("answer cell f", own)], {"_reference"}) == []
    notes = evidence.open_routes([("extra cell 3", "out = _reference(q, k, v)")], {"_reference", "_compare"})
    assert notes == ["extra cell 3: uses _reference, defined only in the hidden tests"]


def test_ways_around_a_library_rule_are_flagged_for_a_human_never_zeroed():
    cells = [
        (
            "answer cell softmax",
            "def softmax(scores):\n    return torch.distributions.Categorical(logits=scores).probs",
        ),
        (
            "answer cell scaled_dot_product_attention",
            "def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)  # allowed in this part\n    return w @ v, w",
        ),
        ("extra cell 9", "print(torch.allclose(softmax(x), torch.softmax(x, -1)))  # comparing is fine"),
        ("extra cell 10", "def helper(x):\n    return torch._softmax(x, -1, False)"),
    ]
    notes = evidence.library_routes(cells, EX1)
    assert notes == [
        "answer cell softmax: computes probabilities with torch.distributions",
        "extra cell 10: calls torch's low-level or private operators",
    ], notes
    kinds = {
        "def softmax(scores):\n    return torch.sparse.softmax(scores.to_sparse(), -1).to_dense()": "sparse.softmax",
        "import torch.nn as nn\nsoftmax = nn.Sequential(nn.Softmax(dim=-1))": "nn.Softmax",
        "def softmax(scores):\n    return torch.ops.aten._softmax(scores, -1, False)": "low-level",
    }
    for source, why in kinds.items():
        [note] = evidence.library_routes([("answer cell softmax", source)], EX1)
        assert note.startswith("answer cell softmax: ") and why in note, note
    own = "def my_softmax(x):\n    e = (x - x.amax(-1, keepdim=True)).exp()\n    return e / e.sum(-1, keepdim=True)\n"
    assert (
        evidence.library_routes([("answer cell softmax", own + "def softmax(s):\n    return my_softmax(s)")], EX1) == []
    )
    # a part already zeroed by the rule is not flagged again; an exercise without such parts is not looked at
    assert evidence.library_routes(cells[:1], EX1, {"test_softmax"}) == []
    assert evidence.library_routes(cells, next(e for e in EXERCISES if e.stem == "03_head_size")) == []
    assert evidence._exercise_of(["test_softmax", "test_scaled_dot_product_attention", "test_attention_entropy"]) is EX1


def test_header_rule_is_a_plain_paragraph():
    assert guard.OWN_WORK_RULE.startswith("**Your own work.**") and "OwnWorkError" in guard.OWN_WORK_RULE


def test_install_for_an_unknown_assignment_does_nothing():
    assert guard.require_own_work("99_not_an_exercise") is False
    assert guard._standing == {}


# ------------------------------------------------------------------------------------------------------------------
# the header paragraph (release) and the grader's reading of a notebook (runner)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.stem)
def test_every_exercise_header_states_the_rule_and_what_each_part_must_not_call(ex):
    import nbformat

    from manyheads.course import release
    from manyheads.course.layout import CourseLayout

    path = CourseLayout(REPO_ROOT).solution(ex.stem)
    if not path.is_file():
        pytest.skip(f"{ex.stem} has no source notebook yet")
    nb = nbformat.read(path, as_version=4)
    assert release.add_own_work_rule(nb, ex.stem)
    header = next(c.source for c in nb.cells if release.OWN_WORK_MARK in c.source)
    assert header.index(release.HOW_TO_WORK_MARK) < header.index(release.OWN_WORK_MARK)
    for part in ex.code_parts:
        for target in part.computed_by:
            assert f"`{guard._short(target)}`" in header, (part.function, target)
    once = header
    assert release.add_own_work_rule(nb, ex.stem)  # regenerating replaces the paragraph, never adds a second one
    assert next(c.source for c in nb.cells if release.OWN_WORK_MARK in c.source) == once
    assert release.add_own_work_rule(nb, "99_unknown") is False


def test_the_release_step_is_nbgraders_header_step_plus_the_rule():
    from nbgrader.preprocessors import IncludeHeaderFooter

    from manyheads.course import release

    steps = release.nbgrader_preprocessors()
    assert issubclass(steps[0], IncludeHeaderFooter) and steps[0] is not IncludeHeaderFooter
    assert IncludeHeaderFooter not in steps and len(steps) > 5


def test_the_grader_reports_zeroed_parts_and_open_routes_from_the_students_cells(tmp_path):
    import nbformat

    from manyheads.course.layout import CourseLayout
    from manyheads_grader import notebooks, records
    from manyheads_grader.review import own_work

    source = nbformat.read(CourseLayout(REPO_ROOT).solution("01_single_head_bottleneck"), as_version=4)
    helpers = notebooks.hidden_helpers(source)
    assert {"_reference", "_compare", "_max_error"} <= helpers
    nb = nbformat.read(CourseLayout(REPO_ROOT).release("01_single_head_bottleneck"), as_version=4)
    release = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in ("softmax", "attention_entropy"):
            cell.source = "def f(x):\n    return x"
    nb.cells.append(nbformat.v4.new_code_cell("out = _reference(q, k, v)"))
    labels = [label for label, _ in notebooks.student_cells(nb, release)]
    # the course's cells and untouched answer cells are not the student's code
    assert labels == ["answer cell softmax", "answer cell attention_entropy", f"extra cell {len(nb.cells)}"]
    graded = nbformat.read(CourseLayout(REPO_ROOT).release("01_single_head_bottleneck"), as_version=4)
    test = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    test.outputs = [nbformat.v4.new_output("error", ename="OwnWorkError", evalue="softmax: evidence", traceback=[])]
    zeroed, problems = own_work.findings(nb, graded, ["test_softmax", "test_attention_entropy"], helpers, release)
    assert zeroed == {"test_softmax": "softmax: evidence"}
    assert "own work: test_softmax got no points: softmax: evidence" in records.texts(problems)
    flagged = f"own work, look by hand: extra cell {len(nb.cells)}: uses _reference, defined only in the hidden tests"
    assert flagged in records.texts(problems) and len(problems) == 2, problems
    assert {p.kind for p in problems} == {records.ProblemKind.OWN_WORK}  # both wait for a human


@pytest.mark.slow
def test_the_command_applies_the_rule_without_the_sandbox_too(tmp_path):
    from helpers import grading_corpus as corpus

    from manyheads_grader.output import report

    subs = tmp_path / "subs"
    for student, nb in (
        ("own", corpus.answered()),
        (
            "hands_over",
            corpus.answered(
                {
                    "scaled_dot_product_attention": corpus.HANDING_OVER["direct"],
                    "softmax": SOFTMAX_ROUTES["tensor_method"][0],  # a library route Part 1 rules out
                }
            ),
        ),
    ):
        (subs / student).mkdir(parents=True)
        (subs / student / f"{corpus.EX1}.ipynb").write_bytes(corpus.dump(nb))
    done = corpus.run_grade(corpus.EX1, str(subs), "--out", str(tmp_path / "out"), "--no-sandbox", "--jobs", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = report.read_csv(tmp_path / "out" / "grades.csv")
    assert float(rows["own"]["score"]) == corpus.FULL and rows["own"]["problems"] == ""
    assert float(rows["hands_over"]["score"]) == corpus.FULL - 4 - 2
    assert rows["hands_over"]["test_scaled_dot_product_attention"] == "0" and rows["hands_over"]["test_softmax"] == "0"
    assert "own work: test_scaled_dot_product_attention got no points" in rows["hands_over"]["problems"]
    assert "own work: test_softmax got no points: softmax: your answer calls torch." in rows["hands_over"]["problems"]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Parts given no points by the own-work rule" in text and "- hands_over, test_scaled_dot" in text
    assert "softmax: your answer calls torch.Tensor.softmax, a library routine that this part rules out" in text
