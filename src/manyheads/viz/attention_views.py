"""bertviz views that work offline in the built book, and a static picture of the same view (chapter 4).

bertviz's HTML loads require.js, d3 5.7.0 and jQuery from cdnjs. The book serves its own copies (assets/vendor.json
puts require.js, d3 5.7.0 and jQuery 2.1.0 into _vendor/, which Sphinx publishes as ``_static/``), so
:func:`head_view` and :func:`model_view` rewrite those URLs to the book's ``_static`` folder. In Colab the
original CDN URLs are kept (the notebook there has no ``_static``). :func:`static_head_view` draws the same
left/right token picture with matplotlib: the fallback for readers without JavaScript (and for print).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["localize", "head_view", "model_view", "static_head_view"]

_CDN = "https://cdnjs.cloudflare.com/ajax/libs/"
_LOCAL = {
    _CDN + "require.js/2.3.6/require.min.js": "requirejs/require.js",
    _CDN + "d3/5.7.0/d3.min": "d3/dist/d3.min",  # require.js paths: no ".js"
    _CDN + "jquery/2.0.0/jquery.min": "jquery/dist/jquery.min",
}


def _in_colab() -> bool:
    return "google.colab" in sys.modules


def localize(html: str, static: str = "../_static") -> str:
    """bertviz HTML with its CDN URLs replaced by paths under ``static`` (relative to the page). Raises if bertviz
    changed and a CDN URL is left, so that the book never silently goes back to needing the network."""
    for cdn, local in _LOCAL.items():
        html = html.replace(cdn, f"{static}/{local}")
    if "cdnjs" in html or 'src="http' in html:
        raise ValueError("bertviz's HTML still loads something from the network; update manyheads.viz.attention_views")
    return html


def _to_bertviz(attentions: Sequence[Tensor] | Tensor) -> tuple[Tensor, ...]:
    """(n_layers, n_heads, n, n) or per-layer (n_heads, n, n) → bertviz's tuple of (1, n_heads, n, n)."""
    # rounded to 3 decimals in float64, so the JSON that bertviz embeds in the page stays small
    return tuple((a.unsqueeze(0) if a.dim() == 3 else a).detach().cpu().double().round(decimals=3) for a in attentions)


def _view(kind: str, attentions, tokens: Sequence[str], static: str, **kwargs):
    import bertviz
    from IPython.display import HTML

    view = getattr(bertviz, kind)(_to_bertviz(attentions), list(tokens), html_action="return", **kwargs)
    return view if _in_colab() else HTML(localize(view.data, static))


def head_view(attentions, tokens: Sequence[str], static: str = "../_static", **kwargs):
    """bertviz's head view (an ``IPython.display.HTML``) served offline. attentions: (n_layers, n_heads, n, n) or a
    sequence of (n_heads, n, n); kwargs go to ``bertviz.head_view`` (``layer``, ``heads``, ``include_layers``)."""
    return _view("head_view", attentions, tokens, static, **kwargs)


def model_view(attentions, tokens: Sequence[str], static: str = "../_static", **kwargs):
    """bertviz's model view (every layer × head as thumbnails), served offline; see :func:`head_view`."""
    return _view("model_view", attentions, tokens, static, **kwargs)


def static_head_view(
    weights: Tensor,
    tokens: Sequence[str],
    heads: Sequence[int],
    ax=None,
    title: str | None = None,
    colors: Sequence[str] | None = None,
    min_weight: float = 0.02,
):
    """A matplotlib version of the head view for one layer: tokens on the left attend to tokens on the right, one
    colour per head, line opacity = weight. weights: (n_heads, n, n). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(3.2, 0.28 * len(tokens) + 0.6))
    colors = colors or plt.rcParams["axes.prop_cycle"].by_key()["color"]
    w = np.asarray(torch.as_tensor(weights).detach().float().cpu())
    n = len(tokens)
    y = -np.arange(n, dtype=float)
    for k, h in enumerate(heads):
        share = 1.0 / len(heads)
        for i in range(n):
            for j in range(n):
                if w[h, i, j] >= min_weight:
                    ax.plot(
                        [0.1, 0.9],
                        [y[i], y[j]],
                        color=colors[k % len(colors)],
                        alpha=float(min(1.0, w[h, i, j])) * (0.4 + 0.6 * share),
                        lw=1.6,
                        ls="-",  # solid: the course style's cycle would dash every ninth line
                    )
    for i, t in enumerate(tokens):
        ax.text(0.08, y[i], t, ha="right", va="center", fontsize="medium")
        ax.text(0.92, y[i], t, ha="left", va="center", fontsize="medium")
    ax.set_xlim(-0.45, 1.45)
    ax.set_ylim(y[-1] - 0.7, 0.7)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize="medium")
    return ax
