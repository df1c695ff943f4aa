"""Where code runs and how runs are made repeatable: the automatic device choice and seeding (every chapter), progress
bars that only show where someone is watching, and the committed full-size measurements of ``benchmarks/`` that
chapters 5-7 set beside their own reduced runs."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import torch

__all__ = ["STATIC_BUILD", "benchmark_result", "device", "progress_bar", "seed_everything"]

# Set by tools/build_book.py for the kernels that execute the book's chapters: a progress bar saved into a static page
# is a frozen widget (or its text fallback) that a reader can do nothing with (review finding 1-9).
STATIC_BUILD = "MANYHEADS_STATIC_BUILD"


def device() -> torch.device:
    """The best available device: CUDA, then Apple's MPS, then the CPU. Every chapter runs on the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def progress_bar(iterable, desc: str, show: bool = True, **kwargs):
    """``tqdm.auto``'s bar over ``iterable`` (a widget in Jupyter and Colab, text elsewhere), gone when the loop ends;
    hidden when ``show`` is false or while the book is being built (``MANYHEADS_STATIC_BUILD`` set)."""
    from tqdm.auto import tqdm

    hidden = not show or bool(os.environ.get(STATIC_BUILD))
    return tqdm(iterable, desc=desc, leave=False, disable=hidden, **kwargs)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices) so that a run on the CPU repeats exactly."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)


def benchmark_result(name: str, *, start: str | Path | None = None) -> dict | None:
    """The committed result of a benchmark (``benchmarks/results/<name>.json``: its ``meta`` names the machine and
    date, its ``rows`` the figures), found from ``start`` (default: the working folder, ``chapters/`` when the book
    executes a chapter) or from the repository this package was installed from; ``None`` where there is no clone
    (Colab installs the package alone), so a chapter can leave the full-size figures to the published book.

    A file that exists but is not a benchmark result raises ``ValueError`` naming it and the script that rewrites it.
    """
    here = Path(start) if start is not None else Path.cwd()
    folders = [here, *here.parents, Path(__file__).resolve().parents[2]]
    for folder in folders:
        path = folder / "benchmarks" / "results" / f"{name}.json"
        if path.is_file():
            try:
                result = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"{path} is not readable JSON ({error}): run benchmarks/{name}.py again") from None
            if not isinstance(result, dict) or not {"meta", "rows"} <= result.keys():
                raise ValueError(f"{path} has no 'meta' and 'rows': run benchmarks/{name}.py again")
            return result
    return None
