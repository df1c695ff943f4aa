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
* ``layers_induction``: SmolLM2's best induction heads, chosen on ``[BOS] + r + r`` (``--rows`` sequences, len(r) =
  ``--length``) and tested on ``--test-rows`` other sequences whose copies lie 1 to ``--max-shift`` tokens apart
  (position arithmetic cannot find the target there): their content and fixed-offset scores, the held-out
  second-copy loss with the top-k heads ablated (95 % bootstrap interval over sequences) against ``--random`` sets
  of k heads drawn from the same layers, and the same ablations' cost on the news windows (specificity), for k = 5
  and 10.

Only ``benchmarks/results/layers_induction.json`` is committed (a run with ``--only-induction``); chapter 6 quotes it.
The other two tables have no committed run, so the chapter's per-head metrics, layer removal and probe stand at the
chapter's size alone (review B-26).

The toy induction model's full-size runs (five seeds) are ``benchmarks/induction.py``, and its budget checks (three
seeds at five times the steps) ``benchmarks/budget_check_06_layer_hierarchy.py``.

Run: .venv/bin/python benchmarks/layers.py [--threads 1] [--random 20] [--quick] [--only-induction]
``--quick`` makes all three tables on one thread at sizes that only check that the script works (8 of Lee's
documents, a few short sequences and windows, one random draw per k).
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from _report import arguments, parse, report

import manyheads as mh
from manyheads import analysis
from manyheads.analysis import language_model as lm
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
    documents, similarities, lee_tokens = lee_documents(), lee_similarities(), 128
    if args.quick:  # a quick run checks that the script works: 8 of Lee's 50 documents, 32 word pieces of each
        documents, similarities, lee_tokens = documents[:8], similarities[:8, :8], 32
    lee = analysis.lee_similarity_task(encoder, tokenizer, documents, similarities, max_tokens=lee_tokens)
    sentiment = analysis.sentiment_probe_task(
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
        weight, bias = analysis.fit_ridge(layer_fit / scale, fit_y, 1.0)
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


def smollm2_rows(args, decoder, tokenizer) -> tuple[list[dict], torch.Tensor]:
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
    return rows, windows


def induction_rows(args, decoder, tokenizer, windows: torch.Tensor) -> list[dict]:
    """Induction heads chosen on ``--rows`` sequences [BOS] + r + r and tested on ``--test-rows`` others whose copies
    lie 1 to ``--max-shift`` tokens apart (mh.shifted_repeats): content vs fixed-offset scores, the held-out
    second-copy loss with the top-k heads ablated against ``--random`` sets drawn from the same layers, and the same
    ablations' cost on the news windows (specificity); 95 % bootstrap intervals over sequences and tokens."""
    cfg = decoder.config
    vocabulary = lm.ordinary_token_ids(tokenizer)
    repeated = lm.repeated_random_tokens(
        args.length, vocabulary=vocabulary, bos_id=cfg.bos_token_id, seeds=range(args.rows)
    )
    scores = []
    with torch.no_grad():
        for rows in repeated.split(4):
            out = decoder(rows, output_attentions=True)
            scores.append(torch.stack([mh.induction_score(a, args.length) for a in out.attentions]) * len(rows))
    induction = torch.stack(scores).sum(0) / len(repeated)  # (n_layers, n_heads), on the selection rows
    ranked = [divmod(int(i), cfg.n_heads) for i in induction.flatten().argsort(descending=True)]

    shifted, second_start = mh.shifted_repeats(
        args.length,
        vocabulary=vocabulary,
        bos_id=cfg.bos_token_id,
        seeds=range(1000, 1000 + args.test_rows),
        max_shift=args.max_shift,
    )
    seq = shifted.shape[1]
    second_copy = torch.arange(seq)[None, :] >= second_start[:, None]
    back = args.length - 1
    content, offset = [], []
    with torch.no_grad():
        for rows, mask in zip(shifted.split(4), second_copy.split(4)):
            out = decoder(rows, output_attentions=True)
            content.append(torch.stack([mh.token_induction_score(a, rows, mask) for a in out.attentions]) * mask.sum())
            queries = torch.arange(back, seq)
            keep = mask[:, None, back:]
            offset.append(torch.stack([(a[..., queries, queries - back] * keep).sum((0, 2)) for a in out.attentions]))
    content_map = torch.stack(content).sum(0) / second_copy.sum()
    offset_map = torch.stack(offset).sum(0) / second_copy.sum()

    def losses(heads=()):
        with mh.ablated(decoder, list(heads)):
            copy = lm.next_token_losses(decoder, shifted)
            news = lm.next_token_losses(decoder, windows).flatten()
        return torch.stack([row[s : seq - 1].mean() for row, s in zip(copy, second_start.tolist())]), news

    intact_copy, intact_news = losses()
    rows = []
    for k in (5, 10):
        top = ranked[:k]
        copy, news = losses(top)
        d_copy, d_news = mh.bootstrap_mean(copy - intact_copy), mh.bootstrap_mean(news - intact_news)
        controls = [losses(heads) for heads in mh.same_layer_heads(top, cfg.n_heads, args.random, seed=0)]
        c_copy = torch.tensor([(c - intact_copy).mean().item() for c, _ in controls])
        c_news = torch.tensor([(n - intact_news).mean().item() for _, n in controls])
        rows.append(
            {
                "k": k,
                "top_heads": " ".join(f"{layer}.{head}" for layer, head in top),
                "top_scores": " ".join(f"{induction[h]:.2f}" for h in top),
                "content_scores": " ".join(f"{content_map[h]:.2f}" for h in top),
                "offset_scores": " ".join(f"{offset_map[h]:.3f}" for h in top),
                "second_copy": intact_copy.mean().item(),
                "top_copy_delta": d_copy[0],
                "top_copy_ci": f"[{d_copy[1]:+.2f}, {d_copy[2]:+.2f}]",
                "same_layer_copy_mean": c_copy.mean().item(),
                "same_layer_copy_range": f"[{c_copy.min():+.2f}, {c_copy.max():+.2f}]",
                "news_loss": intact_news.mean().item(),
                "top_news_delta": d_news[0],
                "top_news_ci": f"[{d_news[1]:+.3f}, {d_news[2]:+.3f}]",
                "same_layer_news_range": f"[{c_news.min():+.3f}, {c_news.max():+.3f}]",
                "n_heads_0.5": int((induction >= 0.5).sum()),
            }
        )
    print(
        f"SmolLM2 induction: heads chosen on {args.rows} sequences (len(r) = {args.length}), tested on "
        f"{args.test_rows} others with copies 1-{args.max_shift} tokens apart; {args.random} same-layer draws per k\n"
    )
    return rows


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--snippets", type=int, default=1000, help="movie-review sentences for MiniLM's metrics")
    parser.add_argument("--n-fit", type=int, default=2000, help="sentences the sentiment probes are fitted on")
    parser.add_argument("--n-eval", type=int, default=1000, help="held-out sentences they are scored on")
    parser.add_argument("--windows", type=int, default=8, help="windows of news text for SmolLM2")
    parser.add_argument("--window", type=int, default=128, help="tokens per window")
    parser.add_argument("--rows", type=int, default=8, help="repeated random sequences for SmolLM2's induction")
    parser.add_argument("--length", type=int, default=100, help="len(r) of [BOS] + r + r")
    parser.add_argument("--test-rows", type=int, default=32, help="held-out sequences with shifted copies")
    parser.add_argument("--max-shift", type=int, default=50, help="longest gap between the two copies")
    parser.add_argument("--random", type=int, default=20, help="random draws of k heads from the same layers")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (on a busy machine use 1)")
    parser.add_argument(
        "--only-induction", action="store_true", help="only the SmolLM2 induction table (and the news windows it needs)"
    )
    args = parse(parser)
    if args.quick:
        args.snippets, args.n_fit, args.n_eval, args.windows, args.window = 16, 32, 16, 1, 8
        args.rows, args.length, args.random, args.test_rows, args.max_shift = 2, 8, 1, 2, 3
        args.threads = args.threads or 1  # a quick run shares the machine with other work
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if not args.only_induction:
        minilm = minilm_rows(args)
        columns = ["layer", "distance", "entropy", "sink", "previous", "n_previous_heads", "n_positional_heads"]
        columns += ["lee_delta", "sentiment_delta", "probe_r2"]
        for row in minilm:
            for column in columns:
                row.setdefault(column, "")
        report("layers_minilm", columns, minilm)
    decoder, tokenizer = llama.load_decoder()
    smol, windows = smollm2_rows(args, decoder, tokenizer)
    if not args.only_induction:
        report("layers_smollm2", list(smol[0]), smol)
    induction = induction_rows(args, decoder, tokenizer, windows)
    settings = ("rows", "length", "test_rows", "max_shift", "random", "windows", "window")
    report("layers_induction", list(induction[0]), induction, meta={k: getattr(args, k) for k in settings})
    print(
        f"\nall parts: {time.perf_counter() - start:.0f} s; uniform guess over the vocabulary: "
        f"{math.log(decoder.config.vocab_size):.2f} nats"
    )


if __name__ == "__main__":
    main()
