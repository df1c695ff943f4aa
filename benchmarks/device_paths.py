"""The device-dependent code paths of chapters 4-7 and the interlude, timed on the GPU and on 2 CPU threads.

Each chapter puts its models and heavy loops on ``mh.device()`` (tests/package/test_device_placement.py checks
where they run). This script times those paths with no weight files, no tokenizer files, no notebooks and no
network: randomly initialised models of the real shapes (MiniLM: 6 layers × 12 heads, d_model 384; SmolLM2: 30
layers, 9 query / 3 K/V heads, d_model 576, vocabulary 49,152) and random token ids in place of text. Random
weights do the same arithmetic as trained ones, so the times stand for the chapters' (the numbers they compute do
not). Every path runs once untimed (warm-up: CUDA kernels, allocator, building the model), then once timed, on
the CPU and, when ``torch.cuda.is_available()``, on CUDA. The table and benchmarks/results/device_paths.json give
both, and the speed-up; without a GPU the GPU column says "absent".

Run it under two CPU cores, as the chapters are sized for: ``taskset -c 0,1 python benchmarks/device_paths.py``
(``--threads`` sets torch's CPU threads, default 2). ``--quick`` runs reduced sizes (a 2-layer encoder, a 4-layer
decoder, short texts) on one thread, to check that the script works.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from _report import arguments, parse, report

import manyheads as mh
from manyheads import analysis
from manyheads.analysis import language_model as lm
from manyheads.data import TwoRelationTask
from manyheads.models import TinyAttentionModel
from manyheads.models.bert import BertConfig, BertEncoder
from manyheads.models.llama import LlamaConfig, LlamaDecoder, generate_greedy
from manyheads.models.tokenizer import TokenBatch
from manyheads.training import TrainConfig, readout_accuracy, train, train_grid

MINILM = BertConfig(vocab_size=30522, d_model=384, n_layers=6, n_heads=12, d_ff=1536)
SMOLLM2 = LlamaConfig(
    vocab_size=49152,
    d_model=576,
    d_ff=1536,
    n_layers=30,
    n_heads=9,
    n_kv_heads=3,
    d_head=64,
    rms_norm_eps=1e-5,
    rope_theta=100000.0,
    eos_token_id=None,  # random weights: never stop early, so every run generates the same number of tokens
    bos_token_id=1,
)


class RandomPieces:
    """Stands in for MiniLM's tokenizer: each text becomes [CLS], word "w<n>" as piece 1000 + n, [SEP]."""

    def __call__(self, texts, pairs=None, max_length: int = 512) -> TokenBatch:
        rows = [[101, *(1000 + int(w[1:]) % 29000 for w in text.split()), 102][:max_length] for text in texts]
        width = max(map(len, rows))
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        tokens = [[str(t) for t in row] for row in rows]
        word_ids = [[None, *range(len(row) - 2), None] for row in rows]
        return TokenBatch(ids, mask, torch.zeros_like(ids), tokens, word_ids, [[0] * len(r) for r in rows])


def texts(n: int, words: int, seed: int) -> list[str]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(words // 2, words + 1, (n,), generator=generator).tolist()
    return [" ".join(f"w{int(x)}" for x in torch.randint(0, 5000, (k,), generator=generator)) for k in lengths]


# Built once per device, in the untimed warm-up run: the times are the chapters' work, not initialisation.
@functools.cache
def encoder(device, n_layers: int = MINILM.n_layers) -> BertEncoder:
    """MiniLM's shape; ``n_layers`` fewer for a quick run (as :func:`decoder`)."""
    torch.manual_seed(0)
    return BertEncoder(dataclasses.replace(MINILM, n_layers=n_layers)).eval().to(device)


@functools.cache
def decoder(device, n_layers: int = SMOLLM2.n_layers) -> LlamaDecoder:
    """SmolLM2's shape; ``n_layers`` fewer for a quick run (each layer costs the same, so the paths run as they do)."""
    torch.manual_seed(0)
    return LlamaDecoder(dataclasses.replace(SMOLLM2, n_layers=n_layers)).eval().to(device)


def paths(size: dict) -> list[tuple[str, str, Callable[[torch.device], object]]]:
    """(chapter, what, run(device)) for each device-dependent path, with the chapters' calls."""
    pieces = RandomPieces()
    sentences = texts(size["sentences"], 12, 0)
    docs, snippets = texts(size["docs"], 16, 1), texts(size["snippets"], 16, 2)
    similarities = torch.rand(size["docs"], size["docs"], generator=torch.Generator().manual_seed(3))
    ratings = torch.linspace(-3, 3, size["snippets"])
    toy = TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    toy_config = TrainConfig(steps=size["toy_steps"], seed=0)
    windows = torch.randint(3, SMOLLM2.vocab_size, size["windows"], generator=torch.Generator().manual_seed(4))
    windows[:, 0] = 1
    repeated = lm.repeated_random_tokens(
        size["rep_length"], vocabulary=torch.arange(3, 40000), bos_id=1, seeds=range(8)
    )

    def tasks(model):
        lee = analysis.lee_similarity_task(model, pieces, docs, similarities, max_tokens=16)
        n_fit = size["snippets"] * 3 // 4
        sentiment = analysis.sentiment_probe_task(
            model, pieces, snippets, ratings, n_fit=n_fit, n_eval=size["snippets"] - n_fit, seed=0
        )
        return lee, sentiment

    def ch4_attention(device):
        return mh.token_attentions(encoder(device, size["encoder_layers"]), pieces, sentences)

    def ch4_toys(device):
        task = TwoRelationTask(vocab_size=16, seq_len=10, offsets=(1, 2, 4))
        config = TrainConfig(steps=size["toy_steps"], batch_size=32, lr=1e-2, eval_every=50, eval_size=256)
        return train_grid(TinyAttentionModel.for_task, {"4 heads": (48, 4)}, task, config, (0, 1), device=device)

    def ch5_ablation(device):
        lee, _ = tasks(encoder(device, size["encoder_layers"]))
        return analysis.ablation_map(lee, "zero", n_boot=50)

    def ch5_gradient(device):
        _, sentiment = tasks(encoder(device, size["encoder_layers"]))
        return analysis.head_importance(sentiment, "gradient")

    def ch5_toy_curve(device):
        run = train(lambda: TinyAttentionModel.for_task(toy, 32, 8), toy, toy_config, device=device, progress=False)
        tokens, targets = toy.sample(512, torch.Generator().manual_seed(7))
        task = analysis.ModelTask(
            run.model.eval(),
            tokens,
            targets,
            metric=lambda logits, targets: float(readout_accuracy(logits, targets).mean()),
            loss=lambda logits, targets: F.cross_entropy(
                logits.flatten(0, 2), targets.flatten(), ignore_index=mh.IGNORE_INDEX
            ),
        )
        return analysis.pruning_curve(task, "loo", step=1 / 8)

    def interlude_generate(device):
        prompt = torch.randint(3, 40000, (1, 40), generator=torch.Generator().manual_seed(5))
        return generate_greedy(decoder(device, size["decoder_layers"]), prompt, max_new_tokens=size["new_tokens"])

    def interlude_losses(device):
        return lm.next_token_losses(decoder(device, size["decoder_layers"]), repeated)

    def ch6_attention(device):
        model = decoder(device, size["decoder_layers"])
        with torch.no_grad():
            out = model(windows.to(device), output_attentions=True)
        return mh.layer_metrics(torch.stack(out.attentions).cpu())

    def ch6_layer_ablation(device):
        return lm.layer_ablation_losses(decoder(device, size["decoder_layers"]), windows)

    def ch6_induction(device):
        config = mh.INDUCTION_RECIPE
        config = type(config)(**{**config.__dict__, "steps": size["induction_steps"]})
        return mh.train_induction_model(seed=0, config=config, device=device, progress=False)

    def ch7_decoding(device):
        model = decoder(device, size["decoder_layers"])
        records = []
        for variant in (mh.repeat_kv_heads(model, 9), model, mh.group_kv_heads(model, 1, "mean")):
            records += mh.decoding_speed(variant, size["contexts"], steps=4, warmup=1)
        return records

    def ch7_conversion(device):
        model = encoder(device, size["encoder_layers"])
        lee, sentiment = tasks(model)
        original = [task.embeddings(task.ones()) for task in (lee, sentiment)]
        return [
            mh.conversion_scores(mh.group_kv_heads(model, g, method, seed=0), (lee, sentiment), original)
            for g in (6, 1)
            for method in ("mean", "first", "random")
        ]

    def ch7_uptrain(device):
        pretrained = train(
            lambda: TinyAttentionModel.for_task(toy, 32, 8), toy, toy_config, device=device, progress=False
        ).model
        steps = (size["toy_steps"] // 20, size["toy_steps"] // 4)
        return [mh.uptrain(pretrained, toy, g, steps=steps, config=TrainConfig(lr=3e-3, seed=1)) for g in (2, 1)]

    return [
        ("4", "token_attentions (MiniLM)", ch4_attention),
        ("4", "train_grid (toy, 2 seeds)", ch4_toys),
        ("5", "ablation_map, Lee (MiniLM)", ch5_ablation),
        ("5", "head_importance, gradient", ch5_gradient),
        ("5", "toy: train + pruning_curve", ch5_toy_curve),
        ("interlude", "generate_greedy (SmolLM2)", interlude_generate),
        ("interlude", "next_token_losses, r + r", interlude_losses),
        ("6", "decoder attention + metrics", ch6_attention),
        ("6", "layer_ablation_losses", ch6_layer_ablation),
        ("6", "train_induction_model", ch6_induction),
        ("7", "decoding_speed, 9/3/1 K/V", ch7_decoding),
        ("7", "group_kv_heads + conversion", ch7_conversion),
        ("7", "toy: train + uptrain", ch7_uptrain),
    ]


def timed(run, device: torch.device) -> float:
    run(device)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


FULL = {
    "sentences": 150,
    "docs": 50,
    "snippets": 128,
    "toy_steps": 300,
    "rep_length": 64,
    "new_tokens": 32,
    "induction_steps": 400,
    "contexts": [64, 512, 2048],
    "windows": (2, 65),  # (rows, tokens) of the decoder's text: chapter 6's layer ablation runs over them
    "encoder_layers": 6,  # MiniLM's
    "decoder_layers": 30,  # SmolLM2's
}
SMALL = {
    "sentences": 8,
    "docs": 6,
    "snippets": 16,
    "toy_steps": 20,
    "rep_length": 8,
    "new_tokens": 2,
    "induction_steps": 10,
    "contexts": [16],
    "windows": (1, 9),
    "encoder_layers": 2,
    "decoder_layers": 4,
}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    args = parse(parser)
    torch.set_num_threads(1 if args.quick else args.threads)  # a quick run shares the machine with other work
    size = SMALL if args.quick else FULL
    gpu = torch.device("cuda") if torch.cuda.is_available() else None
    if gpu is None:
        print("No CUDA device: the GPU column is absent.\n")
    rows = []
    for chapter, what, run in paths(size):
        cpu_s = timed(run, torch.device("cpu"))
        gpu_s = timed(run, gpu) if gpu is not None else None
        rows.append(
            {
                "chapter": chapter,
                "path": what,
                "cpu_s": cpu_s,
                "gpu_s": gpu_s if gpu_s is not None else "absent",
                "speedup": cpu_s / gpu_s if gpu_s else "-",
            }
        )
        print(f"  {chapter:>9}  {what}: cpu {cpu_s:.2f} s" + (f", gpu {gpu_s:.2f} s" if gpu_s else ""), flush=True)
    device_name = torch.cuda.get_device_name() if gpu is not None else "none"
    print(f"\nGPU: {device_name}; CPU threads: {torch.get_num_threads()}\n")
    report("device_paths", ["chapter", "path", "cpu_s", "gpu_s", "speedup"], rows)


if __name__ == "__main__":
    main()
