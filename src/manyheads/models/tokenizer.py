"""Word-piece tokenization for the pretrained encoder, with the word-piece -> word map (chapters 4-6).

A thin wrapper around the ``tokenizers`` library (the fast tokenizer that ``transformers`` uses too), so the ids
are exactly the ones the checkpoint was trained with. What it adds: one padded batch as tensors, the token strings
of every row, and ``word_ids`` -- which word each word piece came from -- that chapter 4 needs to turn attention
between word pieces into attention between words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["TokenBatch", "Tokenizer"]


@dataclass(frozen=True)
class TokenBatch:
    """One padded batch. Padding is on the right, so position ``i`` of row ``b`` is a real token iff
    ``i < lengths[b]``.

    input_ids, attention_mask (1 = real token, 0 = padding), token_type_ids (0 = first segment, 1 = second):
    (batch, seq) int64 tensors.
    tokens, word_ids, sequence_ids: one list per row, unpadded (``lengths[b]`` entries). ``word_ids[b][i]`` is the
    index of the word that token ``i`` belongs to, counted within its segment, or None for [CLS] and [SEP].
    ``sequence_ids[b][i]`` is 0 or 1 (which segment) or None for special tokens.
    """

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor
    tokens: list[list[str]]
    word_ids: list[list[int | None]]
    sequence_ids: list[list[int | None]]

    @property
    def lengths(self) -> list[int]:
        """Number of real tokens in each row (special tokens included)."""
        return [len(t) for t in self.tokens]

    def inputs(self) -> dict[str, Tensor]:
        """The tensors a model takes, by keyword: ``encoder(**batch.inputs())`` (also what ``BertModel`` takes)."""
        return {
            "input_ids": self.input_ids,
            "attention_mask": self.attention_mask,
            "token_type_ids": self.token_type_ids,
        }

    def to(self, device: torch.device | str) -> TokenBatch:
        """The same batch with its tensors on ``device``."""
        return replace(self, **{k: v.to(device) for k, v in self.inputs().items()})

    def __len__(self) -> int:
        return len(self.tokens)


class Tokenizer:
    """Turns text into a :class:`TokenBatch`; build one with :meth:`from_dir` (``model_dir`` gives the directory).

    ``tokenizer(texts)`` takes a string, a list of strings, or a list of pre-split words per sentence (a list of
    lists of str, e.g. a dependency-annotated probe sentence): then ``word_ids`` index exactly those words.
    ``pairs`` (same form) adds a second segment: ``[CLS] a [SEP] b [SEP]`` with token_type_ids 1 on ``b [SEP]``.
    """

    def __init__(self, backend, max_length: int = 512) -> None:
        self.backend = backend
        self.max_length = max_length
        self.pad_id = backend.token_to_id("[PAD]")
        if self.pad_id is None:
            raise ValueError("the tokenizer has no [PAD] token; only BERT-style word-piece vocabularies are supported")

    @classmethod
    def from_dir(cls, directory: str | Path, max_length: int | None = None) -> Tokenizer:
        """Read ``tokenizer.json`` if the directory has one, else build the BERT tokenizer from ``vocab.txt``.

        max_length (tokens per row, special tokens included; longer inputs are truncated) defaults to the
        checkpoint's ``model_max_length``, capped at 512, the number of position embeddings of BERT models.
        """
        from tokenizers import Tokenizer as Backend

        directory = Path(directory)
        settings_file = directory / "tokenizer_config.json"
        settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
        if (directory / "tokenizer.json").is_file():
            backend = Backend.from_file(str(directory / "tokenizer.json"))
        elif (directory / "vocab.txt").is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            backend = BertWordPieceTokenizer(
                str(directory / "vocab.txt"), lowercase=settings.get("do_lower_case", True)
            )._tokenizer
        else:
            raise FileNotFoundError(f"{directory} has neither tokenizer.json nor vocab.txt")
        if max_length is None:
            max_length = min(int(settings.get("model_max_length", 512)), 512)
        return cls(backend, max_length)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size()

    def __call__(
        self,
        texts: str | Sequence[str] | Sequence[Sequence[str]],
        pairs: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        max_length: int | None = None,
    ) -> TokenBatch:
        texts, pretokenized = _as_batch(texts)
        if pairs is not None:
            pairs, pairs_pretokenized = _as_batch(pairs)
            if len(pairs) != len(texts) or pairs_pretokenized != pretokenized:
                raise ValueError("pairs must have one entry per text, in the same form (strings or word lists)")
            texts = list(zip(texts, pairs))
        # The checkpoint's tokenizer.json may carry fixed-length padding (all-MiniLM-L6-v2 pads to 128): reset it,
        # so a batch is padded to its longest row only.
        self.backend.no_padding()
        self.backend.enable_truncation(max_length or self.max_length)
        encodings = self.backend.encode_batch(texts, is_pretokenized=pretokenized)
        seq = max(len(e.ids) for e in encodings)
        input_ids = torch.full((len(encodings), seq), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encodings), seq), dtype=torch.long)
        token_type_ids = torch.zeros((len(encodings), seq), dtype=torch.long)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            input_ids[row, :n] = torch.tensor(e.ids)
            attention_mask[row, :n] = 1
            token_type_ids[row, :n] = torch.tensor(e.type_ids)
        return TokenBatch(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            tokens=[list(e.tokens) for e in encodings],
            word_ids=[list(e.word_ids) for e in encodings],
            sequence_ids=[list(e.sequence_ids) for e in encodings],
        )

    def decode(self, ids: Sequence[int] | Tensor, skip_special_tokens: bool = True) -> str:
        """Text back from ids (word pieces joined, ``##`` removed)."""
        if isinstance(ids, Tensor):
            ids = ids.tolist()
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)


def _as_batch(texts) -> tuple[list, bool]:
    """(list of inputs, whether they are pre-split words) from a string, a list of strings or a list of word lists."""
    if isinstance(texts, str):
        return [texts], False
    texts = list(texts)
    if not texts:
        raise ValueError("nothing to tokenize: got an empty batch")
    if all(isinstance(t, str) for t in texts):
        return texts, False
    if all(not isinstance(t, str) and all(isinstance(w, str) for w in t) for t in texts):
        return [list(t) for t in texts], True
    raise TypeError("texts must be a string, a list of strings, or a list of lists of words (strings)")
