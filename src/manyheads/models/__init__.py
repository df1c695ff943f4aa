"""The course's models, all built on :class:`manyheads.attention.MultiHeadAttention`.

:mod:`~manyheads.models.tiny` (toy models trained in chapters 1-4), :mod:`~manyheads.models.attention_only`
(the 2-layer attention-only transformer of chapter 6's induction heads), :mod:`~manyheads.models.bert` (the pretrained
MiniLM encoder, chapters 4-6), :mod:`~manyheads.models.checkpoints` (finding and verifying offline checkpoint
files), :mod:`~manyheads.models.gguf_file` (the decoder SmolLM2's GGUF file, chapters 6-7),
:mod:`~manyheads.models.llama` (the decoder itself, chapters 6-7), :mod:`~manyheads.models.kv_heads` (a trained
model's key/value heads grouped or repeated, chapter 7), :mod:`~manyheads.models.tokenizer` (word pieces and the
word map). Interventions on any of them (gates, ablation, head removal) live in
:mod:`manyheads.interventions`, not in the models.
"""

from manyheads.models.attention_only import AttentionOnlyOutput, AttentionOnlyTransformer
from manyheads.models.bert import BertConfig, BertEncoder, EncoderOutput, load_encoder
from manyheads.models.checkpoints import PretrainedModelError
from manyheads.models.llama import LlamaDecoder, generate_greedy, load_decoder
from manyheads.models.tiny import TinyAttentionModel, count_parameters

__all__ = [
    "TinyAttentionModel",
    "count_parameters",
    "BertConfig",
    "BertEncoder",
    "EncoderOutput",
    "load_encoder",
    "PretrainedModelError",
    "LlamaDecoder",
    "load_decoder",
    "generate_greedy",
    "AttentionOnlyTransformer",
    "AttentionOnlyOutput",
]
