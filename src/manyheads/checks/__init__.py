"""The exercises' visible checks: ``mh.checks.check_<part>(student_function)``, one module per exercise on one core.

This flat namespace is the one path the exercises' check cells use, and it stays stable (instructors' gradebooks
keep those cells): an exercise module may move, its check functions stay reachable here. Each check runs the
student's function on small fixed inputs and prints a one-line success message, or raises ``AssertionError``
naming the likely bug; an unanswered stub's ``NotImplementedError`` passes through unchanged. The checks are hints,
not grades: the hidden tests that grade an exercise use other, random inputs.

Modules: :mod:`~manyheads.checks.core` (shared building blocks), :mod:`~manyheads.checks.single_head_bottleneck`
(exercise 1), :mod:`~manyheads.checks.subspaces` (2), :mod:`~manyheads.checks.head_size` (3),
:mod:`~manyheads.checks.specialization` (4), :mod:`~manyheads.checks.pruning` (5),
:mod:`~manyheads.checks.layer_hierarchy` (6), :mod:`~manyheads.checks.grouped_query_attention` (7).
"""

from manyheads.checks.grouped_query_attention import (
    check_grouped_query_attention,
    check_kv_cache_bytes,
    check_mean_pool_kv,
    check_repeat_kv,
)
from manyheads.checks.head_size import (
    check_head_dim,
    check_merge_heads,
    check_mha_param_count,
    check_multi_head_attention,
    check_split_heads,
)
from manyheads.checks.layer_hierarchy import (
    check_attention_rollout,
    check_induction_score,
    check_mean_attention_distance,
)
from manyheads.checks.pruning import check_ablate_heads, check_gate_importance, check_prune_mask
from manyheads.checks.single_head_bottleneck import (
    check_attention_entropy,
    check_scaled_dot_product_attention,
    check_softmax,
)
from manyheads.checks.specialization import (
    check_mean_attention_entropy,
    check_offset_attention,
    check_relation_accuracy,
)
from manyheads.checks.subspaces import check_head_scores, check_principal_angles, check_qk_circuits

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_attention_entropy",
    "check_qk_circuits",
    "check_head_scores",
    "check_principal_angles",
    "check_head_dim",
    "check_split_heads",
    "check_merge_heads",
    "check_mha_param_count",
    "check_multi_head_attention",
    "check_mean_attention_entropy",
    "check_offset_attention",
    "check_relation_accuracy",
    "check_ablate_heads",
    "check_gate_importance",
    "check_prune_mask",
    "check_mean_attention_distance",
    "check_induction_score",
    "check_attention_rollout",
    "check_kv_cache_bytes",
    "check_repeat_kv",
    "check_grouped_query_attention",
    "check_mean_pool_kv",
]
