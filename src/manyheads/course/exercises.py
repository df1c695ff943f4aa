"""The one description of every exercise: its parts, their cells, points, visible checks, and what the package
already computes for each (used by the tests, the grading command and, later, by grading that refuses delegation).

Each graded code part names:

* ``function``: the function the student writes (also the ``grade_id`` of its answer cell);
* ``signature``: its parameters, as the answer cell's ``def`` line spells them (the checks call it that way);
* ``check``: the visible check, reached as ``mh.checks.<check>`` (the one stable path that test cells use);
* ``test_id`` and ``points``: the locked, autograded test cell;
* ``computed_by``: dotted paths of the course package's own functions that compute this part's answer. An answer
  that only hands the work to one of them is not the student's computation.

Adding an exercise is one more :class:`Exercise` entry here (and its notebook in solutions/).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CodePart", "WrittenPart", "Exercise", "EXERCISES", "exercise"]


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

    def __post_init__(self) -> None:
        if not self.answer_id:
            object.__setattr__(self, "answer_id", self.function)

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


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "01_single_head_bottleneck",
        (
            CodePart("softmax", "check_softmax", "test_softmax", 2, signature="scores"),
            CodePart(
                "scaled_dot_product_attention",
                "check_scaled_dot_product_attention",
                "test_scaled_dot_product_attention",
                4,
                ("manyheads.attention.scaled_dot_product_attention", "manyheads.attention.MultiHeadAttention"),
                signature="q, k, v, mask=None",
            ),
            CodePart(
                "attention_entropy",
                "check_attention_entropy",
                "test_attention_entropy",
                2,
                ("manyheads.analysis.heads.attention_entropy", "manyheads.analysis.heads.mean_attention_entropy"),
                signature="weights",
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
            ),
            CodePart(
                "principal_angles",
                "check_principal_angles",
                "test_principal_angles",
                3,
                ("manyheads.analysis.circuits.principal_angles", "manyheads.analysis.circuits.subspace_overlap"),
                signature="a, b",
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
            ),
            CodePart(
                "split_heads",
                "check_split_heads",
                "test_split_heads",
                2,
                ("manyheads.attention.split_heads",),
                signature="x, n_heads",
            ),
            CodePart(
                "merge_heads",
                "check_merge_heads",
                "test_merge_heads",
                1,
                ("manyheads.attention.merge_heads",),
                signature="x",
            ),
            CodePart(
                "mha_param_count",
                "check_mha_param_count",
                "test_mha_param_count",
                1,
                ("manyheads.costs.mha_param_count", "manyheads.costs.head_budget"),
                signature="d_model, n_heads, bias=True",
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
            ),
            CodePart(
                "offset_attention",
                "check_offset_attention",
                "test_offset_attention",
                2,
                ("manyheads.analysis.heads.offset_attention",),
                signature="weights, offset",
            ),
            CodePart(
                "relation_accuracy",
                "check_relation_accuracy",
                "test_relation_accuracy",
                3,
                ("manyheads.analysis.probing.relation_accuracy", "manyheads.analysis.probing.relation_counts"),
                signature="weights, arcs",
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
            ),
            CodePart(
                "gate_importance",
                "check_gate_importance",
                "test_gate_importance",
                3,
                ("manyheads.interventions.gate_importance", "manyheads.interventions.gate_gradients"),
                signature="loss_fn, batches, shape",
            ),
            CodePart(
                "prune_mask",
                "check_prune_mask",
                "test_prune_mask",
                2,
                ("manyheads.interventions.prune_mask",),
                signature="importance, fraction",
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
            ),
            CodePart(
                "induction_score",
                "check_induction_score",
                "test_induction_score",
                2,
                ("manyheads.analysis.induction.induction_score", "manyheads.analysis.induction.repeat_metrics"),
                signature="weights, half",
            ),
            CodePart(
                "attention_rollout",
                "check_attention_rollout",
                "test_attention_rollout",
                3,
                ("manyheads.analysis.layers.attention_rollout",),
                signature="weights",
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
            ),
            CodePart(
                "repeat_kv",
                "check_repeat_kv",
                "test_repeat_kv",
                1,
                ("manyheads.attention.MultiHeadAttention", "manyheads.models.kv_heads.repeat_kv_heads"),
                signature="x, n_rep",
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
            ),
            CodePart(
                "mean_pool_kv",
                "check_mean_pool_kv",
                "test_mean_pool_kv",
                2,
                ("manyheads.models.kv_heads.group_kv_heads",),
                signature="w, n_heads, n_kv_heads",
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
