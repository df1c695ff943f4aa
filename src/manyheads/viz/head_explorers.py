"""Attention explorers that the book's pages move without a kernel (issue 27): chapters 4 and 6 and the interlude.

Each explorer is a :func:`manyheads.viz.explorers.figure_explorer`: its picture is the state a function here returns
for the controls' values, stored for every point of the controls' grid (attention maps as uint8 heatmap panels) and
drawn by ``book_static/explorers.js`` on the pages. The state functions recompute what they show from JSON-able
arguments alone (a sentence's index, a text, token ids, a seed) with the course's offline models, so a test can
recompute any stored state in a fresh process:

* :func:`sentence_head_state` (chapter 4): one probe sentence's word-to-word attention under one MiniLM head, the
  gold arcs of one relation boxed (:func:`sentence_head_explorer`);
* :func:`decoder_head_state` (the interlude): one SmolLM2 query head on a sentence (:func:`decoder_head_explorer`);
* :func:`induction_checkpoint_state` (chapter 6): the toy model's previous-token and induction heads at one training
  snapshot, beside the loss curves (:func:`induction_checkpoint_explorer`);
* :func:`picked_head_state` (chapter 6): any head of MiniLM on a review or SmolLM2 on news text, with the head's
  metrics over the chapter's sample in the title (:func:`picked_head_explorer`).

The models and the toy runs are computed once per process (caches here); an explorer built from a chapter's own
model or run hands it to that cache, so the chapter does not load or train anything twice.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import torch

from manyheads.viz.explorers import figure_explorer, heatmap_panel

__all__ = [
    "sentence_head_state",
    "sentence_head_explorer",
    "decoder_head_state",
    "decoder_head_explorer",
    "induction_checkpoint_state",
    "induction_checkpoint_explorer",
    "picked_head_state",
    "picked_head_explorer",
]

# The pretrained models by kind ("encoder": MiniLM, "decoder": SmolLM2), as (model, tokenizer): loaded on the CPU on
# first use, or the chapter's own, handed over by the explorer it builds.
_MODELS: dict[str, tuple[Any, Any]] = {}
# Toy induction runs by (seed, snapshot_every): trained on first use, or the chapter's own.
_RUNS: dict[tuple[int, int], Any] = {}


def _model(kind: str) -> tuple[Any, Any]:
    if kind not in _MODELS:
        from manyheads.models.bert import load_encoder
        from manyheads.models.llama import load_decoder

        _MODELS[kind] = (load_encoder if kind == "encoder" else load_decoder)(device="cpu")
    return _MODELS[kind]


def _share_model(kind: str, model: Any, tokenizer: Any) -> None:
    if _MODELS.get(kind, (None,))[0] is not model:
        _MODELS[kind] = (model, tokenizer)
        for cached in (_sentence_attention, _decoder_attention, _encoder_text_attention):
            cached.cache_clear()


def _rounded(values: Sequence[float], digits: int = 3) -> list[float]:
    return [round(float(v), digits) for v in values]


# -- chapter 4: a probe sentence under one MiniLM head ------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _probe_sentences() -> tuple:
    from manyheads.data.probes import grammar_sentences, natural_sentences

    return tuple(grammar_sentences() + natural_sentences())


@functools.lru_cache(maxsize=64)
def _sentence_attention(index: int) -> torch.Tensor:
    from manyheads.analysis.collect import word_attentions

    encoder, tokenizer = _model("encoder")
    return word_attentions(encoder, tokenizer, [_probe_sentences()[index]])[0]  # (n_layers, n_heads, n, n)


def sentence_head_state(sentence: int, layer: int, head: int, relation: str) -> dict:
    """What chapter 4's explorer shows (:func:`manyheads.viz.explorers.panels_figure` reads it): MiniLM's attention
    between the words of probe sentence ``sentence`` (an index into ``mh.grammar_sentences() +
    mh.natural_sentences()``, as the chapter's ``sentences``) under head (``layer``, ``head``), 0-based (the title
    names it from 1, as Clark et al. do), with the gold arcs labelled ``relation`` boxed in the direction the chapter
    scores them (row = the word that attends: the dependent, or for pobj the preposition; column = the word it should
    attend to: the dependent's head, or the preposition's object)."""
    from manyheads.analysis.heads import head_name
    from manyheads.analysis.probing import scored_pairs

    s = _probe_sentences()[sentence]
    weights = _sentence_attention(sentence)[layer, head]
    return {
        "size": [5.2, 4.4],
        "panels": [
            heatmap_panel(
                weights,
                cmap="Blues",
                xticks=list(s.words),
                yticks=list(s.words),
                rotate=60,
                boxes=[[query, target] for query, target in scored_pairs(s, relation)],
                colorbar="attention",
                title=f"head {head_name(layer, head)}: attention from row word\nto column word ({relation} arcs boxed)",
            )
        ],
    }


def sentence_head_explorer(
    encoder: Any,
    tokenizer: Any,
    sentences: Sequence[int],
    layer: int,
    head: int,
    relation: str,
    relations: Sequence[str],
) -> widgets.VBox:
    """Chapter 4's explorer: a dropdown of probe sentences (``sentences``: their indices into the chapter's
    ``sentences``; the dropdown shows their first words only), a layer and a head slider and a relation
    (:func:`sentence_head_state`). The sliders are labelled from 1, as the chapter and Clark et al. name heads (the
    slider "layer 4, head 2" is head 4-2, ``(3, 1)`` in code), and hand the state its 0-based indices; ``layer``
    and ``head`` here are 0-based, as :attr:`RelationRow.best_head`. ``encoder`` and ``tokenizer``: the chapter's
    MiniLM, used for the states. Every combination is stored, so keep ``sentences`` to a handful."""
    _share_model("encoder", encoder, tokenizer)
    all_sentences = _probe_sentences()
    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads

    def short(words: Sequence[str], n: int = 6) -> str:
        return " ".join(words[:n]) + (" …" if len(words) > n else "")

    return figure_explorer(
        "sentence_head",
        sentence_head_state,
        sentence=widgets.Dropdown(
            options=[(short(all_sentences[i].words), i) for i in sentences], description="sentence"
        ),
        layer=widgets.SelectionSlider(
            options=[(str(i + 1), i) for i in range(n_layers)], value=layer, description="layer (from 1)"
        ),
        head=widgets.SelectionSlider(
            options=[(str(i + 1), i) for i in range(n_heads)], value=head, description="head (from 1)"
        ),
        relation=widgets.Dropdown(options=list(relations), value=relation, description="relation"),
    )


# -- the interlude: one SmolLM2 query head on a sentence ----------------------------------------------------------


def _decoder_labels(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    return [tokenizer.id_to_token(i).replace("Ġ", "·") for i in ids]


@functools.lru_cache(maxsize=8)
def _decoder_attention(ids: tuple[int, ...]) -> torch.Tensor:
    decoder, _ = _model("decoder")
    with torch.no_grad():
        out = decoder(torch.tensor([ids]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].float().cpu()  # (n_layers, n_heads, seq, seq)


def decoder_head_state(text: str, layer: int, head: int) -> dict:
    """What the interlude's explorer shows: SmolLM2's attention on ``text`` (tokenized by its tokenizer, no BOS
    added, as the interlude does) under query head ``head`` of ``layer``, titled with the key/value head it shares."""
    decoder, tokenizer = _model("decoder")
    ids = tokenizer.encode(text).ids
    cfg = decoder.config
    kv_head = head // (cfg.n_heads // cfg.n_kv_heads)
    labels = _decoder_labels(tokenizer, ids)
    return {
        "size": [4.6, 4.2],
        "panels": [
            heatmap_panel(
                _decoder_attention(tuple(ids))[layer, head],
                xticks=labels,
                yticks=labels,
                rotate=90,
                xlabel="key position",
                ylabel="query position",
                title=f"layer {layer}, query head {head} (K/V head {kv_head})",
            )
        ],
    }


def decoder_head_explorer(decoder: Any, tokenizer: Any, text: str, layer: int, head: int) -> widgets.VBox:
    """The interlude's explorer: a layer and a query-head slider over SmolLM2's heads on ``text``
    (:func:`decoder_head_state`; all 30 × 9 heads are stored). ``decoder``, ``tokenizer``: the chapter's."""
    _share_model("decoder", decoder, tokenizer)
    cfg = decoder.config
    return figure_explorer(
        "decoder_head",
        decoder_head_state,
        fixed={"text": text},
        layer=widgets.IntSlider(layer, 0, cfg.n_layers - 1, description="layer", continuous_update=False),
        head=widgets.IntSlider(head, 0, cfg.n_heads - 1, description="query head", continuous_update=False),
    )


# -- chapter 6: the toy model's heads over training ---------------------------------------------------------------


def _induction_run(seed: int, snapshot_every: int) -> Any:
    if (seed, snapshot_every) not in _RUNS:
        from manyheads.analysis.induction import train_induction_model

        _RUNS[(seed, snapshot_every)] = train_induction_model(seed=seed, snapshot_every=snapshot_every, progress=False)
    return _RUNS[(seed, snapshot_every)]


@functools.lru_cache(maxsize=4)
def _checkpoint_patterns(seed: int, snapshot_every: int, probe_half: int) -> dict[int, tuple[torch.Tensor, ...]]:
    from manyheads.analysis.induction import RepeatedHalvesTask, probe_batches
    from manyheads.models.attention_only import AttentionOnlyTransformer

    run = _induction_run(seed, snapshot_every)
    (_, previous), (last, induction) = run.best_heads()
    task = RepeatedHalvesTask()
    row = probe_batches(task)[probe_half][:1]  # one input, [BOS] + r + r
    model = AttentionOnlyTransformer.for_task(task, n_layers=2)
    patterns = {}
    with torch.no_grad():
        for step, state in run.snapshots.items():
            model.load_state_dict(state)
            weights = model(row).weights  # (2, 1, n_heads, seq, seq)
            patterns[step] = (weights[0, 0, previous], weights[last, 0, induction])
    return patterns


def induction_checkpoint_state(seed: int, snapshot_every: int, probe_half: int, step: int) -> dict:
    """What chapter 6's training-step explorer shows: for the 2-layer toy induction model of ``seed``
    (:func:`manyheads.analysis.induction.train_induction_model` with ``snapshot_every``), the patterns of its final
    strongest previous-token head (layer 0) and induction head (layer 1) at the snapshot of ``step`` on the first
    probe row of half-length ``probe_half``, with their scores, and both copies' loss curves with ``step`` marked."""
    from manyheads.analysis.induction import RepeatedHalvesTask, probe_batches

    run = _induction_run(seed, snapshot_every)
    (_, previous), target = run.best_heads()
    metrics = dict(zip(run.steps, run.history))[step]
    row = probe_batches(RepeatedHalvesTask())[probe_half][0]
    labels = ["BOS"] + [str(t) for t in row[1:].tolist()]
    before, induction = _checkpoint_patterns(seed, snapshot_every, probe_half)[step]
    titles = (
        f"layer 0, head {previous}:\nprevious-token score {metrics.previous[0, previous]:.2f}",
        f"layer 1, head {target[1]}:\ninduction score {metrics.induction[target]:.2f}",
    )
    maps = [
        heatmap_panel(
            p, xticks=labels, yticks=labels, rotate=90, xlabel="key position", ylabel="query position", title=t
        )
        for p, t in zip((before, induction), titles)
    ]
    curves = {
        "kind": "line",
        "span": 2,
        "series": [
            {"x": list(run.steps), "y": _rounded(run.second_loss), "color": "#ff7f0e", "label": "loss, second copy"},
            {"x": list(run.steps), "y": _rounded(run.first_loss), "color": "#1f77b4", "label": "loss, first copy"},
        ],
        "vline": step,
        "ylim": [0, 5],
        "xlabel": "training step",
        "ylabel": "loss (nats)",
        "title": f"seed {seed}, step {step}",
    }
    return {"size": [10, 8], "columns": 2, "panels": [*maps, curves]}


def induction_checkpoint_explorer(run: Any, snapshot_every: int, probe_half: int) -> widgets.VBox:
    """Chapter 6's training-step explorer over the snapshots of ``run`` (the chapter's 2-layer toy model, trained with
    ``snapshot_every``): :func:`induction_checkpoint_state` for every snapshot, the last one drawn first."""
    _RUNS[(run.seed, snapshot_every)] = run
    steps = sorted(run.snapshots)
    return figure_explorer(
        "induction_checkpoint",
        induction_checkpoint_state,
        fixed={"seed": run.seed, "snapshot_every": snapshot_every, "probe_half": probe_half},
        step=widgets.IntSlider(
            value=steps[-1], min=0, max=steps[-1], step=snapshot_every, description="step", continuous_update=False
        ),
    )


# -- chapter 6: any head of MiniLM or SmolLM2 ---------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _encoder_text_attention(text: str) -> tuple[torch.Tensor, list[str]]:
    from manyheads.analysis.collect import token_attentions

    encoder, tokenizer = _model("encoder")
    attns, tokens = token_attentions(encoder, tokenizer, [text])
    return attns[0], tokens[0]


def picked_head_state(
    views: Mapping[str, Mapping], metrics: Mapping[str, Mapping], model: str, layer: int, head: int
) -> dict:
    """What chapter 6's head picker shows: the attention of head (``layer``, ``head``) of the view ``model`` names,
    and in the title that head's metrics over the chapter's sample. ``views[model]``: ``{"model": "encoder", "text":
    ...}`` (MiniLM on a text, its word pieces as labels) or ``{"model": "decoder", "ids": [...]}`` (SmolLM2 on token
    ids, the first shown as BOS); ``metrics[model]``: ``distance``, ``entropy``, ``sink``, ``previous``, each
    (n_layers, n_heads) as lists. A layer or head beyond the model's is read as its last (the sliders cover both)."""
    view = views[model]
    if view["model"] == "encoder":
        attn, labels = _encoder_text_attention(view["text"])
    else:
        _, tokenizer = _model("decoder")
        attn = _decoder_attention(tuple(view["ids"]))
        labels = ["BOS"] + _decoder_labels(tokenizer, view["ids"][1:])
    layer, head = min(layer, attn.shape[0] - 1), min(head, attn.shape[1] - 1)
    m = {k: v[layer][head] for k, v in metrics[model].items()}
    title = (
        f"{model}: layer {layer}, head {head}\ndistance {m['distance']:.1f}, entropy {m['entropy']:.2f}, "
        f"sink {m['sink']:.2f}, previous {m['previous']:.2f} (on the whole sample)"
    )
    panel = heatmap_panel(
        attn[layer, head],
        xticks=labels,
        yticks=labels,
        rotate=90,
        xlabel="key position",
        ylabel="query position",
        title=title,
    )
    return {"size": [6.2, 5.6], "panels": [panel]}


def picked_head_explorer(
    encoder: Any,
    enc_tokenizer: Any,
    decoder: Any,
    dec_tokenizer: Any,
    views: Mapping[str, Mapping],
    metrics: Mapping[str, Any],
    layer: int = 1,
    head: int = 0,
) -> widgets.VBox:
    """Chapter 6's head picker (:func:`picked_head_state`): a model dropdown over ``views`` (name → ``{"model":
    "encoder", "text": ...}`` or ``{"model": "decoder", "ids": [...]}``) and layer and head sliders wide enough for
    both models; ``metrics``: name → the chapter's :class:`manyheads.analysis.layers.LayerMetrics` (or any object
    with ``distance``, ``entropy``, ``sink`` and ``previous`` tensors (n_layers, n_heads)), rounded to 3 decimals."""
    _share_model("encoder", encoder, enc_tokenizer)
    _share_model("decoder", decoder, dec_tokenizer)
    stored = {
        name: {
            k: [_rounded(row) for row in getattr(m, k).tolist()] for k in ("distance", "entropy", "sink", "previous")
        }
        for name, m in metrics.items()
    }
    n_layers = max(encoder.config.n_layers, decoder.config.n_layers)
    n_heads = max(encoder.config.n_heads, decoder.config.n_heads)
    return figure_explorer(
        "picked_head",
        picked_head_state,
        fixed={"views": {k: dict(v) for k, v in views.items()}, "metrics": stored},
        model=widgets.Dropdown(options=list(views), description="model"),
        layer=widgets.IntSlider(layer, 0, n_layers - 1, description="layer", continuous_update=False),
        head=widgets.IntSlider(head, 0, n_heads - 1, description="head", continuous_update=False),
    )
