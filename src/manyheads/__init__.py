"""Many Heads: the course package (``import manyheads as mh``).

Modules, one job each: ``attention`` (attention and multi-head attention), ``runtime`` (device and seeds),
``tasks`` (synthetic datasets), ``training`` (a small training loop), ``viz`` (figures and widgets),
``checks`` (the self-checks behind the exercises' visible tests). Maintainer tools, not imported here:
``hygiene`` (notebook cleaning) and ``release`` (regenerating exercises/ with nbgrader).
"""

from manyheads import attention, checks, runtime, tasks, training, viz
from manyheads.attention import MultiHeadAttention, scaled_dot_product_attention
from manyheads.runtime import device, seed_everything

__version__ = "0.1.0"

__all__ = [
    "attention", "checks", "runtime", "tasks", "training", "viz",
    "MultiHeadAttention", "scaled_dot_product_attention", "device", "seed_everything",
]
