"""Synthetic datasets whose answers are known exactly, so that what attention can and cannot do is measurable.

The two-relation task (chapter 1, reused in chapters 2 and 3): a sequence of random tokens, and at every position
the model must report the tokens found at several fixed offsets back, all at once, e.g. "the previous token" and
"the token three back". One query position therefore needs information from two different key positions.

Batches are drawn with a CPU ``torch.Generator``, so the same seed gives the same data on every device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["IGNORE_INDEX", "offset_targets", "TwoRelationTask"]

IGNORE_INDEX = -100
"""Target value for positions that have no answer; ``torch.nn.functional.cross_entropy`` skips it by default."""


def offset_targets(tokens: Tensor, offsets: tuple[int, ...]) -> Tensor:
    """The token found ``offset`` positions back, for each offset (chapter 1).

    tokens: (batch, seq) integer tensor. Returns (batch, seq, len(offsets)), where ``[b, i, r]`` is
    ``tokens[b, i - offsets[r]]``. Positions ``i < max(offsets)`` get :data:`IGNORE_INDEX` for every relation, so
    that all relations are scored on the same positions.
    """
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be (batch, seq), got {tuple(tokens.shape)}")
    if not offsets or min(offsets) < 1:
        raise ValueError(f"offsets must be positive, got {offsets}")
    batch, seq = tokens.shape
    first = max(offsets)
    if first >= seq:
        raise ValueError(f"the largest offset ({first}) must be smaller than the sequence length ({seq})")
    targets = torch.full((batch, seq, len(offsets)), IGNORE_INDEX, dtype=torch.long, device=tokens.device)
    for r, offset in enumerate(offsets):
        targets[:, first:, r] = tokens[:, first - offset : seq - offset]
    return targets


@dataclass(frozen=True)
class TwoRelationTask:
    """Uniformly random tokens; the targets are the tokens at each of ``offsets`` positions back (chapter 1).

    With the defaults a model must say, at every position i ≥ 3, both ``tokens[i-1]`` and ``tokens[i-3]``.
    """

    vocab_size: int = 8
    seq_len: int = 12
    offsets: tuple[int, ...] = (1, 3)

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {self.vocab_size}")
        if not self.offsets or min(self.offsets) < 1 or max(self.offsets) >= self.seq_len:
            raise ValueError(f"offsets must lie in [1, seq_len), got {self.offsets} with seq_len={self.seq_len}")

    @property
    def n_relations(self) -> int:
        return len(self.offsets)

    def sample(
        self, batch: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
    ) -> tuple[Tensor, Tensor]:
        """Draw ``batch`` sequences. Returns ``(tokens, targets)``: (batch, seq_len) and (batch, seq_len, n_relations).

        ``generator`` must be a CPU generator (or None for torch's global one); the tensors are moved to ``device``
        after sampling, so the data do not depend on the device.
        """
        tokens = torch.randint(self.vocab_size, (batch, self.seq_len), generator=generator)
        targets = offset_targets(tokens, self.offsets)
        return tokens.to(device), targets.to(device)
