"""The one description of every exercise: its parts, their cells, points, visible checks, and what the package
already computes for each (used by the tests, the grading command and, later, by grading under the own-work rule).

Each graded code part names:

* ``function``: the function the student writes (also the ``grade_id`` of its answer cell);
* ``signature``: its parameters, as the answer cell's ``def`` line spells them (the checks call it that way);
* ``check``: the visible check, reached as ``mh.checks.<check>`` (the one stable path that test cells use);
* ``test_id`` and ``points``: the locked, autograded test cell;
* ``computed_by``: dotted paths of the course package's own functions that compute this part's answer. An answer
  that only hands the work to one of them is not the student's computation;
* ``forbidden``: dotted paths of library routines (torch's) that the part's text rules out and lists by name, e.g.
  every route to torch's own softmax for a part that asks for a softmax. Like ``computed_by`` they are refused
  under the own-work rule, but only where the student's own code calls them (the package, torch and the checks keep
  using them);
* ``forms``: the input forms the spec allows (and the hidden tests use) beyond the check's first input, each as the
  words with which the visible check names it (:class:`Form`). The tests make, for each form, answers that handle
  every other input but miss this one, and the visible check must reject each of them naming the form: a student
  who passes the visible check does not lose hidden points on a form it never tried.

The visible checks of an exercise live in ``manyheads.checks.<its stem without the number>``
(:attr:`Exercise.checks_module`). Adding an exercise is one more :class:`Exercise` entry here, its notebook in
solutions/ and its checks module; the tests, ``mh.checks`` and the grading command find everything else here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Form", "CodePart", "WrittenPart", "Exercise", "EXERCISES", "exercise"]


# How an answer that handles every other input can miss a form: raise on it, return wrong numbers (or a value where
# the spec asks for a ValueError), drop its axes of size 1, return a float for an int, wrap around 32-bit integers,
# or lose precision by computing in float32.
MISSES = ("crashes", "wrong", "squeezed", "float", "int32", "float32")


@dataclass(frozen=True)
class Form:
    """An input form of a part, as its visible check names it.

    ``names``: words the check's message must contain when an answer misses this form (several pieces, in order,
    separated by `` … `` where the message puts other words between them). ``misses``: the ways of missing it that
    the check must catch (:data:`MISSES`).
    """

    names: str
    misses: tuple[str, ...] = ("crashes", "wrong")

    def __post_init__(self) -> None:
        unknown = set(self.misses) - set(MISSES)
        if unknown or not self.misses:
            raise ValueError(f"{self.names!r}: misses must be some of {MISSES}, got {self.misses}")

    @property
    def pieces(self) -> tuple[str, ...]:
        return tuple(self.names.split(" … "))


@dataclass(frozen=True)
class CodePart:
    function: str
    check: str
    test_id: str
    points: int
    computed_by: tuple[str, ...] = ()
    # The answer cell's grade_id; the function's name unless the function was renamed after publication.
    answer_id: str = ""
    signature: str = ""
    forms: tuple[Form | str, ...] = ()  # a plain string is Form(string)
    forbidden: tuple[str, ...] = ()  # library routines the part's text rules out (``torch.softmax``, …)

    def __post_init__(self) -> None:
        if not self.answer_id:
            object.__setattr__(self, "answer_id", self.function)
        object.__setattr__(self, "forms", tuple(f if isinstance(f, Form) else Form(f) for f in self.forms))

    @property
    def def_line(self) -> str:
        """The first line of the answer cell: ``def function(signature):``."""
        return f"def {self.function}({self.signature}):"

    @property
    def check_id(self) -> str:
        # The visible-check cell's grade_id. Fixed when the exercise was first published: gradebooks keep it.
        return f"check_{self.test_id.removeprefix('test_')}"


@dataclass(frozen=True)
class WrittenPart:
    grade_id: str
    points: int


@dataclass(frozen=True)
class Exercise:
    stem: str  # names the chapter, the assignment, and its folders
    code_parts: tuple[CodePart, ...]
    written_parts: tuple[WrittenPart, ...]

    @property
    def points(self) -> int:
        return sum(p.points for p in self.code_parts) + sum(p.points for p in self.written_parts)

    @property
    def auto_points(self) -> int:
        return sum(p.points for p in self.code_parts)

    @property
    def checks_module(self) -> str:
        """The module of ``manyheads.checks`` that holds this exercise's visible checks: the stem without its number."""
        return self.stem.split("_", 1)[1]


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "01_single_head_bottleneck",
        (
            CodePart(
                "softmax",
                "check_softmax",
                "test_softmax",
                2,
                signature="scores",
                forms=("1-D tensor of shape (6,)", "float32 scores"),
                forbidden=(
                    "torch.softmax",
                    "torch.nn.functional.softmax",
                    "torch.Tensor.softmax",
                    "torch.nn.Softmax",
                    "torch.special.softmax",
                    "torch.log_softmax",
                    "torch.nn.functional.log_softmax",
                    "torch.Tensor.log_softmax",
                    "torch.nn.LogSoftmax",
                    "torch.special.log_softmax",
                    "torch.nn.functional.softmin",
                    "torch.nn.Softmin",
                ),
            ),
            CodePart(
                "scaled_dot_product_attention",
                "check_scaled_dot_product_attention",
                "test_scaled_dot_product_attention",
                4,
                ("manyheads.attention.scaled_dot_product_attention", "manyheads.attention.MultiHeadAttention"),
                signature="q, k, v, mask=None",
                forms=(
                    "2-D inputs with no leading axes",
                    "float32 inputs",
                    "3-D mask of shape (2, 3, 5)",
                    "4-D inputs (2, 3, seq, d) with a 2-D (3, 5) mask",
                    "leading axes (2, 1) and a full mask",
                    "(2, 1, 3, 5) mask that broadcasts over the heads",
                ),
            ),
            CodePart(
                "attention_entropy",
                "check_attention_entropy",
                "test_attention_entropy",
                2,
                ("manyheads.analysis.heads.attention_entropy", "manyheads.analysis.heads.mean_attention_entropy"),
                signature="weights",
                forms=("float64 weights of shape (2, 3, 4, 6)", "float32 weights of shape (2, 3, 4, 6)"),
            ),
        ),
        (WrittenPart("one_head_two_targets", 2),),
    ),
    Exercise(
        "02_subspaces",
        (
            CodePart(
                "qk_circuits",
                "check_qk_circuits",
                "test_qk_circuits",
                3,
                ("manyheads.analysis.circuits.qk_circuit", "manyheads.analysis.circuits.qk_circuits"),
                signature="w_q, w_k, n_heads",
                forms=("one head (n_heads=1, d_model=5)", "heads of width 1", "float32 weights (d_model=6, n_heads=3)"),
            ),
            CodePart(
                "head_scores",
                "check_head_scores",
                "test_head_scores",
                3,
                (
                    "manyheads.analysis.circuits.pair_scores",
                    "manyheads.analysis.circuits.bilinear_score",
                    "manyheads.attention.MultiHeadAttention",
                ),
                signature="x, w_q, w_k, n_heads",
                forms=("a batch of one sequence", "one head, x (2, 3, 5)", "heads of width 1", "float32 inputs"),
            ),
            CodePart(
                "principal_angles",
                "check_principal_angles",
                "test_principal_angles",
                3,
                ("manyheads.analysis.circuits.principal_angles", "manyheads.analysis.circuits.subspace_overlap"),
                signature="a, b",
                forms=(
                    "the first subspace wider than the second",
                    "a (6, 3) subspace and itself in another basis",
                    "float32 a (4, 2) and b (4, 2)",
                    "float32 a (5, 2) and b (5, 2) at angles 1e-4",
                ),
            ),
        ),
        (WrittenPart("one_wide_or_four_narrow", 2),),
    ),
    Exercise(
        "03_head_size",
        (
            CodePart(
                "head_dim",
                "check_head_dim",
                "test_head_dim",
                1,
                ("manyheads.costs.head_dim",),
                signature="d_model, n_heads",
                forms=(
                    Form("head_dim(1024, 16) returned 64.0, a float … d_model // n_heads", ("float",)),
                    "head_dim(1024.0, 16) … d_model is a float",
                    "head_dim('1024', 16) … d_model is a str",
                    "head_dim(64, True) … n_heads is a bool",
                ),
            ),
            CodePart(
                "split_heads",
                "check_split_heads",
                "test_split_heads",
                2,
                ("manyheads.attention.split_heads",),
                signature="x, n_heads",
                forms=(
                    Form("split_heads changed the numbers for x of shape (2, 6, 12) in float64", ("float32",)),
                    "one head and a batch of one",
                    "heads of width 1, x (2, 3, 8)",
                    "a single position, x (3, 1, 6)",
                ),
            ),
            CodePart(
                "merge_heads",
                "check_merge_heads",
                "test_merge_heads",
                1,
                ("manyheads.attention.merge_heads",),
                signature="x",
                forms=(
                    Form("merge_heads changed the numbers for x of shape (2, 3, 5, 4) in float64", ("float32",)),
                    "one head and a batch of one",
                    "one position and heads of width 1",
                ),
            ),
            CodePart(
                "mha_param_count",
                "check_mha_param_count",
                "test_mha_param_count",
                1,
                ("manyheads.costs.mha_param_count", "manyheads.costs.head_budget"),
                signature="d_model, n_heads, bias=True",
                forms=(
                    Form("mha_param_count(512, 8) returned 1050624.0, a float … integer arithmetic", ("float",)),
                    Form("mha_param_count(512, 8, bias=False) (keep the parameter name bias)", ("crashes",)),
                ),
            ),
            CodePart(
                "multi_head_attention",
                "check_multi_head_attention",
                "test_multi_head_attention",
                4,
                (
                    "manyheads.attention.MultiHeadAttention",
                    "manyheads.attention.scaled_dot_product_attention",
                    "manyheads.checks.head_size.reference_multi_head_attention",
                ),
                signature="x, w_q, w_k, w_v, w_o, n_heads, mask=None",
                forms=(
                    "a batch of one and one head, x (1, 5, 6) float32",
                    "heads of width 1, x (3, 4, 6)",
                    "a padding mask of shape (2, 1, 1, 5)",
                    "a mask of shape (2, 1, 5, 5)",
                    Form("a mask of shape (2, 3, 5, 5), one per head … mask[:, i]", ("wrong",)),
                    "a 3-D mask of shape (3, 5, 5) = (n_heads, seq, seq)",
                    "a 3-D mask of shape (1, 5, 5)",
                    "float32 inputs with a (3, 1, 1, 4) padding mask",
                ),
            ),
        ),
        (WrittenPart("more_heads_cost", 2),),
    ),
    Exercise(
        "04_specialization",
        (
            CodePart(
                "mean_attention_entropy",
                "check_mean_attention_entropy",
                "test_attention_entropy",
                2,
                ("manyheads.analysis.heads.mean_attention_entropy", "manyheads.analysis.heads.attention_entropy"),
                answer_id="attention_entropy",
                signature="weights",
                forms=(
                    Form("weights of shape (2, 1, 3, 5) with zeros … no squeeze", ("squeezed",)),
                    "float32 weights of shape (2, 1, 3, 5)",
                    "3-D weights of shape (2, 3, 5)",
                ),
            ),
            CodePart(
                "offset_attention",
                "check_offset_attention",
                "test_offset_attention",
                2,
                ("manyheads.analysis.heads.offset_attention",),
                signature="weights, offset",
                forms=(
                    "more queries than keys, offset −3",
                    "2-D weights (4, 6) with no leading axes",
                    "offset 0 (the token itself)",
                    "float32 weights (2, 5, 4)",
                ),
            ),
            CodePart(
                "relation_accuracy",
                "check_relation_accuracy",
                "test_relation_accuracy",
                3,
                ("manyheads.analysis.probing.relation_accuracy", "manyheads.analysis.probing.relation_counts"),
                signature="weights, arcs",
                forms=("three layers", "a single arc", "float32 weights (3, 2, 5, 5)"),
            ),
        ),
        (WrittenPart("reading_heads", 2), WrittenPart("hand_set_heads", 1)),
    ),
    Exercise(
        "05_pruning",
        (
            CodePart(
                "ablate_heads",
                "check_ablate_heads",
                "test_ablate_heads",
                2,
                ("manyheads.interventions.ablated", "manyheads.interventions.head_output_means"),
                signature='head_outputs, keep, mode="zero", means=None',
                forms=(
                    "a batch of one, head_outputs (1, 3, 4, 2)",
                    "one head, head_outputs (3, 1, 4, 2)",
                    "with means given",
                    "float32 head_outputs",
                    "float16 head_outputs, mode 'zero'",
                    "float16 head_outputs with float32 means",
                ),
            ),
            CodePart(
                "gate_importance",
                "check_gate_importance",
                "test_gate_importance",
                3,
                ("manyheads.interventions.gate_importance", "manyheads.interventions.gate_gradients"),
                signature="loss_fn, batches, shape",
                forms=("a generator of 3 batches", "gates of shape (4,)", "(inputs, targets) tuples"),
            ),
            CodePart(
                "prune_mask",
                "check_prune_mask",
                "test_prune_mask",
                2,
                ("manyheads.interventions.prune_mask",),
                signature="importance, fraction",
                forms=(
                    "fraction 0 (nothing pruned)",
                    "fraction 1 (every head pruned)",
                    "1-D importance (7,)",
                    "3-D importance (2, 2, 3)",
                    "tied importances",
                ),
            ),
        ),
        (WrittenPart("would_you_ship", 2), WrittenPart("identical_heads", 1)),
    ),
    Exercise(
        "06_layer_hierarchy",
        (
            CodePart(
                "mean_attention_distance",
                "check_mean_attention_distance",
                "test_mean_attention_distance",
                2,
                ("manyheads.analysis.layers.mean_attention_distance", "manyheads.analysis.layers.layer_metrics"),
                signature="weights",
                forms=(
                    "a batch of one, weights (1, 4, 6, 6)",
                    "one head, weights (3, 1, 5, 5)",
                    "a single token, weights (2, 3, 1, 1)",
                    "bidirectional weights (batch 2, n_heads 3, seq 5)",
                    "float32 weights (2, 3, 6, 6)",
                ),
            ),
            CodePart(
                "induction_score",
                "check_induction_score",
                "test_induction_score",
                2,
                ("manyheads.analysis.induction.induction_score", "manyheads.analysis.induction.repeat_metrics"),
                signature="weights, half",
                forms=(
                    "a batch of one, weights (1, 4, 9, 9)",
                    "one head, weights (3, 1, 7, 7)",
                    "float32 weights (2, 2, 13, 13), half 6",
                ),
            ),
            CodePart(
                "attention_rollout",
                "check_attention_rollout",
                "test_attention_rollout",
                3,
                ("manyheads.analysis.layers.attention_rollout",),
                signature="weights",
                forms=(
                    "a single layer, weights (1, 2, 3, 5, 5)",
                    "a batch of one, weights (2, 1, 3, 5, 5)",
                    "float32 weights (3, 2, 2, 5, 5)",
                ),
            ),
        ),
        (WrittenPart("one_layer_induction", 2),),
    ),
    Exercise(
        "07_grouped_query_attention",
        (
            CodePart(
                "kv_cache_bytes",
                "check_kv_cache_bytes",
                "test_kv_cache_bytes",
                1,
                (
                    "manyheads.costs.kv_cache_bytes",
                    "manyheads.costs.head_budget",
                    "manyheads.models.llama.kv_cache_nbytes",
                ),
                signature="n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_element=2",
                forms=(
                    "kv_cache_bytes(32, 32, 128, 4096, 8, 2)",
                    "kv_cache_bytes(80, 8, 128, 4096)",
                    Form("overflowed 32-bit integers", ("int32",)),
                ),
            ),
            CodePart(
                "repeat_kv",
                "check_repeat_kv",
                "test_repeat_kv",
                1,
                ("manyheads.attention.MultiHeadAttention", "manyheads.models.kv_heads.repeat_kv_heads"),
                signature="x, n_rep",
                forms=("a batch of one", "float32"),
                forbidden=("transformers.models.llama.modeling_llama.repeat_kv",),
            ),
            CodePart(
                "grouped_query_attention",
                "check_grouped_query_attention",
                "test_grouped_query_attention",
                3,
                (
                    "manyheads.attention.MultiHeadAttention",
                    "manyheads.attention.scaled_dot_product_attention",
                    "manyheads.checks.grouped_query_attention.reference_grouped_query_attention",
                ),
                signature="x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, mask=None",
                forbidden=("torch.nn.functional.scaled_dot_product_attention",),
                forms=(
                    "a padding mask of shape (3, 1, 1, 5)",
                    "a mask of shape (2, 1, 5, 5)",
                    "a mask of shape (2, 4, 5, 5), one per query head",
                    "a batch of one",
                    "float32 inputs with a (3, 1, 1, 4) padding mask",
                ),
            ),
            CodePart(
                "mean_pool_kv",
                "check_mean_pool_kv",
                "test_mean_pool_kv",
                2,
                ("manyheads.models.kv_heads.group_kv_heads",),
                signature="w, n_heads, n_kv_heads",
                forms=("a bias of shape (12,)", "float32"),
            ),
        ),
        (WrittenPart("heads_for_three_models", 2),),
    ),
    # The capstone: an experiment designed, piloted and argued, graded by hand with a rubric (no code parts).
    Exercise(
        "08_capstone",
        (),
        (
            WrittenPart("hypothesis", 2),
            WrittenPart("design", 4),
            WrittenPart("pilot", 3),
            WrittenPart("predictions", 2),
            WrittenPart("threats", 2),
        ),
    ),
)


def exercise(stem: str) -> Exercise:
    """The description of the exercise called ``stem``; ``KeyError`` naming the known ones otherwise."""
    for ex in EXERCISES:
        if ex.stem == stem:
            return ex
    raise KeyError(f"no exercise {stem!r}; known: {', '.join(e.stem for e in EXERCISES)}")
