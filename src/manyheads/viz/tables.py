"""Tables and number formats for the chapters: HTML tables shown in a notebook, "mean ± sd", counts and bytes.

Used by every chapter; :func:`show_table` is the one call a chapter makes to put a table on the page.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

__all__ = ["html_table", "show_table", "mean_sd", "format_count", "format_bytes"]


def html_table(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str | None = None) -> str:
    """A plain HTML table (no pandas needed). Cells are converted with ``str`` and escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f'<table class="table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def show_table(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str | None = None) -> None:
    """Display :func:`html_table` in the notebook (and in the built book)."""
    from IPython.display import HTML, display

    display(HTML(html_table(headers, rows, caption)))


def mean_sd(values, digits: int = 2) -> str:
    """'mean ± standard deviation' of a 1-D sequence (sample standard deviation, ddof = 1; 0 for one value)."""
    a = np.asarray(values, dtype=float).ravel()
    if a.size == 0:
        raise ValueError("mean_sd needs at least one value")
    sd = a.std(ddof=1) if a.size > 1 else 0.0
    return f"{a.mean():.{digits}f} ± {sd:.{digits}f}"


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
