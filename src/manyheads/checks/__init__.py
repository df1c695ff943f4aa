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

The names load on first use (``__getattr__`` below): importing this package imports no exercise module, so
``manyheads.checks.own_work`` (the own-work guard) stays light for the grader, which never imports torch.
"""

from __future__ import annotations

import importlib

# check name -> the exercise module that defines it (each module's __all__ lists its checks; a test keeps the two
# in step)
_CHECKS = {
    "check_softmax": "single_head_bottleneck",
    "check_scaled_dot_product_attention": "single_head_bottleneck",
    "check_attention_entropy": "single_head_bottleneck",
    "check_qk_circuits": "subspaces",
    "check_head_scores": "subspaces",
    "check_principal_angles": "subspaces",
    "check_head_dim": "head_size",
    "check_split_heads": "head_size",
    "check_merge_heads": "head_size",
    "check_mha_param_count": "head_size",
    "check_multi_head_attention": "head_size",
    "check_mean_attention_entropy": "specialization",
    "check_offset_attention": "specialization",
    "check_relation_accuracy": "specialization",
    "check_ablate_heads": "pruning",
    "check_gate_importance": "pruning",
    "check_prune_mask": "pruning",
    "check_mean_attention_distance": "layer_hierarchy",
    "check_induction_score": "layer_hierarchy",
    "check_attention_rollout": "layer_hierarchy",
    "check_kv_cache_bytes": "grouped_query_attention",
    "check_repeat_kv": "grouped_query_attention",
    "check_grouped_query_attention": "grouped_query_attention",
    "check_mean_pool_kv": "grouped_query_attention",
}
__all__ = list(_CHECKS)


_MODULES = {*_CHECKS.values(), "core", "own_work"}  # mh.checks.<module> works too, as after an eager import


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"manyheads.checks.{name}")  # the import sets the attribute
    module = _CHECKS.get(name)
    if module is None:
        raise AttributeError(f"module 'manyheads.checks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"manyheads.checks.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CHECKS))
