"""Measuring what heads do, from their weights and their attention.

:mod:`~manyheads.analysis.collect` (attention out of the models: per offset, per word piece, per word),
:mod:`~manyheads.analysis.heads` (per-head statistics: entropy, offsets, surface statistics, taxonomy; chapter 4),
:mod:`~manyheads.analysis.probing` (heads as syntax and coreference probes; chapter 4),
:mod:`~manyheads.analysis.circuits` (QK circuits, subspaces, principal angles; chapter 2),
:mod:`~manyheads.analysis.capacity` (head-count sweeps and the low-rank bottleneck; chapter 3).
"""

from manyheads.analysis.capacity import (
    SweepRecord,
    fit_attention_pattern,
    random_attention_pattern,
    run_head_sweep,
    sweep_configs,
)
from manyheads.analysis.circuits import (
    bilinear_score,
    effective_rank,
    head_biases,
    head_weights,
    numerical_rank,
    pair_scores,
    plane_basis,
    principal_angles,
    project_onto_plane,
    qk_circuit,
    qk_circuits,
    random_subspace_angles,
    subspace_overlap,
)
from manyheads.analysis.collect import offset_mass, token_attentions, word_attention, word_attentions
from manyheads.analysis.heads import (
    TAXONOMY,
    attention_entropy,
    head_name,
    head_taxonomy,
    mean_attention_entropy,
    offset_attention,
    surface_statistics,
)
from manyheads.analysis.probing import (
    RelationRow,
    coreference_accuracy,
    coreference_baseline,
    offset_baseline,
    relation_accuracy,
    relation_counts,
    relation_table,
)

__all__ = [
    "offset_mass",
    "token_attentions",
    "word_attention",
    "word_attentions",
    "head_name",
    "attention_entropy",
    "mean_attention_entropy",
    "offset_attention",
    "surface_statistics",
    "head_taxonomy",
    "TAXONOMY",
    "relation_accuracy",
    "relation_counts",
    "offset_baseline",
    "RelationRow",
    "relation_table",
    "coreference_accuracy",
    "coreference_baseline",
    "head_weights",
    "head_biases",
    "qk_circuit",
    "qk_circuits",
    "bilinear_score",
    "pair_scores",
    "principal_angles",
    "subspace_overlap",
    "random_subspace_angles",
    "numerical_rank",
    "effective_rank",
    "plane_basis",
    "project_onto_plane",
    "sweep_configs",
    "SweepRecord",
    "run_head_sweep",
    "random_attention_pattern",
    "fit_attention_pattern",
]
