"""Chapter 7 at full size: the KV cache and tokens per second of SmolLM2 with 9, 3 and 1 K/V heads, and conversions.

Four tables, each also written as JSON to benchmarks/results/ (one file per table):

1. ``kv_cache_decoding``: cache bytes (measured and by the formula) and tokens per second of single-token decoding
   steps after longer contexts than the chapter's, via :func:`manyheads.analysis.kv_cache.decoding_speed`, on the
   CPU and on CUDA when there is one. 9 K/V heads = the trained 3 repeated (same outputs), 1 = mean-pooled.
2. ``kv_cache_minilm_conversion``: MiniLM's K/V heads grouped into G = 12, 6, 4, 3, 2, 1 (mean, first, random
   groups) scored on chapter 5's tasks with all of each Lee document (128 word pieces) and more held-out sentences.
3. ``kv_cache_smollm2_loss``: SmolLM2's next-token loss on more Lee background text, 3 K/V heads and 3 → 1.
4. ``kv_cache_uptraining``: the toy model converted and uptrained, for several seeds.

Run: .venv/bin/python benchmarks/kv_cache.py [--contexts 64 512 2048 4096] [--steps 8] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from _report import report

import manyheads as mh
from manyheads.analysis import language_model as lm
from manyheads.analysis import pruning
from manyheads.data import TwoRelationTask, lee_documents, lee_similarities, movie_review_snippets
from manyheads.models import TinyAttentionModel, llama
from manyheads.training import TrainConfig, train

GROUPS = (12, 6, 4, 3, 2, 1)
METHODS = {"mean": "mean", "first": "first", "random groups": "random"}


def decoding(decoder, contexts, steps) -> list[dict]:
    variants = {9: mh.repeat_kv_heads(decoder, 9), 3: decoder, 1: mh.group_kv_heads(decoder, 1, "mean")}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows = []
    for device in devices:
        for model in variants.values():
            for r in mh.decoding_speed(model.to(device), contexts, steps=steps, warmup=2):
                rows.append(
                    {
                        "device": r.device,
                        "threads": r.threads,
                        "kv_heads": r.n_kv_heads,
                        "context": r.context,
                        "cache_MiB": r.cache_bytes / 2**20,
                        "formula_MiB": r.formula_bytes / 2**20,
                        "equal": r.cache_bytes == r.formula_bytes,
                        "tokens_per_s": r.tokens_per_s,
                    }
                )
            model.to("cpu")
    return rows


def minilm(n_fit: int, n_eval: int, lee_tokens: int) -> list[dict]:
    encoder, tokenizer = mh.load_encoder()
    texts, ratings = movie_review_snippets()
    lee = pruning.lee_similarity_task(encoder, tokenizer, lee_documents(), lee_similarities(), max_tokens=lee_tokens)
    sentiment = pruning.sentiment_probe_task(encoder, tokenizer, texts, ratings, n_fit=n_fit, n_eval=n_eval, seed=0)
    tasks = (lee, sentiment)
    original = [task.embeddings(task.ones()) for task in tasks]
    rows = []
    for g in GROUPS:
        for label, method in METHODS.items():
            (rho, r2), cosine = mh.conversion_scores(mh.group_kv_heads(encoder, g, method, seed=0), tasks, original)
            rows.append({"kv_heads": g, "method": label, "lee_rho": rho, "sentiment_r2": r2, "cosine": cosine})
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
    toy = TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    rows = []
    for g in (2, 1):
        runs = []
        for seed in seeds:
            pretrained = train(
                lambda: TinyAttentionModel.for_task(toy, 32, 8),
                toy,
                TrainConfig(steps=pretrain_steps, seed=seed),
                device="cpu",
                progress=False,
            ).model
            steps = (pretrain_steps // 20, uptrain_steps)
            runs.append(mh.uptrain(pretrained, toy, g, steps=steps, config=TrainConfig(lr=3e-3, seed=seed + 1)))
        rows.append(
            {
                "kv_heads": g,
                "seeds": len(runs),
                "mha_loss": statistics.mean(r.original[0] for r in runs),
                "converted_loss": statistics.mean(r.converted[0] for r in runs),
                "loss_after_5pct": statistics.mean(r.after[0][0] for r in runs),
                "loss_after_all": statistics.mean(r.after[1][0] for r in runs),
                "recovered_5pct": statistics.mean(r.recovered(0) for r in runs),
                "recovered_all": statistics.mean(r.recovered(1) for r in runs),
                "recovered_5pct_min": min(r.recovered(0) for r in runs),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[64, 512, 2048, 4096])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument("--n-fit", type=int, default=2000)
    parser.add_argument("--n-eval", type=int, default=1000)
    parser.add_argument("--lm-windows", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    decoder, tokenizer = llama.load_decoder()
    report(
        "kv_cache_decoding",
        ["device", "threads", "kv_heads", "context", "cache_MiB", "formula_MiB", "equal", "tokens_per_s"],
        decoding(decoder, args.contexts, args.steps),
    )
    report("kv_cache_smollm2_loss", ["model", "tokens", "loss"], smollm2_loss(decoder, tokenizer, args.lm_windows, 128))
    del decoder
    report(
        "kv_cache_minilm_conversion",
        ["kv_heads", "method", "lee_rho", "sentiment_r2", "cosine"],
        minilm(args.n_fit, args.n_eval, 128),
    )
    report(
        "kv_cache_uptraining",
        ["kv_heads", "seeds", "mha_loss", "converted_loss", "loss_after_5pct", "loss_after_all", "recovered_5pct",
         "recovered_all", "recovered_5pct_min"],
        uptraining(range(args.seeds), 400, 400),
    )  # fmt: skip


if __name__ == "__main__":
    main()
