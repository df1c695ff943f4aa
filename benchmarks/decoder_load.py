"""How long loading the decoder of chapters 6-7 takes: SmolLM2-135M-Instruct's GGUF file → config, float32 state dict
and tokenizer (manyheads.models.gguf_file.read_gguf), on CPU, phase by phase.

The issue's budget is 10 s on the course's 2-core machine. The sha256 is hashed afresh every repeat (in a chapter
it is hashed once per process). Run: .venv/bin/python benchmarks/decoder_load.py [--repeats R]
"""

from __future__ import annotations

import time

import torch
from _report import arguments, parse, report
from gguf import GGUFReader
from gguf.quants import dequantize

from manyheads.models import gguf_file
from manyheads.models.checkpoints import _sha256_cached
from manyheads.models.gguf_container import read_container


def _phases() -> dict[str, float]:
    times = {}
    _sha256_cached.cache_clear()
    start = time.perf_counter()
    path = gguf_file.smollm2_gguf_path()
    times["locate + sha256"] = time.perf_counter() - start
    start = time.perf_counter()
    GGUFReader(path)
    times["gguf.GGUFReader (not used: for comparison)"] = time.perf_counter() - start
    start = time.perf_counter()
    metadata, tensors = read_container(path)
    times["read_container (metadata, tensor table)"] = time.perf_counter() - start
    start = time.perf_counter()
    for tensor in tensors:
        dequantize(tensor.data, tensor.tensor_type)
    times["dequantise 272 tensors"] = time.perf_counter() - start
    start = time.perf_counter()
    gguf_file.gguf_tokenizer(metadata)
    times["tokenizer"] = time.perf_counter() - start
    _sha256_cached.cache_clear()
    start = time.perf_counter()
    gguf_file.read_gguf()
    times["read_gguf() in all"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse(parser)
    runs = [_phases() for _ in range(1 if args.quick else args.repeats)]
    rows = [
        {
            "phase": phase,
            "median_s": sorted(r[phase] for r in runs)[len(runs) // 2],
            "min_s": min(r[phase] for r in runs),
            "threads": torch.get_num_threads(),
        }
        for phase in runs[0]
    ]
    report("decoder_load", ["phase", "median_s", "min_s", "threads"], rows)


if __name__ == "__main__":
    main()
