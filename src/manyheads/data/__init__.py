"""Data with known answers: synthetic tasks (chapters 1-4) and the syntax and coreference probe sets (chapter 4).

:mod:`~manyheads.data.tasks` (generated on the fly, seeded) and :mod:`~manyheads.data.probes` (made by the project
and shipped in this folder: ``natural_sentences.conll``, ``coreference.txt``). Nothing here is downloaded.
"""

from manyheads.data.probes import (
    RELATIONS,
    CorefItem,
    Sentence,
    coreference_items,
    dependency_sentences,
    grammar_sentences,
    natural_sentences,
    read_conll,
)
from manyheads.data.tasks import IGNORE_INDEX, TwoRelationTask, offset_targets

__all__ = [
    "IGNORE_INDEX",
    "TwoRelationTask",
    "offset_targets",
    "RELATIONS",
    "Sentence",
    "CorefItem",
    "grammar_sentences",
    "natural_sentences",
    "dependency_sentences",
    "coreference_items",
    "read_conll",
]
