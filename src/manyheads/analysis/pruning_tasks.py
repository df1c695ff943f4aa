"""The tasks chapter 5 prunes on: a model, a metric of its outputs and a loss that depends on the head gates.

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

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from manyheads import interventions
from manyheads.analysis.scoring import correlation_loss, fit_ridge, spearman, weighted_ranks, weighted_row_ranks
from manyheads.attention import padding_mask

__all__ = ["PruningTask", "ModelTask", "EncoderTask", "lee_similarity_task", "sentiment_probe_task", "next_token_task"]


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
                results.append(self.outputs(without_head(gates, head)))
            else:
                with interventions.ablated(self.model, head, mode="mean", means=means):
                    results.append(self.outputs(gates))
        return results

    def head_means(self) -> Tensor:
        """Each head's mean output over the task's items (for mean ablation): (n_layers, n_heads, d_head)."""
        raise NotImplementedError


def without_head(gates: Tensor, head: tuple[int, int]) -> Tensor:
    gates = gates.clone()
    gates[head] = 0.0
    return gates


def alive_heads(gates: Tensor) -> list[tuple[int, int]]:
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
            human = weighted_ranks(human_all[present], w)
            model = weighted_row_ranks(stacked[:, present], w)
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
