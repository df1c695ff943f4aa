"""How far apart two float32 computations of the same model output may be: a tolerance derived, not picked.

float32 keeps 24 significant bits, so each operation rounds its result by up to u = 2^-24 ≈ 6e-8 of its size. A sum
of n terms then carries an error of about sqrt(n)·u of its terms' size when the roundings fall at random (n·u at
worst), and a model's output is the end of ``depth`` layers of such sums, each adding its own error to the one it
is handed. Two computations of the same function round differently whenever they add in another order, and they do
on every change of CPU (vector width, FMA), BLAS kernel (chosen by the matrices' shapes: a padded batch, a pruned
layer with fewer heads, a batch of one), thread count or library (transformers against the course's models). So a
hand-picked bound such as 1e-5 holds on the machine it was picked on and fails on another: MiniLM with 18 heads
masked against the same heads pruned, on a padded batch of two, differs by 4.4e-5 on an AMD EPYC (outputs up to 6).

The rule: ``SAFETY · u · sqrt(depth · width) · max|reference|``, width being the longest sum in one layer. That
AMD EPYC difference is 1.3 × u·sqrt(depth·width)·max|reference| (6 layers, d_ff = 1536), the largest ratio measured
on the course's models; real tokens there, BERT against transformers and SmolLM2's padded batches stay below 0.5.
SAFETY = 8 leaves room for a CPU that rounds less luckily, and the result stays far below what a bug moves: on MiniLM
a missing 1/sqrt(d_k) moves the output by ~2 and one dropped head by ~0.1, against a tolerance of ~3e-4
(tests/package/test_float32_tolerance.py checks both).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

UNIT_ROUNDOFF = 2.0**-24  # float32: half the gap between 1 and the next float
SAFETY = 8.0


def float32_tolerance(reference: torch.Tensor | Iterable[torch.Tensor], *, depth: int, width: int) -> float:
    """Absolute tolerance for float32 outputs that should equal ``reference``: SAFETY·u·sqrt(depth·width)·max|ref|.

    ``reference``: the expected output, or several (e.g. every layer's hidden states): the largest magnitude counts.
    ``depth``: layers (chained matrix products) between the input and the output. ``width``: the longest sum in one
    of them (a transformer layer's d_ff, or d_model where there is no MLP).
    """
    if depth < 1 or width < 1:
        raise ValueError(f"depth and width must be at least 1, got {depth} and {width}")
    tensors = [reference] if isinstance(reference, torch.Tensor) else list(reference)
    magnitude = max(float(t.detach().abs().max()) for t in tensors if t.numel())
    return SAFETY * UNIT_ROUNDOFF * math.sqrt(depth * width) * magnitude
