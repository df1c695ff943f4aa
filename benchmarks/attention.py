"""Forward time of manyheads.MultiHeadAttention against torch.nn.MultiheadAttention (same weights, CPU).

The course's module is written to be read (explicit split/merge, weights always returned); this measures what
that costs. Run: .venv/bin/python benchmarks/attention.py [--quick] [--results DIR]
"""

from __future__ import annotations

import time

import torch
from _report import arguments, parse, report

from manyheads.attention import MultiHeadAttention

CASES = [  # (d_model, n_heads, batch, seq)
    (64, 1, 32, 16),
    (64, 4, 32, 16),
    (384, 12, 8, 128),
    (512, 8, 8, 128),
    (512, 32, 8, 128),
]


def _median_seconds(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    args = parse(arguments(__doc__))
    cases, repeats = (CASES[:2], 3) if args.quick else (CASES, 30)
    torch.manual_seed(0)
    rows = []
    with torch.inference_mode():
        for d_model, n_heads, batch, seq in cases:
            reference = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
            mine = MultiHeadAttention.from_torch(reference).eval()
            x = torch.randn(batch, seq, d_model)
            # Default arguments bind this iteration's modules and input (B023).
            t_ref = _median_seconds(
                lambda r=reference, x=x: r(x, x, x, need_weights=True, average_attn_weights=False), repeats
            )
            t_mine = _median_seconds(lambda m=mine, x=x: m(x), repeats)
            rows.append(
                {
                    "d_model": d_model,
                    "n_heads": n_heads,
                    "batch": batch,
                    "seq": seq,
                    "torch_ms": 1e3 * t_ref,
                    "manyheads_ms": 1e3 * t_mine,
                    "ratio": t_mine / t_ref,
                }
            )
    report("attention", ["d_model", "n_heads", "batch", "seq", "torch_ms", "manyheads_ms", "ratio"], rows)


if __name__ == "__main__":
    main()
