"""Data with known answers: synthetic tasks (chapters 1-4), the syntax and coreference probe sets (chapter 4) and
human-labelled data from registry packages (chapters 5-7).

:mod:`~manyheads.data.tasks` and :mod:`~manyheads.data.repeats` (generated on the fly, seeded) and
:mod:`~manyheads.data.probes` (made by the project and shipped in this folder: ``natural_sentences.conll``,
``coreference.txt``) download nothing;
:mod:`~manyheads.data.corpora` fetches Lee's documents and the VADER movie reviews once, verified by sha256, into a
cache folder outside the repository.

Every module's public names (its ``__all__``) are handed on here, each loaded on first use: ``mh.data.<name>``
and ``mh.<name>`` are the same object.
"""

from manyheads._public_names import hand_on as _hand_on

_NAMES, __all__, __getattr__, __dir__ = _hand_on(globals())
