"""Where code runs and how runs are made repeatable: the automatic device choice and seeding (every chapter)."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["device", "seed_everything"]


def device() -> torch.device:
    """The best available device: CUDA, then Apple's MPS, then the CPU. Every chapter runs on the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices) so that a run on the CPU repeats exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
