"""Many Heads: the course package (``import manyheads as mh``).

Organised by responsibility, one job per module (each module's docstring names the chapters that teach it):

* ``attention``: scaled dot-product attention, splitting and merging heads, masks, ``MultiHeadAttention``;
* ``costs``: what a layer costs (parameters, FLOPs, attention memory, KV cache) for a given shape;
* ``runtime``: the device (CUDA, MPS, CPU) and seeding;
* ``training``: the one training loop;
* ``interventions``: gates, zero and mean ablation, gate gradients and head removal for any course model;
* ``models/``: ``tiny`` (toy models), ``bert`` (the pretrained encoder), ``checkpoints``, ``gguf_file`` (the
  decoder's weights), ``tokenizer``;
* ``data/``: synthetic tasks and the shipped probe sets;
* ``analysis/``: ``collect``, ``heads``, ``probing``, ``circuits``, ``capacity``;
* ``viz/``: ``plots``, ``tables``, ``live``, ``widgets``, ``attention_views``;
* ``checks/``: the exercises' visible checks, ``mh.checks.check_<part>``;
* ``course/``: the course layout, exercise descriptions, notebook hygiene, releases and ``manyheads grade``.

Every public name of those modules is also reachable as ``mh.<name>`` (``mh.TinyAttentionModel``, ``mh.head_dim``,
``mh.show_table``), and every subpackage as ``mh.<subpackage>``. Both load on first use, so ``import manyheads``
stays quick in every grading kernel and imports matplotlib only when a figure is asked for.
"""

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "analysis",
    "attention",
    "checks",
    "costs",
    "course",
    "data",
    "interventions",
    "models",
    "runtime",
    "training",
    "viz",
)

# Public name → the module that defines it. tests/package/test_layout.py checks that this is every module's
# __all__, and that no two modules give one name to two different things.
_NAMES = {
    "SweepRecord": "manyheads.analysis.capacity",
    "fit_attention_pattern": "manyheads.analysis.capacity",
    "random_attention_pattern": "manyheads.analysis.capacity",
    "run_head_sweep": "manyheads.analysis.capacity",
    "sweep_configs": "manyheads.analysis.capacity",
    "bilinear_score": "manyheads.analysis.circuits",
    "effective_rank": "manyheads.analysis.circuits",
    "head_biases": "manyheads.analysis.circuits",
    "head_weights": "manyheads.analysis.circuits",
    "numerical_rank": "manyheads.analysis.circuits",
    "pair_scores": "manyheads.analysis.circuits",
    "plane_basis": "manyheads.analysis.circuits",
    "principal_angles": "manyheads.analysis.circuits",
    "project_onto_plane": "manyheads.analysis.circuits",
    "qk_circuit": "manyheads.analysis.circuits",
    "qk_circuits": "manyheads.analysis.circuits",
    "random_subspace_angles": "manyheads.analysis.circuits",
    "subspace_overlap": "manyheads.analysis.circuits",
    "offset_mass": "manyheads.analysis.collect",
    "token_attentions": "manyheads.analysis.collect",
    "word_attention": "manyheads.analysis.collect",
    "word_attentions": "manyheads.analysis.collect",
    "TAXONOMY": "manyheads.analysis.heads",
    "attention_entropy": "manyheads.analysis.heads",
    "head_name": "manyheads.analysis.heads",
    "head_taxonomy": "manyheads.analysis.heads",
    "mean_attention_entropy": "manyheads.analysis.heads",
    "offset_attention": "manyheads.analysis.heads",
    "surface_statistics": "manyheads.analysis.heads",
    "RelationRow": "manyheads.analysis.probing",
    "coreference_accuracy": "manyheads.analysis.probing",
    "coreference_baseline": "manyheads.analysis.probing",
    "offset_baseline": "manyheads.analysis.probing",
    "relation_accuracy": "manyheads.analysis.probing",
    "relation_counts": "manyheads.analysis.probing",
    "relation_table": "manyheads.analysis.probing",
    "MultiHeadAttention": "manyheads.attention",
    "causal_mask": "manyheads.attention",
    "merge_heads": "manyheads.attention",
    "padding_mask": "manyheads.attention",
    "scaled_dot_product_attention": "manyheads.attention",
    "split_heads": "manyheads.attention",
    "HeadBudget": "manyheads.costs",
    "attention_flops": "manyheads.costs",
    "attention_matrix_bytes": "manyheads.costs",
    "divisors": "manyheads.costs",
    "head_budget": "manyheads.costs",
    "head_dim": "manyheads.costs",
    "kv_cache_bytes": "manyheads.costs",
    "mha_param_count": "manyheads.costs",
    "CorefItem": "manyheads.data.probes",
    "RELATIONS": "manyheads.data.probes",
    "Sentence": "manyheads.data.probes",
    "coreference_items": "manyheads.data.probes",
    "dependency_sentences": "manyheads.data.probes",
    "grammar_sentences": "manyheads.data.probes",
    "natural_sentences": "manyheads.data.probes",
    "read_conll": "manyheads.data.probes",
    "IGNORE_INDEX": "manyheads.data.tasks",
    "TwoRelationTask": "manyheads.data.tasks",
    "offset_targets": "manyheads.data.tasks",
    "ablated": "manyheads.interventions",
    "attention_layers": "manyheads.interventions",
    "current_gates": "manyheads.interventions",
    "gate_gradients": "manyheads.interventions",
    "gated": "manyheads.interventions",
    "head_mask": "manyheads.interventions",
    "head_output_means": "manyheads.interventions",
    "kept_heads": "manyheads.interventions",
    "remove_heads": "manyheads.interventions",
    "BertConfig": "manyheads.models.bert",
    "BertEncoder": "manyheads.models.bert",
    "EncoderLayer": "manyheads.models.bert",
    "EncoderOutput": "manyheads.models.bert",
    "load_encoder": "manyheads.models.bert",
    "DEFAULT_MODEL": "manyheads.models.checkpoints",
    "DEFAULT_MODEL_SHA256": "manyheads.models.checkpoints",
    "PretrainedModelError": "manyheads.models.checkpoints",
    "bundled_model_dir": "manyheads.models.checkpoints",
    "model_dir": "manyheads.models.checkpoints",
    "read_config": "manyheads.models.checkpoints",
    "read_state_dict": "manyheads.models.checkpoints",
    "sha256_of": "manyheads.models.checkpoints",
    "verify_sha256": "manyheads.models.checkpoints",
    "SMOLLM2_GGUF_SHA256": "manyheads.models.gguf_file",
    "gguf_tokenizer": "manyheads.models.gguf_file",
    "read_gguf": "manyheads.models.gguf_file",
    "smollm2_gguf_path": "manyheads.models.gguf_file",
    "DecoderLayer": "manyheads.models.llama",
    "DecoderOutput": "manyheads.models.llama",
    "LlamaConfig": "manyheads.models.llama",
    "LlamaDecoder": "manyheads.models.llama",
    "RMSNorm": "manyheads.models.llama",
    "RotaryAttention": "manyheads.models.llama",
    "RotaryEmbedding": "manyheads.models.llama",
    "generate_greedy": "manyheads.models.llama",
    "load_decoder": "manyheads.models.llama",
    "TinyAttentionModel": "manyheads.models.tiny",
    "count_parameters": "manyheads.models.tiny",
    "TokenBatch": "manyheads.models.tokenizer",
    "Tokenizer": "manyheads.models.tokenizer",
    "device": "manyheads.runtime",
    "seed_everything": "manyheads.runtime",
    "TrainConfig": "manyheads.training",
    "TrainResult": "manyheads.training",
    "evaluate": "manyheads.training",
    "readout_accuracy": "manyheads.training",
    "train": "manyheads.training",
    "train_grid": "manyheads.training",
    "head_view": "manyheads.viz.attention_views",
    "localize": "manyheads.viz.attention_views",
    "model_view": "manyheads.viz.attention_views",
    "static_head_view": "manyheads.viz.attention_views",
    "figure_widget": "manyheads.viz.live",
    "html_widget": "manyheads.viz.live",
    "attention_heatmap": "manyheads.viz.plots",
    "head_heatmaps": "manyheads.viz.plots",
    "learning_curves": "manyheads.viz.plots",
    "format_bytes": "manyheads.viz.tables",
    "format_count": "manyheads.viz.tables",
    "html_table": "manyheads.viz.tables",
    "mean_sd": "manyheads.viz.tables",
    "show_table": "manyheads.viz.tables",
    "head_budget_html": "manyheads.viz.widgets",
    "head_budget_widget": "manyheads.viz.widgets",
    "one_softmax_widget": "manyheads.viz.widgets",
    "plane_projection_widget": "manyheads.viz.widgets",
}

__all__ = sorted(set(_SUBMODULES) | set(_NAMES))


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"manyheads.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'manyheads' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
