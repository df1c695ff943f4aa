"""Chapter 6 at full size: the layer hierarchy of MiniLM and SmolLM2, and SmolLM2's induction heads.

The chapter runs these measurements on small samples to stay within its two-minute budget; this script runs them
on more data and prints three tables (each also written as JSON to benchmarks/results/):

* ``layers_minilm``, per layer of all-MiniLM-L6-v2: mean over heads of the attention metrics (distance, entropy,
  share on [CLS]/[SEP], previous-token score) and the number of previous-token and positional heads, on
  ``--snippets`` movie-review sentences; the change of chapter 5's scores (Lee similarity on whole documents,
  held-out sentiment R²) when all heads of the layer are zeroed; and the held-out R² of a ridge probe for sentiment
  on the layer's mean-pooled output (row ``emb`` is the embeddings).
* ``layers_smollm2``, per layer of SmolLM2-135M-Instruct: the same attention metrics on ``--windows`` windows of
  ``--window`` tokens of Lee's background news (a BOS in front of each), and the increase of the next-token loss
  on those windows when all 9 heads of the layer are zeroed.
* ``layers_induction``: SmolLM2 on ``[BOS] + r + r`` (``--rows`` sequences, len(r) = ``--length``): the loss on the
  two copies, the best induction heads, and the second-copy loss with the top-k induction heads ablated against
  ``--random`` draws of k random other heads, for k = 5 and 10.

The toy induction model's full-size runs (five seeds) are ``benchmarks/induction.py``.

Run: .venv/bin/python benchmarks/layers.py [--threads 1] [--random 20] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from _report import report

import manyheads as mh
from manyheads.analysis import language_model as lm
from manyheads.analysis import pruning
from manyheads.data import lee_background_text, lee_documents, lee_similarities, movie_review_snippets
from manyheads.models import llama


def metric_columns(metrics: mh.LayerMetrics, layer: int) -> dict:
    return {
        "distance": metrics.distance[layer].mean().item(),
        "entropy": metrics.entropy[layer].mean().item(),
        "sink": metrics.sink[layer].mean().item(),
        "previous": metrics.previous[layer].mean().item(),
        "n_previous_heads": int(metrics.previous_token_heads()[layer].sum()),
        "n_positional_heads": int(metrics.positional_heads()[layer].sum()),
    }


def pooled_hidden_states(encoder, tokenizer, texts: list[str], batch_size: int = 64) -> torch.Tensor:
    """(n_layers + 1, len(texts), d_model): the embeddings and each layer's output, mean over real tokens."""
    pieces = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size])
        with torch.no_grad():
            hidden = torch.stack(encoder(batch, output_hidden_states=True).hidden_states)
        is_token = batch.attention_mask[None, :, :, None].float()
        pieces.append((hidden * is_token).sum(2) / is_token.sum(2))
    return torch.cat(pieces, dim=1)


def minilm_rows(args) -> list[dict]:
    encoder, tokenizer = mh.load_encoder()
    cfg = encoder.config
    texts, ratings = movie_review_snippets()
    picked = torch.randperm(len(texts), generator=torch.Generator().manual_seed(1))[: args.snippets].tolist()
    attns, tokens = mh.token_attentions(encoder, tokenizer, [texts[i] for i in picked])
    sinks = [torch.tensor([t in ("[CLS]", "[SEP]") for t in toks]) for toks in tokens]
    metrics = mh.layer_metrics(attns, sinks=sinks)
    lee = pruning.lee_similarity_task(encoder, tokenizer, lee_documents(), lee_similarities(), max_tokens=128)
    sentiment = pruning.sentiment_probe_task(
        encoder, tokenizer, texts, ratings, n_fit=args.n_fit, n_eval=args.n_eval, seed=0, alpha=1.0
    )
    base = {task.name: task.score(task.ones()) for task in (lee, sentiment)}

    def without_layer(task, layer: int) -> float:
        gates = task.ones()
        gates[layer] = 0.0
        return task.score(gates) - base[task.name]

    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(0)).tolist()
    fit_rows, eval_rows = order[: args.n_fit], order[args.n_fit : args.n_fit + args.n_eval]
    fit_x = pooled_hidden_states(encoder, tokenizer, [texts[i] for i in fit_rows])
    eval_x = pooled_hidden_states(encoder, tokenizer, [texts[i] for i in eval_rows])
    fit_y, eval_y = ratings[fit_rows].float(), ratings[eval_rows].float()
    probe = []
    for layer_fit, layer_eval in zip(fit_x, eval_x):
        scale = layer_fit.std(0).mean()
        weight, bias = pruning.fit_ridge(layer_fit / scale, fit_y, 1.0)
        predicted = layer_eval / scale @ weight + bias
        probe.append(float(1 - ((predicted - eval_y) ** 2).sum() / ((eval_y - eval_y.mean()) ** 2).sum()))
    rows = [{"layer": "emb", "probe_r2": probe[0]}]
    for layer in range(cfg.n_layers):
        rows.append(
            {
                "layer": layer,
                **metric_columns(metrics, layer),
                "lee_delta": without_layer(lee, layer),
                "sentiment_delta": without_layer(sentiment, layer),
                "probe_r2": probe[layer + 1],
            }
        )
    print(
        f"MiniLM: {args.snippets} sentences ({metrics.n_queries} queries); Lee ρ {base[lee.name]:.3f} on whole "
        f"documents, sentiment R² {base[sentiment.name]:.3f} on {args.n_eval} held-out sentences\n"
    )
    return rows


def smollm2_rows(args, decoder, tokenizer) -> list[dict]:
    cfg = decoder.config
    windows = lm.token_windows(
        tokenizer.encode(lee_background_text()).ids, args.window, bos_id=cfg.bos_token_id, n_windows=args.windows
    )
    attentions, losses = [], []
    with torch.no_grad():
        for rows in windows.split(4):
            out = decoder(rows, output_attentions=True)
            attentions.append(torch.stack(out.attentions))
            losses.append(F.cross_entropy(out.logits[:, :-1].transpose(1, 2), rows[:, 1:], reduction="none"))
    metrics = mh.layer_metrics(torch.cat(attentions, dim=1))
    base = torch.cat(losses).mean().item()
    ablated = lm.layer_ablation_losses(decoder, windows)  # (n_layers,): all heads of one layer zeroed
    rows = []
    for layer in range(cfg.n_layers):
        rows.append({"layer": layer, **metric_columns(metrics, layer), "loss_increase": ablated[layer].item() - base})
    print(f"SmolLM2: {args.windows} windows × {args.window} tokens of news, next-token loss {base:.3f} nats\n")
    return rows


def induction_rows(args, decoder, tokenizer) -> list[dict]:
    cfg = decoder.config
    repeated = lm.repeated_random_tokens(
        args.length, vocabulary=lm.ordinary_token_ids(tokenizer), bos_id=cfg.bos_token_id, seeds=range(args.rows)
    )
    scores, losses = [], []
    with torch.no_grad():
        for rows in repeated.split(4):
            out = decoder(rows, output_attentions=True)
            scores.append(torch.stack([mh.induction_score(a, args.length) for a in out.attentions]) * len(rows))
            losses.append(F.cross_entropy(out.logits[:, :-1].transpose(1, 2), rows[:, 1:], reduction="none"))
    induction = torch.stack(scores).sum(0) / len(repeated)  # (n_layers, n_heads)
    losses = torch.cat(losses)
    ranked = [divmod(int(i), cfg.n_heads) for i in induction.flatten().argsort(descending=True)]

    def second_copy_loss(heads) -> float:
        with mh.ablated(decoder, heads):
            return lm.next_token_losses(decoder, repeated)[:, args.length :].mean().item()

    rows = []
    for k in (5, 10):
        top = ranked[:k]
        others = [
            (layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads) if (layer, head) not in top
        ]
        draws = torch.Generator().manual_seed(0)
        random_losses = torch.tensor(
            [
                second_copy_loss([others[i] for i in torch.randperm(len(others), generator=draws)[:k].tolist()])
                for _ in range(args.random)
            ]
        )
        rows.append(
            {
                "k": k,
                "top_heads": " ".join(f"{layer}.{head}" for layer, head in top),
                "top_scores": " ".join(f"{induction[h]:.2f}" for h in top),
                "first_copy": losses[:, : args.length].mean().item(),
                "second_copy": losses[:, args.length :].mean().item(),
                "top_ablated": second_copy_loss(top),
                "random_mean": random_losses.mean().item(),
                "random_min": random_losses.min().item(),
                "random_max": random_losses.max().item(),
                "n_heads_0.5": int((induction >= 0.5).sum()),
            }
        )
    print(f"SmolLM2 induction: {args.rows} sequences, len(r) = {args.length}, {args.random} random draws per k\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=1000, help="movie-review sentences for MiniLM's metrics")
    parser.add_argument("--n-fit", type=int, default=2000, help="sentences the sentiment probes are fitted on")
    parser.add_argument("--n-eval", type=int, default=1000, help="held-out sentences they are scored on")
    parser.add_argument("--windows", type=int, default=8, help="windows of news text for SmolLM2")
    parser.add_argument("--window", type=int, default=128, help="tokens per window")
    parser.add_argument("--rows", type=int, default=8, help="repeated random sequences for SmolLM2's induction")
    parser.add_argument("--length", type=int, default=100, help="len(r) of [BOS] + r + r")
    parser.add_argument("--random", type=int, default=20, help="random draws of k heads")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (on a busy machine use 1)")
    parser.add_argument("--quick", action="store_true", help="a small run to check the script (not for figures)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.snippets, args.n_fit, args.n_eval, args.windows, args.window = 16, 64, 32, 1, 32
        args.rows, args.length, args.random = 2, 20, 2
    suffix = "_quick" if args.quick else ""
    start = time.perf_counter()
    minilm = minilm_rows(args)
    columns = ["layer", "distance", "entropy", "sink", "previous", "n_previous_heads", "n_positional_heads"]
    columns += ["lee_delta", "sentiment_delta", "probe_r2"]
    for row in minilm:
        for column in columns:
            row.setdefault(column, "")
    report(f"layers_minilm{suffix}", columns, minilm)
    decoder, tokenizer = llama.load_decoder()
    smol = smollm2_rows(args, decoder, tokenizer)
    report(f"layers_smollm2{suffix}", list(smol[0]), smol)
    induction = induction_rows(args, decoder, tokenizer)
    report(f"layers_induction{suffix}", list(induction[0]), induction)
    print(
        f"\nall parts: {time.perf_counter() - start:.0f} s; uniform guess over the vocabulary: "
        f"{math.log(decoder.config.vocab_size):.2f} nats"
    )


if __name__ == "__main__":
    main()
