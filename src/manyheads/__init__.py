"""Many Heads: the course package (``import manyheads as mh``).

Organised by responsibility, one job per module (each module's docstring names the chapters that teach it):

* ``attention``: scaled dot-product attention, splitting and merging heads, masks, ``MultiHeadAttention``;
* ``costs``: what a layer costs (parameters, FLOPs, attention memory, KV cache) for a given shape;
* ``runtime``: the device (CUDA, MPS, CPU) and seeding;
* ``training``: the one training loop;
* ``interventions``: gates, zero and mean ablation, gate gradients and head removal for any course model;
* ``models/``: the toy models, the pretrained encoder MiniLM and decoder SmolLM2, and their weight files;
* ``data/``: synthetic tasks, the shipped probe sets and verified data files from registry packages;
* ``analysis/``: measuring what heads do (statistics, probes, circuits, pruning, layers, induction, the KV cache);
* ``viz/``: figures, tables, live views, widgets and attention views;
* ``checks/``: the exercises' visible checks, ``mh.checks.check_<part>``, and the own-work guard;
* ``course/``: the course layout, exercise descriptions, notebook hygiene and releases.

Each subpackage's docstring lists its modules (``tests/package/test_package_docs.py`` checks every list against the
folder).

Every public name of those modules (its ``__all__``) is also reachable as ``mh.<name>`` (``mh.TinyAttentionModel``,
``mh.head_dim``, ``mh.show_table``), and every subpackage as ``mh.<subpackage>``; the chapters use that one form. The
names of ``checks/`` and ``course/`` stay in their own namespaces (``mh.checks.check_softmax``). No list here repeats
the modules' ``__all__``: :mod:`manyheads._public_names` reads them, and both names and subpackages load on first
use, so ``import manyheads`` stays quick in every grading kernel and imports matplotlib only when a figure is asked
for.
"""

from manyheads._public_names import hand_on as _hand_on

__version__ = "0.10.0"

# Public name -> the module that defines it, from the modules' __all__ (this package's modules and these
# subpackages'); checks/ and course/ keep their names in their own namespaces.
_NAMES, __all__, __getattr__, __dir__ = _hand_on(globals(), subpackages=("analysis", "data", "models", "viz"))
_SUBMODULES = tuple(name for name in __all__ if name not in _NAMES)
