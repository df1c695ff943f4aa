"""The head-budget explorer (chapter 3): d_model, n_heads, n_kv_heads and sequence length in; d_head, parameters,
FLOPs, attention-matrix memory and KV-cache size out, with a plain-language message for invalid combinations.

The arithmetic lives in :mod:`manyheads.headsize`; this module only lays it out. :func:`head_budget_html` is the
static view (one configuration as an HTML table, or the error message), :func:`head_budget_widget` the live one.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from manyheads.headsize import head_budget
from manyheads.live import html_widget

__all__ = ["format_bytes", "format_count", "head_budget_html", "head_budget_widget"]


def format_count(n: int) -> str:
    """1234567 → '1.23 M' (k, M, G, T with three significant digits); small numbers stay exact."""
    for size, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return str(n)


def format_bytes(n: int) -> str:
    """Bytes in binary units: 2147483648 → '2 GiB', 1536 → '1.5 KiB'."""
    for size, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def head_budget_html(d_model: int, n_heads: int, n_kv_heads: int | None = None, seq_len: int = 512,
                     n_layers: int = 1, batch: int = 1) -> str:
    """One configuration as an HTML table, or a highlighted message saying why it is invalid."""
    try:
        b = head_budget(d_model, n_heads, n_kv_heads, seq_len=seq_len, n_layers=n_layers, batch=batch)
    except ValueError as exc:
        return (f'<div style="color:#a40000;border-left:4px solid #a40000;padding:4px 8px">'
                f"<b>Invalid combination.</b> {html.escape(str(exc))}</div>")
    kind = "multi-head" if b.n_kv_heads == b.n_heads else ("multi-query" if b.n_kv_heads == 1 else "grouped-query")
    bottleneck = (f"yes: d_head = {b.d_head} &lt; n = {b.seq_len}, so some attention patterns cannot be represented"
                  if b.low_rank_bottleneck else f"no: d_head = {b.d_head} ≥ n = {b.seq_len}")
    layers = f" ({n_layers} layers)" if n_layers > 1 else " (one layer)"
    rows = [
        ("d_head = d_model / n_heads", f"{b.d_head}"),
        ("attention type", f"{kind}: {b.n_heads} query heads share {b.n_kv_heads} key/value heads"),
        ("parameters" + layers, f"{b.params:,} ({format_count(b.params)})"),
        ("forward FLOPs" + layers, f"{format_count(b.flops)}, of which softmax {format_count(b.softmax_flops)}"),
        ("attention weights, float32" + layers, format_bytes(b.attention_matrix_bytes)),
        ("KV cache, 16-bit" + layers, format_bytes(b.kv_cache_bytes)),
        ("low-rank bottleneck (d_head < n)?", bottleneck),
    ]
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
    caption = (f"d_model = {d_model}, n_heads = {n_heads}, n_kv_heads = {b.n_kv_heads}, sequence length n = {seq_len}"
               f", batch {batch}")
    return f'<table class="table"><caption>{caption}</caption><tbody>{body}</tbody></table>'


def head_budget_widget(d_model: int = 512, n_heads: int = 8, n_kv_heads: int = 8, seq_len: int = 1024,
                       n_layers: int = 1) -> widgets.VBox:
    """Live explorer: type a configuration and the table updates (chapter 3). Static pages show the defaults."""
    style = {"description_width": "110px"}

    def box(value, description, maximum):
        return widgets.BoundedIntText(value=value, min=0, max=maximum, description=description, style=style,
                                      continuous_update=False)

    return html_widget(
        head_budget_html,
        d_model=box(d_model, "d_model", 65536),
        n_heads=box(n_heads, "n_heads", 4096),
        n_kv_heads=box(n_kv_heads, "n_kv_heads", 4096),
        seq_len=box(seq_len, "sequence length", 1_048_576),
        n_layers=box(n_layers, "layers", 256),
    )
