"""Redundancy and pruning measured on tasks (chapter 5): single-head ablation maps, importance, pruning curves.

A :class:`PruningTask` is "a model + a metric + a loss": it runs the model with given head gates (n_layers,
n_heads) on its items, scores the outputs (higher is better) and gives a loss that depends on the gates. Everything
else here works on any task: the toy models of chapters 1-3 through :class:`ModelTask`, MiniLM's sentence
embeddings through :func:`lee_similarity_task` (Lee et al.'s human document similarities) and
:func:`sentiment_probe_task` (a ridge probe of human movie-review ratings, fitted once on the unpruned model).

The encoder tasks are built to fit a chapter on two CPU cores: removing head (l, h) changes nothing below layer
l, so the hidden states that enter each layer are computed once per gate setting and only layers l and above run
again for each head (:meth:`PruningTask.outputs_each_removed`). Gates and ablations go through
:mod:`manyheads.interventions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads import interventions
from manyheads.analysis.multiple_tests import normal_p_values
from manyheads.attention import padding_mask

__all__ = [
    "PruningTask",
    "ModelTask",
    "EncoderTask",
    "lee_similarity_task",
    "correlation_loss",
    "sentiment_probe_task",
    "next_token_task",
    "spearman",
    "fit_ridge",
    "AblationMap",
    "ablation_map",
    "head_importance",
    "PruningCurve",
    "pruning_curve",
    "prunable_fraction",
    "prunable_interval",
    "pruned_per_layer",
    "self_distillation_gradient",
    "JointAblation",
    "joint_ablation",
]

IMPORTANCE_METHODS = ("gradient", "loo", "random")


# --------------------------------------------------------------------------------------------- statistics
def _ranks(x: Tensor) -> Tensor:
    """Ranks 1..n of a 1-D tensor, ties given their average rank (as scipy.stats.rankdata)."""
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    ranks = torch.empty_like(x, dtype=torch.float64)
    _, inverse, counts = torch.unique_consecutive(sorted_x, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).to(torch.float64)
    average = ends - (counts.to(torch.float64) - 1) / 2  # mean of the ranks start..end of each run of ties
    ranks[order] = average[inverse]
    return ranks


def _weighted_ranks(x: Tensor, weight: Tensor) -> Tensor:
    """Average ranks of a 1-D tensor whose entry k stands for weight[k] equal copies (ties share their mean rank)."""
    order = torch.argsort(x, stable=True)
    _, inverse, _ = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    group_weight = torch.zeros(int(inverse.max()) + 1, dtype=torch.float64).index_add_(0, inverse, weight[order])
    before = torch.cumsum(group_weight, 0) - group_weight
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = (before + (group_weight + 1) / 2)[inverse]
    return ranks


def _weighted_row_ranks(x: Tensor, weight: Tensor) -> Tensor:
    """_weighted_ranks of each row of x (rows, n), for continuous values (no ties between different entries)."""
    order = torch.argsort(x, dim=1)
    w = weight[order]
    return torch.empty_like(x, dtype=torch.float64).scatter_(1, order, torch.cumsum(w, 1) - w + (w + 1) / 2)


def spearman(x: Tensor, y: Tensor) -> float:
    """Spearman's rank correlation of two 1-D tensors of equal length (ties get average ranks)."""
    x, y = x.detach().reshape(-1), y.detach().reshape(-1)
    if x.shape != y.shape or x.numel() < 2:
        raise ValueError(
            f"spearman needs two 1-D tensors of the same length >= 2, got {tuple(x.shape)}, {tuple(y.shape)}"
        )
    rx, ry = _ranks(x.cpu()), _ranks(y.cpu())
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = (rx.norm() * ry.norm()).item()
    return float((rx @ ry).item() / denominator) if denominator > 0 else float("nan")


def correlation_loss(x: Tensor, y: Tensor) -> Tensor:
    """1 − Pearson's r between two 1-D tensors: a differentiable loss that, like a rank correlation, ignores the
    level and the scale of ``x`` (adding a constant to every value, or multiplying them by a positive one, leaves it
    unchanged). 0 when ``x`` is a rising linear function of ``y``, 1 when unrelated, 2 when reversed."""
    if x.dim() != 1 or x.shape != y.shape or x.numel() < 2:
        raise ValueError(
            f"correlation_loss needs two 1-D tensors of the same length >= 2, got {tuple(x.shape)}, {tuple(y.shape)}"
        )
    xc, yc = x - x.mean(), y.to(x) - y.to(x).mean()
    return 1 - (xc @ yc) / (xc.norm() * yc.norm()).clamp_min(torch.finfo(x.dtype).tiny)


def fit_ridge(features: Tensor, targets: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Ridge regression with an intercept: ``(weight (d,), bias ())`` minimising |Xw + b - y|² + alpha·|w|².

    features: (n, d); targets: (n,). Solved in float64 in closed form on the features' device (targets are moved
    there); the intercept is not penalised.
    """
    if features.dim() != 2 or targets.shape != features.shape[:1]:
        raise ValueError(
            f"fit_ridge needs features (n, d) and targets (n,), got {tuple(features.shape)}, {tuple(targets.shape)}"
        )
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    x, y = features.detach().double(), targets.detach().double().to(features.device)
    x_mean, y_mean = x.mean(0), y.mean()
    xc = x - x_mean
    gram = xc.T @ xc + alpha * torch.eye(x.shape[1], dtype=torch.float64, device=x.device)
    weight = torch.linalg.solve(gram, xc.T @ (y - y_mean))
    bias = y_mean - x_mean @ weight
    return weight.to(features.dtype), bias.to(features.dtype)


# --------------------------------------------------------------------------------------------- tasks
class PruningTask:
    """A model, its items, a metric of its outputs (higher is better) and a loss that depends on the gates.

    Subclasses define :meth:`outputs` (the model's per-item outputs with given gates: one row per item),
    :meth:`metric` (a float from outputs, optionally on a resample of item indices, for the bootstrap) and
    :meth:`loss_terms` (differentiable losses of the gates, one per batch). ``name`` labels tables and plots.
    """

    name = "task"
    metric_name = "score"

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.grid = tuple(interventions.current_gates(model).shape)

    @property
    def n_items(self) -> int:
        raise NotImplementedError

    def ones(self) -> Tensor:
        """Gates with every head on: (n_layers, n_heads)."""
        return torch.ones(self.grid)

    def outputs(self, gates: Tensor) -> Tensor:
        raise NotImplementedError

    def metric(self, outputs: Tensor, items: Tensor | None = None) -> float:
        raise NotImplementedError

    def loss_terms(self, gates: Tensor):
        raise NotImplementedError

    def loss_of(self, outputs: Tensor) -> Tensor:
        """The task's loss from outputs (not differentiable here): what leave-one-out importance compares."""
        raise NotImplementedError

    def score(self, gates: Tensor) -> float:
        """The metric with these gates on all items."""
        return self.metric(self.outputs(gates))

    def bootstrap_metrics(self, outputs: list[Tensor], resamples: list[Tensor]) -> Tensor:
        """The metric of each outputs on each resample of items: (len(outputs), len(resamples)). Subclasses may
        vectorise it; this is the plain loop."""
        return torch.tensor([[self.metric(out, items) for items in resamples] for out in outputs])

    def outputs_each_removed(
        self, gates: Tensor, heads: Sequence[tuple[int, int]], mode: str = "zero", means: Tensor | None = None
    ) -> list[Tensor]:
        """For each head in ``heads``: the outputs with that head ablated on top of ``gates``. Plain loop here."""
        results = []
        for head in heads:
            if mode == "zero":
                results.append(self.outputs(_without(gates, head)))
            else:
                with interventions.ablated(self.model, head, mode="mean", means=means):
                    results.append(self.outputs(gates))
        return results

    def head_means(self) -> Tensor:
        """Each head's mean output over the task's items (for mean ablation): (n_layers, n_heads, d_head)."""
        raise NotImplementedError


def _without(gates: Tensor, head: tuple[int, int]) -> Tensor:
    gates = gates.clone()
    gates[head] = 0.0
    return gates


def _alive(gates: Tensor) -> list[tuple[int, int]]:
    return [tuple(p) for p in (gates != 0).nonzero().tolist()]


class ModelTask(PruningTask):
    """Any course model as a pruning task: inputs (items along dim 0), targets, a metric and a loss (chapter 5).

    ``metric(outputs, targets) -> float`` (higher is better) and ``loss(outputs, targets) -> scalar tensor`` take
    the model's output passed through ``output_fn`` (default: the first element of a tuple, e.g. the toy model's
    logits). The loss is computed in batches of ``batch_size`` items (one gradient per batch for
    :func:`head_importance`). Mean ablation uses each head's mean output on ``inputs``. ``inputs`` and ``targets``
    are moved to the model's device.
    """

    def __init__(
        self,
        model: nn.Module,
        inputs: Tensor,
        targets: Tensor,
        metric: Callable,
        loss: Callable,
        output_fn: Callable | None = None,
        batch_size: int = 256,
        name: str = "toy task",
        metric_name: str = "accuracy",
    ) -> None:
        super().__init__(model)
        if len(inputs) != len(targets):
            raise ValueError(
                f"inputs and targets must have the same number of items, got {len(inputs)}, {len(targets)}"
            )
        device = next(model.parameters()).device  # items and targets live where the model runs
        self.inputs, self.targets = inputs.to(device), targets.to(device)
        self._metric, self._loss = metric, loss
        self.output_fn = output_fn or (lambda out: out[0] if isinstance(out, tuple) else out)
        self.batch_size, self.name, self.metric_name = batch_size, name, metric_name

    @property
    def n_items(self) -> int:
        return len(self.inputs)

    @torch.no_grad()
    def outputs(self, gates: Tensor) -> Tensor:
        with interventions.gated(self.model, gates):
            return self.output_fn(self.model(self.inputs))

    def metric(self, outputs: Tensor, items: Tensor | None = None) -> float:
        targets = self.targets
        if items is not None:
            outputs, targets = outputs[items], targets[items]
        return float(self._metric(outputs, targets))

    def loss_of(self, outputs: Tensor) -> Tensor:
        return self._loss(outputs, self.targets)

    def loss_terms(self, gates: Tensor):
        for start in range(0, self.n_items, self.batch_size):
            chunk = slice(start, start + self.batch_size)
            with interventions.gated(self.model, gates), torch.enable_grad():
                yield self._loss(self.output_fn(self.model(self.inputs[chunk])), self.targets[chunk])

    def head_means(self) -> Tensor:
        return interventions.head_output_means(self.model, self.inputs)


class EncoderTask(PruningTask):
    """A task on MiniLM's sentence embeddings (mean over real tokens, then L2-normalised, as sentence-transformers
    does for all-MiniLM-L6-v2). Subclasses turn embeddings into outputs, a metric and a loss.

    The texts are tokenized once (truncated to ``max_tokens``), sorted by length and cut into batches of about
    ``tokens_per_batch`` tokens, so little is spent on padding.
    """

    metric_name = "score"
    # Rows × positions per forward when the single-head ablations of a layer are batched: chunks this small stay in
    # the CPU cache (measured: 15 % faster than 16384 on Lee, no slower on snippets).
    MAX_TOKENS = 2048

    def __init__(
        self, model: nn.Module, tokenizer, texts: Sequence[str], max_tokens: int = 128, tokens_per_batch: int = 4096
    ) -> None:
        super().__init__(model)
        if not texts:
            raise ValueError("an encoder task needs at least one text")
        self.texts = list(texts)
        lengths = tokenizer(self.texts, max_length=max_tokens).lengths
        order = sorted(range(len(self.texts)), key=lambda i: lengths[i])
        self.batches, self.positions = [], []  # TokenBatches, and which item each row is
        start = 0
        while start < len(order):
            stop = start + 1
            while stop < len(order) and (stop + 1 - start) * lengths[order[stop]] <= tokens_per_batch:
                stop += 1
            rows = order[start:stop]
            self.batches.append(tokenizer([self.texts[i] for i in rows], max_length=max_tokens))
            self.positions.append(torch.tensor(rows))
            start = stop
        self.n_tokens = sum(int(b.attention_mask.sum()) for b in self.batches)
        self._device = next(model.parameters()).device

    @property
    def n_items(self) -> int:
        return len(self.texts)

    # The encoder's forward, split so that a run can start at any layer from saved hidden states.
    def _embed(self, batch) -> tuple[Tensor, Tensor]:
        inputs = batch.to(self._device).inputs()
        x = self.model.embeddings(inputs["input_ids"], inputs["token_type_ids"])
        return x, padding_mask(inputs["attention_mask"])

    def _run_layers(self, x: Tensor, mask: Tensor, start: int, keep: list | None = None) -> Tensor:
        for i in range(start, len(self.model.layers)):
            if keep is not None:
                keep.append(x)
            x, _ = self.model.layers[i](x, mask)
        return x

    def _pool(self, hidden: Tensor, batch, copies: int = 1) -> Tensor:
        is_token = batch.attention_mask.to(hidden.device, hidden.dtype).repeat(copies, 1)[..., None]
        pooled = (hidden * is_token).sum(1) / is_token.sum(1)
        return F.normalize(pooled, dim=-1)

    def _gather(self, pieces: list[Tensor]) -> Tensor:
        """Per-batch rows back into item order: (n_items, ...)."""
        out = torch.empty((self.n_items, *pieces[0].shape[1:]), dtype=pieces[0].dtype, device=pieces[0].device)
        for rows, piece in zip(self.positions, pieces):
            out[rows.to(piece.device)] = piece
        return out

    def embeddings(self, gates: Tensor) -> Tensor:
        """Sentence embeddings with these gates: (n_items, d_model), unit length, no autograd history."""
        pieces = []
        with torch.inference_mode(), interventions.gated(self.model, gates):
            for batch in self.batches:
                x, mask = self._embed(batch)
                pieces.append(self._pool(self._run_layers(x, mask, 0), batch))
        return self._gather(pieces)

    def outputs_from_embeddings(self, embeddings: Tensor) -> Tensor:
        return embeddings

    def outputs(self, gates: Tensor) -> Tensor:
        return self.outputs_from_embeddings(self.embeddings(gates))

    def outputs_each_removed(
        self, gates: Tensor, heads: Sequence[tuple[int, int]], mode: str = "zero", means: Tensor | None = None
    ) -> list[Tensor]:
        """Outputs with each head of ``heads`` ablated on top of ``gates``; hidden states below its layer reused."""
        if mode not in interventions.ABLATION_MODES:
            raise ValueError(f"mode must be one of {interventions.ABLATION_MODES}, got {mode!r}")
        if mode == "mean" and means is None:
            raise ValueError("mean ablation needs means= (n_layers, n_heads, d_head), e.g. task.head_means()")
        heads = [(int(layer), int(head)) for layer, head in heads]
        pieces = {head: [] for head in heads}
        by_layer: dict[int, list[int]] = {}
        for layer, head in heads:
            by_layer.setdefault(layer, []).append(head)
        with torch.inference_mode():
            for batch in self.batches:
                x, mask = self._embed(batch)
                saved: list[Tensor] = []
                with interventions.gated(self.model, gates):
                    self._run_layers(x, mask, 0, keep=saved)  # saved[l]: the input of layer l
                    # All of a layer's heads at once: one copy of the batch per head, each with its head ablated,
                    # in chunks of at most about MAX_TOKENS tokens.
                    per_chunk = max(1, self.MAX_TOKENS // max(1, x.shape[0] * x.shape[1]))
                    for layer, layer_heads in by_layer.items():
                        for start in range(0, len(layer_heads), per_chunk):
                            group = layer_heads[start : start + per_chunk]
                            k = len(group)
                            with interventions.ablated_each(self.model, layer, group, mode=mode, means=means):
                                out = self._run_layers(
                                    saved[layer].repeat(k, 1, 1), mask.repeat(k, *[1] * (mask.dim() - 1)), layer
                                )
                            for j, pooled in enumerate(self._pool(out, batch, copies=k).chunk(k)):
                                pieces[layer, group[j]].append(pooled)
        return [self.outputs_from_embeddings(self._gather(pieces[head])) for head in heads]

    def embeddings_with_grad(self, gates: Tensor) -> Tensor:
        """Embeddings (n_items, d_model) that depend on ``gates`` (which should require grad)."""
        pieces = []
        with torch.enable_grad(), interventions.gated(self.model, gates):
            for batch in self.batches:
                x, mask = self._embed(batch)
                pieces.append(self._pool(self._run_layers(x, mask, 0), batch))
        return self._gather(pieces)

    def head_means(self) -> Tensor:
        """Each head's output averaged over all real tokens of all items: (n_layers, n_heads, d_head)."""
        total, count = None, 0
        for batch in self.batches:
            n = int(batch.attention_mask.sum())
            means = interventions.head_output_means(self.model, batch.to(self._device))
            total = means * n if total is None else total + means * n
            count += n
        return total / count


class _LeeTask(EncoderTask):
    name = "Lee similarity"
    metric_name = "Spearman ρ"

    def __init__(self, model, tokenizer, documents, similarities, max_tokens, tokens_per_batch):
        super().__init__(model, tokenizer, documents, max_tokens, tokens_per_batch)
        n = len(documents)
        if similarities.shape != (n, n):
            raise ValueError(f"similarities must be ({n}, {n}) for {n} documents, got {tuple(similarities.shape)}")
        self.similarities = similarities.float()
        self.pairs = torch.triu_indices(n, n, offset=1)

    def outputs_from_embeddings(self, embeddings: Tensor) -> Tensor:
        return embeddings @ embeddings.T  # cosine similarities (n_docs, n_docs): the embeddings are unit length

    def metric(self, outputs: Tensor, items: Tensor | None = None) -> float:
        if items is None:
            i, j = self.pairs
        else:  # a bootstrap resample of documents: every pair of draws that are two different documents
            a, b = torch.triu_indices(len(items), len(items), offset=1)
            distinct = items[a] != items[b]
            i, j = items[a[distinct]], items[b[distinct]]
        return spearman(outputs.cpu()[i, j], self.similarities[i, j])

    def loss_of(self, outputs: Tensor) -> Tensor:
        i, j = self.pairs
        return correlation_loss(outputs.cpu()[i, j], self.similarities[i, j])

    def bootstrap_metrics(self, outputs: list[Tensor], resamples: list[Tensor]) -> Tensor:
        # A resample that draws document d w_d times contains each pair of distinct documents (d, e) w_d·w_e times.
        # So Spearman's ρ over the resample's pairs is a weighted ρ over the distinct pairs, with average ranks for
        # the repeated ones: the same number as metric(outputs, items), computed for all outputs at once.
        i_all, j_all = self.pairs
        stacked = torch.stack([out.cpu()[i_all, j_all] for out in outputs]).double()  # (n_outputs, n_pairs)
        human_all = self.similarities[i_all, j_all].double()
        result = torch.empty(len(outputs), len(resamples), dtype=torch.float64)
        for r, items in enumerate(resamples):
            draws = torch.bincount(items, minlength=self.n_items).double()
            weight = draws[i_all] * draws[j_all]
            present = weight > 0
            w = weight[present]
            human = _weighted_ranks(human_all[present], w)
            model = _weighted_row_ranks(stacked[:, present], w)
            total = w.sum()
            human = human - (w * human).sum() / total
            model = model - (model * w).sum(1, keepdim=True) / total
            covariance = (model * w) @ human
            result[:, r] = covariance / torch.sqrt(((model**2) * w).sum(1) * (w * human**2).sum())
        return result.float()

    def loss_terms(self, gates: Tensor):
        embeddings = self.embeddings_with_grad(gates)
        i, j = self.pairs
        cosines = (embeddings @ embeddings.T)[i, j]
        yield correlation_loss(cosines, self.similarities[i, j].to(cosines.device))


class _SentimentTask(EncoderTask):
    name = "movie-review sentiment"
    metric_name = "held-out R²"

    def __init__(self, model, tokenizer, texts, ratings, weight, bias, max_tokens, tokens_per_batch):
        super().__init__(model, tokenizer, texts, max_tokens, tokens_per_batch)
        self.ratings = ratings.float()
        self.weight, self.bias = weight, bias

    def outputs_from_embeddings(self, embeddings: Tensor) -> Tensor:
        return embeddings @ self.weight.to(embeddings) + self.bias.to(embeddings)  # predicted ratings (n_items,)

    def metric(self, outputs: Tensor, items: Tensor | None = None) -> float:
        predictions, ratings = outputs.cpu(), self.ratings
        if items is not None:
            predictions, ratings = predictions[items], ratings[items]
        return float(1 - ((predictions - ratings) ** 2).sum() / ((ratings - ratings.mean()) ** 2).sum())

    def loss_of(self, outputs: Tensor) -> Tensor:
        return F.mse_loss(outputs.cpu(), self.ratings)

    def bootstrap_metrics(self, outputs: list[Tensor], resamples: list[Tensor]) -> Tensor:
        index = torch.stack(resamples)  # (n_resamples, n_items)
        ratings = self.ratings[index]
        total = ((ratings - ratings.mean(1, keepdim=True)) ** 2).sum(1)
        predictions = torch.stack([out.cpu() for out in outputs])[:, index]  # (n_outputs, n_resamples, n_items)
        return 1 - ((predictions - ratings) ** 2).sum(2) / total

    def loss_terms(self, gates: Tensor):
        # One gradient per batch of texts, so that Michel et al.'s absolute value is taken per batch, not per set.
        for batch, rows in zip(self.batches, self.positions):
            with torch.enable_grad(), interventions.gated(self.model, gates):
                x, mask = self._embed(batch)
                predictions = self.outputs_from_embeddings(self._pool(self._run_layers(x, mask, 0), batch))
            yield F.mse_loss(predictions, self.ratings[rows].to(predictions.device), reduction="sum") / self.n_items


def lee_similarity_task(
    model: nn.Module,
    tokenizer,
    documents: Sequence[str],
    similarities: Tensor,
    max_tokens: int = 128,
    tokens_per_batch: int = 4096,
) -> EncoderTask:
    """Lee et al.'s document similarity as a pruning task on MiniLM (chapter 5).

    documents: n texts (Lee's 50, :func:`manyheads.data.lee_documents`), truncated to ``max_tokens`` word pieces;
    similarities: (n, n) mean human similarities (:func:`manyheads.data.lee_similarities`). Outputs: the (n, n)
    cosine similarities of the sentence embeddings. Metric: Spearman's ρ between model and human similarity over
    the n(n-1)/2 pairs (a bootstrap resamples documents). Loss (depends on the gates): :func:`correlation_loss`,
    1 minus Pearson's r between the cosines and the human scores. Like ρ it ignores the cosines' level and scale
    (a mean squared error against the human scores would mostly measure how high the cosines are, not how they
    rank the pairs: chapter 5, review finding B-5).
    """
    return _LeeTask(model, tokenizer, list(documents), similarities, max_tokens, tokens_per_batch)


def sentiment_probe_task(
    model: nn.Module,
    tokenizer,
    texts: Sequence[str],
    ratings: Tensor,
    n_fit: int,
    n_eval: int,
    seed: int = 0,
    alpha: float = 1.0,
    max_tokens: int = 128,
    tokens_per_batch: int = 4096,
    n_importance: int = 0,
) -> EncoderTask:
    """Human sentiment ratings predicted by a ridge probe on MiniLM's sentence embeddings (chapter 5).

    A seeded permutation of the items (``seed``) gives ``n_fit`` texts to fit the probe on and the next ``n_eval``
    held-out texts, which are the task's items. The probe (ridge, regularisation ``alpha``, with intercept) is
    fitted ONCE on the unpruned model's embeddings and then kept fixed, so pruning is judged by how well the pruned
    model still feeds the same probe. Outputs: predicted ratings (n_eval,). Metric: held-out R². Loss (depends on
    the gates): squared error of the probe's predictions. ``task.probe_r2_fit`` is the probe's R² on its own
    training texts. With ``n_importance`` > 0, ``task.importance_task`` is the same task (same probe) on the first
    ``n_importance`` of the fitting texts: estimate importance there and score on the held-out items, so that
    pruning is not selected on the items it is scored on.
    """
    if len(texts) != len(ratings):
        raise ValueError(f"texts and ratings differ in length: {len(texts)} and {len(ratings)}")
    if n_fit < 2 or n_eval < 2 or n_fit + n_eval > len(texts):
        raise ValueError(f"need 2 <= n_fit, 2 <= n_eval and n_fit + n_eval <= {len(texts)}; got {n_fit}, {n_eval}")
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed)).tolist()
    fit_rows, eval_rows = order[:n_fit], order[n_fit : n_fit + n_eval]
    fit_part = EncoderTask(model, tokenizer, [texts[i] for i in fit_rows], max_tokens, tokens_per_batch)
    features = fit_part.embeddings(fit_part.ones())
    fit_ratings = ratings[fit_rows].float().to(features.device)  # beside the embeddings, on the model's device
    weight, bias = fit_ridge(features, fit_ratings, alpha)
    task = _SentimentTask(
        model, tokenizer, [texts[i] for i in eval_rows], ratings[eval_rows], weight, bias, max_tokens, tokens_per_batch
    )
    fitted = features @ weight + bias
    task.probe_r2_fit = float(1 - ((fitted - fit_ratings) ** 2).sum() / ((fit_ratings - fit_ratings.mean()) ** 2).sum())
    task.n_fit, task.alpha, task.seed = n_fit, alpha, seed
    task.importance_task = None
    if n_importance > 0:
        rows = fit_rows[: min(n_importance, n_fit)]
        task.importance_task = _SentimentTask(
            model, tokenizer, [texts[i] for i in rows], ratings[rows], weight, bias, max_tokens, tokens_per_batch
        )
        task.importance_task.name = f"{task.name} (importance items)"
    return task


class _NextTokenTask(PruningTask):
    name = "next-token prediction"
    metric_name = "log-likelihood per token (nats)"

    def __init__(self, model: nn.Module, ids: Tensor, batch_size: int, name: str | None) -> None:
        super().__init__(model)
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype != torch.long or ids.shape[1] < 2:
            raise ValueError("ids must be a (n, seq >= 2) tensor of token ids (torch.long)")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.ids, self.batch_size = ids.cpu(), batch_size
        self.n_tokens = int(ids[:, 1:].numel())
        self._device = next(model.parameters()).device
        if name is not None:
            self.name = name

    @property
    def n_items(self) -> int:
        return len(self.ids)

    def _token_losses(self, rows: Tensor) -> Tensor:
        rows = rows.to(self._device)
        out = self.model(rows)
        logits = getattr(out, "logits", out)
        return F.cross_entropy(logits[:, :-1].float().transpose(1, 2), rows[:, 1:], reduction="none")

    def outputs(self, gates: Tensor) -> Tensor:
        """Every next-token loss (nats) with these gates: (n_items, seq - 1), on the CPU."""
        with torch.inference_mode(), interventions.gated(self.model, gates):
            return torch.cat([self._token_losses(rows).cpu() for rows in self.ids.split(self.batch_size)])

    def metric(self, outputs: Tensor, items: Tensor | None = None) -> float:
        return -float((outputs if items is None else outputs[items]).mean())

    def loss_of(self, outputs: Tensor) -> Tensor:
        return outputs.mean()

    def loss_terms(self, gates: Tensor):
        for rows in self.ids.split(self.batch_size):
            with torch.enable_grad(), interventions.gated(self.model, gates):
                yield self._token_losses(rows).mean()

    def head_means(self) -> Tensor:
        return interventions.head_output_means(self.model, self.ids.to(self._device))


def next_token_task(model: nn.Module, ids: Tensor, batch_size: int = 8, name: str | None = None) -> PruningTask:
    """A language model's next-token prediction as a pruning task (chapter 5): the task where attention matters.

    ids: (n, seq) token ids, one item per row (e.g. a BOS token and the start of one news document); ``model(ids)``
    returns logits (n, seq, vocab) or an object holding them as ``.logits`` (the course's decoder). Outputs: every
    next-token loss, (n, seq - 1) nats. Metric (higher is better): the mean log-likelihood per token, i.e. minus the
    mean loss; a bootstrap resamples rows. Loss (depends on the gates): the mean cross-entropy, one term per batch
    of ``batch_size`` rows, so that gradient importance takes Michel et al.'s absolute value per batch.
    """
    return _NextTokenTask(model, ids, batch_size, name)


# --------------------------------------------------------------------------------------------- ablation maps
@dataclass
class AblationMap:
    """The change of a task's metric when each head alone is ablated (chapter 5). All tensors (n_layers, n_heads).

    delta: metric without the head minus metric with all heads (negative = the head helped).
    low, high: a bootstrap percentile interval of delta (items resampled; same resample for both runs).
    base: the metric with all heads; mode: "zero" or "mean"; level: the interval's coverage.
    se: the bootstrap standard error of delta, for p-values (:meth:`p_values`) and corrections over many heads.
    """

    delta: Tensor
    low: Tensor
    high: Tensor
    base: float
    mode: str
    level: float
    task: str = ""
    metric_name: str = ""
    loss_delta: Tensor | None = None
    se: Tensor | None = None

    @property
    def significant(self) -> Tensor:
        """Heads whose (uncorrected) interval excludes 0 (bool, (n_layers, n_heads)). Over 72 heads, about
        72·(1 - level) of them do so by chance alone: correct with :meth:`p_values` and
        :func:`manyheads.analysis.multiple_tests.holm` before calling any one of them real."""
        return (self.low > 0) | (self.high < 0)

    def p_values(self) -> Tensor:
        """Two-sided p-value of each head's delta against 0 (normal approximation with the bootstrap standard
        error): (n_layers, n_heads) float64."""
        if self.se is None:
            raise ValueError("this map has no bootstrap standard errors (se); make it with ablation_map")
        return normal_p_values(self.delta, self.se)

    @property
    def helpful_removals(self) -> list[tuple[int, int]]:
        """Heads whose removal raises the metric with the whole interval above 0, as (layer, head) pairs."""
        return [tuple(p) for p in (self.low > 0).nonzero().tolist()]


def ablation_map(
    task: PruningTask,
    mode: str = "zero",
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    means: Tensor | None = None,
) -> AblationMap:
    """Ablate every head alone (zero or mean ablation) and measure the change of the task's metric (chapter 5).

    The noise band is a paired bootstrap over items: ``n_boot`` resamples of the items (seeded), each scored with
    and without the head, give the interval of the difference. ``loss_delta`` holds the change of the task's loss,
    which is leave-one-out importance at full gates (for zero ablation).
    """
    gates = task.ones()
    if mode == "mean" and means is None:
        means = task.head_means()
    heads = [(layer, head) for layer in range(task.grid[0]) for head in range(task.grid[1])]
    base_out = task.outputs(gates)
    removed = task.outputs_each_removed(gates, heads, mode=mode, means=means)
    generator = torch.Generator().manual_seed(seed)
    resamples = [torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot)]
    boot = task.bootstrap_metrics([base_out, *removed], resamples).double()
    boot = boot[1:] - boot[:1]  # paired: each resample scored with and without the head
    se = boot.std(dim=1).float().reshape(task.grid)
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    bounds = torch.quantile(boot, q, dim=1).float()  # (2, n_heads_total)
    low, high = bounds[0].reshape(task.grid), bounds[1].reshape(task.grid)
    base = task.metric(base_out)
    base_loss = float(task.loss_of(base_out))
    delta = torch.tensor([task.metric(out) - base for out in removed]).reshape(task.grid)
    loss_delta = torch.tensor([float(task.loss_of(out)) - base_loss for out in removed]).reshape(task.grid)
    return AblationMap(delta, low, high, base, mode, level, task.name, task.metric_name, loss_delta, se)


# --------------------------------------------------------------------------------------------- importance
def head_importance(
    task: PruningTask, method: str, gates: Tensor | None = None, seed: int = 0, normalize_layers: bool = False
) -> Tensor:
    """Importance of every head still on in ``gates`` (default: all on): (n_layers, n_heads); removed heads -inf.

    method "gradient": Michel et al.'s |∂loss/∂gate| at ``gates``, absolute value per batch of the task's loss,
    averaged over batches (optionally L2-normalised per layer, as Michel et al. do before ranking);
    "loo": leave-one-out, how much the task's loss rises when the head alone is removed (negative: removing it
    lowers the loss); "random": a seeded random score (a random pruning order).
    Low importance = pruned first.
    """
    if method not in IMPORTANCE_METHODS:
        raise ValueError(f"method must be one of {IMPORTANCE_METHODS}, got {method!r}")
    gates = task.ones() if gates is None else gates.detach().clone()
    alive = gates != 0
    if method == "random":
        scores = torch.rand(task.grid, generator=torch.Generator().manual_seed(seed))
    elif method == "gradient":
        total, n = torch.zeros(task.grid), 0
        for gate_leaf in [gates.clone().requires_grad_(True)]:
            for loss in task.loss_terms(gate_leaf):
                (grad,) = torch.autograd.grad(loss, gate_leaf)
                total += grad.abs().cpu()
                n += 1
        scores = total / max(n, 1)
        if normalize_layers:
            scores = scores / scores.norm(dim=1, keepdim=True).clamp_min(1e-30)
    else:
        heads = _alive(gates)
        base = float(task.loss_of(task.outputs(gates)))
        scores = torch.zeros(task.grid)
        for head, out in zip(heads, task.outputs_each_removed(gates, heads)):
            scores[head] = float(task.loss_of(out)) - base
    return scores.masked_fill(~alive, -math.inf)


# --------------------------------------------------------------------------------------------- pruning curves
@dataclass
class PruningCurve:
    """An iterative pruning run (chapter 5).

    fractions: share of heads removed at each point (0 first); scores: the task's metric there.
    removed_at: (n_layers, n_heads) index of the point from which each head is gone (len(fractions) if never).
    """

    method: str
    fractions: list[float]
    scores: list[float]
    removed_at: Tensor
    seed: int = 0
    task: str = ""
    estimates: int = 0
    history: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)

    @property
    def base(self) -> float:
        return self.scores[0]

    @property
    def floor(self) -> float:
        """The score with every head removed (the curve's last point when it runs to 100 %), else NaN: what the
        task gives with no attention at all, the baseline the curve is read against."""
        return self.scores[-1] if self.fractions and self.fractions[-1] >= 1.0 - 1e-9 else math.nan

    def relative_scores(self, floor: float | None = None) -> list[float]:
        """Each score as the share of the gap between the floor (0) and the unpruned score (1) that is kept.

        ``floor`` defaults to :attr:`floor`. NaN throughout when the floor is not below the unpruned score: then
        removing every head does not hurt, and the task cannot show what heads are worth.
        """
        floor = self.floor if floor is None else floor
        gap = self.base - floor
        if not gap > 0:
            return [math.nan] * len(self.scores)
        return [(s - floor) / gap for s in self.scores]

    def mask_at(self, point: int) -> Tensor:
        """Keep-mask (bool (n_layers, n_heads)) of the heads still on at point ``point``."""
        return self.removed_at > point


def pruning_curve(
    task: PruningTask,
    method: str,
    step: float = 0.1,
    max_fraction: float = 1.0,
    reestimate_every: int = 1,
    seed: int = 0,
    normalize_layers: bool = False,
    initial: Tensor | None = None,
    importance_task: PruningTask | None = None,
    scored: dict[bytes, float] | None = None,
    keep_outputs: bool = False,
) -> PruningCurve:
    """Remove the least important ``step`` of all heads at a time, re-estimating importance (chapter 5).

    At point t the floor(t·step·n) least important heads are gated to 0 (:func:`manyheads.interventions.prune_mask`
    on the current importance, already removed heads ranked lowest) and the task's metric is measured.
    Importance (:func:`head_importance` with ``method``) is re-estimated on the pruned model every
    ``reestimate_every`` points (e.g. 2 for leave-one-out: every other step); in between the last ranking is reused.
    ``initial`` (n_layers, n_heads) replaces the first estimate, at full gates: e.g. a zero-ablation map's
    ``loss_delta``, which is leave-one-out importance already computed. ``importance_task`` (default: ``task``)
    estimates importance on other items than the ones scored, so the ranking is not fitted to the test items (the
    same model, e.g. a sentiment task's ``importance_task``). ``scored``, a dict shared by the curves of one task,
    scores identical gates once: every order starts with all heads and ends with none. Share it only between
    curves of the same task and an unchanged model. ``keep_outputs`` keeps the task's outputs at every point
    (``curve.outputs``, each scored afresh), for intervals over items (:func:`prunable_interval`). Works for any
    :class:`PruningTask`: the toy models, MiniLM and SmolLM2 alike.
    """
    if not 0 < step <= 1:
        raise ValueError(f"step must be in (0, 1], got {step}")
    if reestimate_every < 1:
        raise ValueError(f"reestimate_every must be >= 1, got {reestimate_every}")
    n_points = int(math.floor(max_fraction / step + 1e-9)) + 1
    gates = task.ones()
    removed_at = torch.full(task.grid, n_points, dtype=torch.long)
    fractions, scores, history, outputs = [], [], [], []
    importance, estimates = None, 0
    if initial is not None:
        if tuple(initial.shape) != task.grid:
            raise ValueError(f"initial importance must have shape {task.grid}, got {tuple(initial.shape)}")
        importance, estimates = initial.detach().float().clone(), 1
        history.append(importance.clone())
    for t in range(n_points):
        fraction = t * step
        if t > 0:
            if importance is None or (t > 1 and (t - 1) % reestimate_every == 0):
                importance = head_importance(
                    importance_task or task, method, gates, seed=seed, normalize_layers=normalize_layers
                )
                estimates += 1
                history.append(importance.clone())
            ranked = importance.masked_fill(gates == 0, -math.inf)
            keep = interventions.prune_mask(ranked, min(fraction, 1.0))
            newly = (~keep) & (gates != 0)
            removed_at[newly] = t
            gates = keep.float()
        fractions.append(float((gates == 0).float().mean()))
        key = None if scored is None else gates.bool().cpu().numpy().tobytes()  # gates are 0 or 1 here
        if keep_outputs:  # scored afresh, and the score shared with the curves that use the same ``scored``
            outputs.append(task.outputs(gates))
            score = task.metric(outputs[-1])
            if scored is not None:
                scored[key] = score
        elif scored is None:
            score = task.score(gates)
        else:
            if key not in scored:
                scored[key] = task.score(gates)
            score = scored[key]
        scores.append(score)
    return PruningCurve(method, fractions, scores, removed_at, seed, task.name, estimates, history, outputs)


def prunable_fraction(
    curve: PruningCurve, drop: float | None = None, floor: float | None = None, tolerance: float | None = None
) -> float:
    """The largest share of heads removed before the metric first falls more than ``drop`` below the unpruned score.

    Without ``floor``: ``drop`` is relative to the unpruned score (drop=0.05 for "within 5 %"), which says nothing
    when the task keeps most of its score with no heads at all. With ``floor`` (the score with every head removed,
    e.g. ``curve.floor``): ``drop`` is a share of the gap between the unpruned score and the floor ("within 10 % of
    what attention adds"); NaN when the floor is not below the unpruned score, since the task cannot show then how
    many heads can go (chapter 5). With ``tolerance`` instead of ``drop``: an absolute fall in the metric's own units
    (for :func:`next_token_task`, nats per token: 0.1 nats is a perplexity 1.105 times the unpruned one), which does
    not depend on how far below uniform guessing the floor happens to lie.
    """
    if (drop is None) == (tolerance is None):
        raise ValueError("give either drop (a share) or tolerance (an absolute fall of the metric), not both")
    if tolerance is not None:
        if tolerance < 0:
            raise ValueError(f"tolerance must be >= 0, got {tolerance}")
        threshold = curve.base - tolerance
    elif floor is not None:
        gap = curve.base - floor
        if not gap > 0:
            return math.nan
        threshold = curve.base - drop * gap
    else:
        threshold = curve.base - drop * abs(curve.base)
    best = 0.0
    for fraction, score in zip(curve.fractions, curve.scores):
        if score < threshold:
            break
        best = fraction
    return best


def prunable_interval(
    task: PruningTask,
    curve: PruningCurve,
    drop: float | None = None,
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
    tolerance: float | None = None,
) -> tuple[float, float]:
    """A bootstrap interval over items for :func:`prunable_fraction` read against the floor (chapter 5).

    ``curve`` must keep its outputs (``pruning_curve(..., keep_outputs=True)``) and run to 100 %. Each of ``n_boot``
    seeded resamples of the task's items rescores every point of the curve (the same resample for all points, the
    floor included), and the share of heads removed before the score first falls ``drop`` of the way to the floor
    is read off the resampled curve (with ``tolerance``: before it first falls ``tolerance`` below the resampled
    unpruned score, as in :func:`prunable_fraction`). The pruning order stays as it was chosen: the interval says how
    much the reading depends on which items were scored, not how the ranking would change.
    """
    if not curve.outputs or len(curve.outputs) != len(curve.scores):
        raise ValueError("the curve has no outputs: make it with pruning_curve(..., keep_outputs=True)")
    if math.isnan(curve.floor):
        raise ValueError("the curve must run to 100 % of heads removed, where its floor is measured")
    generator = torch.Generator().manual_seed(seed)
    resamples = [torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot)]
    boot = task.bootstrap_metrics(curve.outputs, resamples)  # (points, n_boot)
    values = []
    for column in boot.T.tolist():
        resampled = PruningCurve(curve.method, curve.fractions, column, curve.removed_at)
        if tolerance is not None:
            values.append(prunable_fraction(resampled, tolerance=tolerance))
        else:
            values.append(prunable_fraction(resampled, drop, floor=resampled.floor))
    values = torch.tensor(values, dtype=torch.float64)
    values = values[~values.isnan()]
    if values.numel() == 0:
        return math.nan, math.nan
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(values, q).tolist()
    return low, high


def pruned_per_layer(curve: PruningCurve, fraction: float) -> Tensor:
    """How many heads of each layer are gone once ``fraction`` of all heads is removed: (n_layers,) int."""
    points = [t for t, f in enumerate(curve.fractions) if f <= fraction + 1e-9]
    return (~curve.mask_at(points[-1])).sum(1)


# --------------------------------------------------------------------------------------------- joint ablation
@dataclass
class JointAblation:
    """Heads removed together against the sum of their removals one at a time (chapter 5). One entry per group.

    groups: the groups of (layer, head); joint: metric change with the whole group removed; additive: the sum of
    the group's single-head changes; interaction = joint - additive, with a paired bootstrap interval [low, high].
    An interaction below 0 (interval below 0) means the heads together cost more than their parts: each backs the
    others up, so that removing one alone shows little. Above 0: removing them together costs less than the parts.
    """

    groups: list[tuple[tuple[int, int], ...]]
    joint: Tensor
    additive: Tensor
    interaction: Tensor
    low: Tensor
    high: Tensor
    base: float
    level: float


def joint_ablation(
    task: PruningTask,
    groups: Sequence[Sequence[tuple[int, int]]],
    n_boot: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> JointAblation:
    """Zero-ablate each group of heads together, and each of its heads alone; compare (chapter 5).

    The interaction of a group is (score without the group - base) - sum over its heads of (score without the head -
    base): 0 when the heads' effects add up, negative when removing them together hurts more than the parts say
    (the heads back each other up). Its interval is a paired bootstrap over items (``n_boot`` seeded resamples,
    every output scored on the same resample).
    """
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("give at least one non-empty group of (layer, head) pairs")
    groups = [tuple((int(layer), int(head)) for layer, head in g) for g in groups]
    singles = sorted({head for g in groups for head in g})
    ones = task.ones()
    base_out = task.outputs(ones)
    single_out = dict(zip(singles, task.outputs_each_removed(ones, singles)))
    group_out = []
    for group in groups:
        gates = ones.clone()
        for head in group:
            gates[head] = 0.0
        group_out.append(task.outputs(gates))
    generator = torch.Generator().manual_seed(seed)
    resamples = [None, *(torch.randint(task.n_items, (task.n_items,), generator=generator) for _ in range(n_boot))]
    outputs = [base_out, *(single_out[h] for h in singles), *group_out]
    full = torch.tensor([task.metric(out) for out in outputs], dtype=torch.float64)[:, None]
    boot = task.bootstrap_metrics(outputs, resamples[1:]).double()
    values = torch.cat([full, boot], dim=1)  # (n_outputs, 1 + n_boot): column 0 on all items
    change = values[1:] - values[:1]
    single_change = dict(zip(singles, change[: len(singles)]))
    joint = change[len(singles) :]
    additive = torch.stack([sum(single_change[h] for h in group) for group in groups])
    interaction = joint - additive
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(interaction[:, 1:], q, dim=1)
    return JointAblation(groups, joint[:, 0], additive[:, 0], interaction[:, 0], low, high, float(values[0, 0]), level)


# --------------------------------------------------------------------------------------------- why not distil
def self_distillation_gradient(task: EncoderTask | ModelTask) -> tuple[float, float]:
    """(largest |∂loss/∂gate| for a self-distillation loss, the same for the task's own loss), both at gates = 1.

    The self-distillation loss is the squared distance between the gated model's outputs and the unpruned model's
    own (detached) outputs. It is 0 at gates = 1 and never negative, so gates = 1 is a minimum and the gradient
    there is exactly 0: it ranks no head. The task's loss against human labels is not at a minimum, so its
    gradient is not 0 (chapter 5).
    """
    ones = task.ones()
    target = task.outputs(ones)
    gates = ones.clone().requires_grad_(True)
    if isinstance(task, EncoderTask):
        with torch.enable_grad():
            mine = task.outputs_from_embeddings(task.embeddings_with_grad(gates))
    else:
        with torch.enable_grad(), interventions.gated(task.model, gates):
            mine = task.output_fn(task.model(task.inputs))
    (distil,) = torch.autograd.grad(((mine - target.to(mine)) ** 2).sum(), gates)
    own = head_importance(task, "gradient")
    return float(distil.abs().max()), float(own.max())
