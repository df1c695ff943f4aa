"""Chapter 7 at full size: the KV cache and tokens per second of SmolLM2 with 9, 3 and 1 K/V heads, and conversions.

Four tables, each also written as JSON to benchmarks/results/ (one file per table):

1. ``kv_cache_decoding``: cache bytes (measured, float32, and by the formula), each variant's own parameter count, the
   bytes a step reads (:func:`~manyheads.analysis.kv_cache.decoding_step_bytes` of each variant) and the speed-up
   they predict against 9 K/V heads twice: 16-bit with the cache read once (how a served model runs) and as timed
   here (float32, the cache copied at every step: read three times); a timing is compared with the as-run one. And
   tokens per second of single-token decoding steps after longer contexts than the chapter's, timed in
   rounds (:func:`~manyheads.analysis.kv_cache.compare_decoding`) with a 95 % bootstrap interval over them and the
   paired difference from 9 K/V heads with its own interval and verdict ("faster", "slower", "inconclusive
   here"), on the CPU and on CUDA when there is one. 9 K/V heads = the trained 3 repeated (same outputs), 1 =
   mean-pooled. The JSON's meta names the CPU, the GPU (if any) and the date: chapter 7 quotes a GPU row from here,
   never from its own CPU build.
2. ``kv_cache_minilm_conversion``: MiniLM's K/V heads grouped into G = 12, 6, 4, 3, 2, 1 (mean, first, and random
   groups drawn --draws times: mean and standard deviation) scored on chapter 5's tasks with all of each Lee
   document (128 word pieces) and more held-out sentences.
3. ``kv_cache_smollm2_loss``: SmolLM2's next-token loss on more Lee background text, 3 K/V heads and 3 → 1.
4. ``kv_cache_uptraining``: the toy model converted to one K/V head and uptrained, against the same architecture
   trained from scratch with the same recipe, batches and steps, one row per seed.

Run: .venv/bin/python benchmarks/kv_cache.py [--contexts 64 512 2048 4096] [--steps 4] [--rounds 10] [--threads N]
     [--tables uptraining decoding smollm2_loss minilm_conversion]
``--quick`` runs all four tables on one thread at sizes that only check that the script works (one context of 16
tokens, one seed of a few steps, 8 of Lee's documents, G = 12, 6 and 1).
"""

from __future__ import annotations

import dataclasses
import statistics

import torch
from _report import arguments, parse, report

import manyheads as mh
from manyheads import analysis
from manyheads.analysis import language_model as lm
from manyheads.data import TwoRelationTask, lee_documents, lee_similarities, movie_review_snippets
from manyheads.models import TinyAttentionModel, llama
from manyheads.training import TrainConfig, train

GROUPS = (12, 6, 4, 3, 2, 1)
METHODS = {"mean": "mean", "first": "first", "random groups": "random"}
TABLES = ("uptraining", "decoding", "smollm2_loss", "minilm_conversion")


def decoding(decoder, contexts, steps, rounds) -> list[dict]:
    variants = {9: mh.repeat_kv_heads(decoder, 9), 3: decoder, 1: mh.group_kv_heads(decoder, 1, "mean")}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for device in devices:
        records = mh.compare_decoding(list(variants.values()), contexts, steps=steps, rounds=rounds, device=device)
        cache = {(r.n_kv_heads, r.context): r for r in records}
        for s in mh.decoding_comparison(records, reference=9):
            r = cache[s.n_kv_heads, s.context]
            # Each variant's own weights (9 K/V heads copy W_K and W_V: 147.8 M parameters; 1: 130.1 M), 16-bit and
            # read in place, and as timed here: float32 with the cache copied at every step (read, read and written).
            pair = {g: variants[g] for g in (9, s.n_kv_heads)}
            step = {g: mh.decoding_step_bytes(m, s.context) for g, m in pair.items()}
            as_run = {
                g: mh.decoding_step_bytes(m, s.context, bytes_per_element=4, cache_passes=3) for g, m in pair.items()
            }
            rows.append(
                {
                    "device": r.device,
                    "threads": r.threads,
                    "kv_heads": s.n_kv_heads,
                    "context": s.context,
                    "cache_MiB": r.cache_bytes / 2**20,
                    "formula_MiB": r.formula_bytes / 2**20,
                    "equal": all(x.cache_bytes == x.formula_bytes for x in records),
                    "parameters": step[s.n_kv_heads].n_parameters,
                    "step_MiB_16bit": step[s.n_kv_heads].total / 2**20,
                    "predicted_vs_9_16bit": mh.predicted_speedup(step[s.n_kv_heads], step[9]),
                    "step_MiB_as_run": as_run[s.n_kv_heads].total / 2**20,
                    "predicted_vs_9_as_run": mh.predicted_speedup(as_run[s.n_kv_heads], as_run[9]),
                    "tokens_per_s": s.tokens_per_s[0],
                    "tokens_per_s_low": s.tokens_per_s[1],
                    "tokens_per_s_high": s.tokens_per_s[2],
                    "minus_9": s.difference[0],
                    "minus_9_low": s.difference[1],
                    "minus_9_high": s.difference[2],
                    "measured_vs_9": s.ratio,
                    "verdict": "reference"
                    if s.n_kv_heads == 9
                    else mh.compare_words(*s.difference, better="faster", worse="slower", neutral="inconclusive here"),
                }
            )
    return rows


def minilm(n_fit: int, n_eval: int, lee_docs: int | None, lee_tokens: int, draws: int, groups=GROUPS) -> list[dict]:
    encoder, tokenizer = mh.load_encoder()
    texts, ratings = movie_review_snippets()
    documents, similarities = lee_documents()[:lee_docs], lee_similarities()[:lee_docs, :lee_docs]
    lee = analysis.lee_similarity_task(encoder, tokenizer, documents, similarities, max_tokens=lee_tokens)
    sentiment = analysis.sentiment_probe_task(encoder, tokenizer, texts, ratings, n_fit=n_fit, n_eval=n_eval, seed=0)
    tasks = (lee, sentiment)
    original = [task.embeddings(task.ones()) for task in tasks]
    rows = []
    for g in groups:
        for label, method in METHODS.items():
            seeds = range(draws) if method == "random" and g not in (12, 1) else range(1)
            scores = [
                (*rho_r2, cosine)
                for rho_r2, cosine in (
                    mh.conversion_scores(mh.group_kv_heads(encoder, g, method, seed=s), tasks, original) for s in seeds
                )
            ]
            row = {"kv_heads": g, "method": label, "draws": len(scores)}
            for i, name in enumerate(("lee_rho", "sentiment_r2", "cosine")):
                values = [v[i] for v in scores]
                row[name] = statistics.mean(values)
                row[f"{name}_sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
            rows.append(row)
    return rows


def smollm2_loss(decoder, tokenizer, windows: int, window: int) -> list[dict]:
    ids = lm.token_windows(
        tokenizer.encode(mh.lee_background_text()).ids, window, bos_id=decoder.config.bos_token_id, n_windows=windows
    )
    models = {
        "3 K/V heads (as trained)": decoder,
        "1 K/V head, mean-pooled": mh.group_kv_heads(decoder, 1, "mean"),
        "1 K/V head, first kept": mh.group_kv_heads(decoder, 1, "first"),
    }
    return [
        {"model": name, "tokens": ids.shape[0] * (ids.shape[1] - 1), "loss": lm.next_token_losses(m, ids).mean().item()}
        for name, m in models.items()
    ]


def uptraining(seeds, pretrain_steps: int, uptrain_steps: int) -> list[dict]:
    """Chapter 7's toy comparison at more seeds: converted to one K/V head and uptrained, against the same
    architecture trained from scratch with the same recipe (pre-training's), batches and steps."""
    toy = TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    recipe = TrainConfig(eval_every=10)

    def fresh():
        model = TinyAttentionModel.for_task(toy, 32, 8)
        model.attention = mh.MultiHeadAttention(32, 8, n_kv_heads=1)
        return model

    rows = []
    for seed in seeds:
        pretrained = train(
            lambda: TinyAttentionModel.for_task(toy, 32, 8),
            toy,
            dataclasses.replace(recipe, steps=pretrain_steps, seed=seed),
            device="cpu",
            progress=False,
        ).model
        steps = (pretrain_steps // 20, uptrain_steps)
        run = mh.uptrain(
            pretrained, toy, 1, steps=steps, config=dataclasses.replace(recipe, seed=seed + 1), scratch=fresh
        )
        rows.append(
            {
                "seed": seed,
                "converted_acc": run.converted[1],
                "uptrained_acc_5pct": run.after[0][1],
                "scratch_acc_5pct": run.scratch[0][1],
                "uptrained_acc_all": run.after[1][1],
                "scratch_acc_all": run.scratch[1][1],
                "uptrained_step_0.99": run.first_step_at(0.99),
                "scratch_step_0.99": run.first_step_at(0.99, scratch=True),
            }
        )
    return rows


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--contexts", type=int, nargs="+", default=[64, 512, 2048, 4096])
    parser.add_argument("--steps", type=int, default=4, help="timed steps per model in each round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--draws", type=int, default=10, help="random K/V groupings per conversion")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--n-fit", type=int, default=2000)
    parser.add_argument("--n-eval", type=int, default=1000)
    parser.add_argument("--lm-windows", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--tables", nargs="+", choices=TABLES, default=list(TABLES), help="which tables to run (default: all four)"
    )
    args = parse(parser)
    pretrain, uptrain, window, lee_docs, lee_tokens, groups = 400, 100, 128, None, 128, GROUPS  # None: all 50
    if args.quick:  # every table, at sizes that only check that it runs, on one thread (the machine is shared)
        args.contexts, args.steps, args.rounds, args.draws, args.threads = [16], 1, 2, 1, 1
        args.n_fit, args.n_eval, args.lm_windows, args.seeds = 24, 12, 1, 1
        pretrain, uptrain, window, lee_docs, lee_tokens = 20, 10, 16, 8, 16
        groups = (12, 6, 1)  # no grouping, random groups (drawn only for 1 < G < 12), one K/V head
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if "uptraining" in args.tables:  # the cheapest table first: a run stopped early still leaves it
        report(
            "kv_cache_uptraining",
            ["seed", "converted_acc", "uptrained_acc_5pct", "scratch_acc_5pct", "uptrained_acc_all", "scratch_acc_all",
             "uptrained_step_0.99", "scratch_step_0.99"],
            uptraining(range(args.seeds), pretrain, uptrain),
        )  # fmt: skip
    if not {"decoding", "smollm2_loss", "minilm_conversion"} & set(args.tables):
        return
    decoder, tokenizer = llama.load_decoder()
    gpu = {"gpu": torch.cuda.get_device_name(0)} if torch.cuda.is_available() else {}
    if "decoding" in args.tables:
        report(
            "kv_cache_decoding",
            ["device", "threads", "kv_heads", "context", "parameters", "cache_MiB", "step_MiB_16bit",
             "predicted_vs_9_16bit", "predicted_vs_9_as_run", "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high",
             "minus_9_low", "minus_9_high", "measured_vs_9", "verdict"],
            decoding(decoder, args.contexts, args.steps, args.rounds),
            meta={**gpu, "rounds": args.rounds, "steps": args.steps},
        )  # fmt: skip
    if "smollm2_loss" in args.tables:
        report(
            "kv_cache_smollm2_loss",
            ["model", "tokens", "loss"],
            smollm2_loss(decoder, tokenizer, args.lm_windows, window),
        )
    del decoder
    if "minilm_conversion" in args.tables:
        report(
            "kv_cache_minilm_conversion",
            ["kv_heads", "method", "draws", "lee_rho", "lee_rho_sd", "sentiment_r2", "sentiment_r2_sd", "cosine",
             "cosine_sd"],
            minilm(args.n_fit, args.n_eval, lee_docs, lee_tokens, args.draws, groups),
        )  # fmt: skip


if __name__ == "__main__":
    main()
