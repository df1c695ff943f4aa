"""Many Heads: the course package (``import manyheads as mh``).

Modules, one job each: ``attention`` (attention and multi-head attention), ``runtime`` (device and seeds),
``tasks`` (synthetic datasets), ``models`` (the small models the chapters train), ``training`` (a seeded training
loop), ``viz`` (figures and widgets), ``checks`` (the self-checks behind the exercises' visible tests, built from ``checking``),
``pretrained`` (finding and verifying the offline model), ``tokenizer`` and ``encoder`` (a BERT-style encoder on
``attention``).
Maintainer tools, not imported here: ``hygiene`` (notebook cleaning) and ``release`` (regenerating exercises/).

Submodules load on first use (``mh.viz`` imports matplotlib only when a notebook first touches it), so that
``import manyheads`` stays quick in every grading kernel.
"""

import importlib

from manyheads.attention import MultiHeadAttention, scaled_dot_product_attention
from manyheads.runtime import device, seed_everything

__version__ = "0.1.0"

_SUBMODULES = {"analysis", "attention", "checking", "checks", "checks_head_size", "checks_specialization", "checks_subspaces", "encoder", "headsize", "live", "models", "pretrained", "probes", "runtime", "subspaces", "tasks", "tokenizer", "training", "viz", "widgets_head_budget"}

__all__ = sorted(_SUBMODULES) + ["MultiHeadAttention", "scaled_dot_product_attention", "device", "seed_everything"]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"manyheads.{name}")
    raise AttributeError(f"module 'manyheads' has no attribute {name!r}")
