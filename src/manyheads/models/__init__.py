"""The course's models, all built on :class:`manyheads.attention.MultiHeadAttention`.

:mod:`~manyheads.models.tiny` (toy models trained in chapters 1-4), :mod:`~manyheads.models.attention_only`
(the 2-layer attention-only transformer of chapter 6's induction heads), :mod:`~manyheads.models.bert` (the pretrained
MiniLM encoder, chapters 4-6), :mod:`~manyheads.models.checkpoints` (finding and verifying offline checkpoint
files), :mod:`~manyheads.models.gguf_file` (the decoder SmolLM2's GGUF file, chapters 6-7),
:mod:`~manyheads.models.gguf_container` (GGUF's container format read in one pass),
:mod:`~manyheads.models.llama` (the decoder itself, chapters 6-7), :mod:`~manyheads.models.kv_heads` (a trained
model's key/value heads grouped or repeated, chapter 7), :mod:`~manyheads.models.tokenizer` (word pieces and the
word map). Interventions on any of them (gates, ablation, head removal) live in
:mod:`manyheads.interventions`, not in the models.

Every module's public names (its ``__all__``) are handed on here, each loaded on first use: ``mh.models.<name>``
and ``mh.<name>`` are the same object.
"""

from manyheads._public_names import hand_on as _hand_on

_NAMES, __all__, __getattr__, __dir__ = _hand_on(globals())
