"""Measuring what heads do, from their weights and their attention.

:mod:`~manyheads.analysis.claims` (comparing words from measured values and intervals; chapters 5-7),
:mod:`~manyheads.analysis.budget_checks` (a verdict from training against its committed longer run; chapters 1-7),
:mod:`~manyheads.analysis.collect` (attention out of the models: per offset, per word piece, per word),
:mod:`~manyheads.analysis.heads` (per-head statistics: entropy, offsets, surface statistics, taxonomy; chapter 4),
:mod:`~manyheads.analysis.probing` (heads as syntax and coreference probes; chapter 4),
:mod:`~manyheads.analysis.circuits` (QK circuits, subspaces, principal angles; chapter 2),
:mod:`~manyheads.analysis.capacity` (head-count sweeps and the low-rank bottleneck; chapter 3),
:mod:`~manyheads.analysis.language_model` (next-token losses: is the decoder a working language model; chapters 6-7),
:mod:`~manyheads.analysis.pruning_tasks` (the tasks heads are removed on: toy models, MiniLM's similarity and
sentiment, SmolLM2's next token; chapter 5), :mod:`~manyheads.analysis.scoring` (their scores and fits: Spearman's ρ,
1 − r as a loss, ridge), :mod:`~manyheads.analysis.ablation` (heads removed one at a time or in groups, with bootstrap
intervals), :mod:`~manyheads.analysis.multiple_tests` (p-values, Holm and Benjamini-Hochberg),
:mod:`~manyheads.analysis.importance` (gradient and leave-one-out importance), :mod:`~manyheads.analysis.pruning`
(iterative pruning curves read against the floor; chapter 5),
:mod:`~manyheads.analysis.symmetry` (heads that start identical stay identical; chapter 5),
:mod:`~manyheads.analysis.speed` (heads removed vs masked: tokens per second; chapter 5),
:mod:`~manyheads.analysis.kv_cache` (the decoder's KV cache measured: bytes and tokens per second; chapter 7),
:mod:`~manyheads.analysis.layers` (per-layer metrics: distance, sinks, previous-token and positional heads, rollout;
chapter 6), :mod:`~manyheads.analysis.induction` (induction scores and the from-scratch induction experiment;
chapter 6).

Every module's public names (its ``__all__``) are handed on here, each loaded on first use: ``mh.analysis.<name>``
and ``mh.<name>`` are the same object.
"""

from manyheads._public_names import hand_on as _hand_on

_NAMES, __all__, __getattr__, __dir__ = _hand_on(globals())
