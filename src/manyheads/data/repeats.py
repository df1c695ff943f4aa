"""Repeated random sequences, ``[BOS] + r + r``: the task on which induction heads form (chapter 6).

A sequence is a reserved beginning-of-sequence token followed by a random half ``r`` (tokens drawn uniformly from
an ordinary vocabulary of ``vocab_size`` ids) and then ``r`` again. Nothing predicts the first copy; every token of
the second copy but its first can be read off the first copy: at position i of the second copy, find the earlier
occurrence of the current token and copy the token that followed it. That is what an induction head does.

The BOS id is ``vocab_size`` (one past the ordinary ids), so it never occurs inside r, and with it the layout is
exactly the one :func:`manyheads.analysis.induction_score` expects: seq = 2·half + 1. Every batch draws one
half-length from ``[min_half, max_half]`` (all its rows share it, so no padding is needed); batches are drawn with a
CPU ``torch.Generator``, so a seed gives the same data on every device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from manyheads.data.tasks import IGNORE_INDEX

__all__ = ["RepeatedHalvesTask"]


@dataclass(frozen=True)
class RepeatedHalvesTask:
    """``[BOS] + r + r`` with len(r) drawn from ``[min_half, max_half]`` per batch, r uniform over ``vocab_size`` ids.

    The targets are the next tokens (language modelling); the last position has none (:data:`IGNORE_INDEX`).
    """

    vocab_size: int = 64
    min_half: int = 4
    max_half: int = 16

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2 ordinary tokens, got {self.vocab_size}")
        if not 1 <= self.min_half <= self.max_half:
            raise ValueError(
                f"half-lengths must satisfy 1 <= min_half <= max_half, got min_half={self.min_half}, "
                f"max_half={self.max_half}"
            )

    @property
    def bos_id(self) -> int:
        """The reserved BOS id: ``vocab_size``, one past the ordinary ids 0 … vocab_size - 1."""
        return self.vocab_size

    @property
    def n_tokens(self) -> int:
        """Size of the model's vocabulary: the ordinary ids plus BOS."""
        return self.vocab_size + 1

    @property
    def max_seq(self) -> int:
        """The longest sequence the task produces: 2·max_half + 1."""
        return 2 * self.max_half + 1

    def tokens(
        self, batch: int, half: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
    ) -> Tensor:
        """``batch`` rows of ``[BOS] + r + r`` with len(r) = ``half``: (batch, 2·half + 1) long."""
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        if half < 1:
            raise ValueError(f"half must be at least 1 token, got {half}")
        r = torch.randint(self.vocab_size, (batch, half), generator=generator)
        bos = torch.full((batch, 1), self.bos_id, dtype=torch.long)
        return torch.cat([bos, r, r], dim=1).to(device)

    def sample(
        self, batch: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
    ) -> tuple[Tensor, Tensor]:
        """Draw a half-length, then ``batch`` sequences: ``(tokens, targets)``, both (batch, 2·half + 1).

        ``targets[b, i]`` is ``tokens[b, i + 1]`` (the next token) and IGNORE_INDEX at the last position. This is the
        interface :func:`manyheads.train` draws its batches from.
        """
        half = int(torch.randint(self.min_half, self.max_half + 1, (1,), generator=generator))
        tokens = self.tokens(batch, half, generator)
        targets = torch.full_like(tokens, IGNORE_INDEX)
        targets[:, :-1] = tokens[:, 1:]
        return tokens.to(device), targets.to(device)
