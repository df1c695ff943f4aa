"""The hand-written cases of exercise 05_pruning:
correct alternatives, known bugs and how each is caught (the types and the registry are case_types.py's; cases.py
gathers every exercise's)."""

from __future__ import annotations

from case_types import KNOWN, Bug


def _ablate(body: str, check_keep: bool = True, check_mode: bool = True) -> str:
    """An ablate_heads with the contract's validation (unless left out) and the given body."""
    mode = (
        '    if mode not in ("zero", "mean"):\n        raise ValueError(f"unknown mode {mode!r}")\n'
        if check_mode
        else ""
    )
    keep = (
        "    if tuple(keep.shape) != (head_outputs.shape[1],):\n        raise ValueError('keep must be (n_heads,)')\n"
        if check_keep
        else ""
    )
    means = (
        '    if mode == "mean" and (means is None or tuple(means.shape) != (head_outputs.shape[1], '
        "head_outputs.shape[-1])):\n        raise ValueError('mode mean needs means (n_heads, d_head)')\n"
    )
    return f'\ndef ablate_heads(head_outputs, keep, mode="zero", means=None):\n{mode}{keep}{means}{body}'


_WHERE_ZERO = "torch.zeros_like(head_outputs)"
_WHERE_MEAN = "means[None, :, None, :].to(head_outputs.dtype)"


def _where(kept="keep[None, :, None, None]", zero=_WHERE_ZERO, mean=_WHERE_MEAN, swap=False) -> str:
    a, b = ("other", "head_outputs") if swap else ("head_outputs", "other")
    return f'    other = {zero} if mode == "zero" else {mean}\n    return torch.where({kept}, {a}, {b})\n'


def _importance(body: str) -> str:
    return f"\ndef gate_importance(loss_fn, batches, shape):\n{body}"


def _prune(body: str, validate: bool = True) -> str:
    check = (
        "    if not 0 <= fraction <= 1:\n        raise ValueError('fraction must lie in [0, 1]')\n" if validate else ""
    )
    return f"\ndef prune_mask(importance, fraction):\n{check}{body}"


_ARGSORT_PRUNE = """    k = {k}
    keep = torch.ones(importance.numel(), dtype=torch.bool)
    keep[torch.argsort(importance.flatten(){descending})[:k]] = False
    return keep.reshape(importance.shape){suffix}
"""


def _argsort_prune(k="math.floor(fraction * importance.numel())", descending="", suffix="", validate=True) -> str:
    return _prune(_ARGSORT_PRUNE.format(k=k, descending=descending, suffix=suffix), validate)


_HIDDEN_ABLATE = r"head \d+ \((kept|removed)\) of item \d+ is wrong"
_HIDDEN_IMPORTANCE = r"importance -?[0-9.e+-]+, expected"
_HIDDEN_PRUNE_COUNT = r"heads removed, expected \d+"

KNOWN["05_pruning"] = {
    "right": {
        "alternatives": {
            "ablate_heads": """
def ablate_heads(head_outputs, keep, mode="zero", means=None):
    n_heads, d_head = head_outputs.shape[1], head_outputs.shape[3]
    if mode != "zero" and mode != "mean":
        raise ValueError("mode must be 'zero' or 'mean'")
    if keep.dim() != 1 or keep.shape[0] != n_heads:
        raise ValueError("keep must have shape (n_heads,)")
    if mode == "mean":
        if means is None:
            raise ValueError("mean ablation needs means")
        if means.shape != (n_heads, d_head):
            raise ValueError("means must have shape (n_heads, d_head)")
    out = head_outputs.clone()
    for h in range(n_heads):
        if not keep[h]:
            out[:, h] = 0.0 if mode == "zero" else means[h]
    return out
""",
            "gate_importance": """
def gate_importance(loss_fn, batches, shape):
    grads = []
    for batch in batches:
        gates = torch.ones(shape).requires_grad_()
        loss_fn(gates, batch).backward()
        grads.append(gates.grad.abs())
    return torch.stack(grads).mean(dim=0)
""",
            "prune_mask": """
def prune_mask(importance, fraction):
    if fraction < 0 or fraction > 1:
        raise ValueError(f"fraction {fraction} is not in [0, 1]")
    n = importance.numel()
    k = int(math.floor(fraction * n))
    keep = torch.ones(n, dtype=torch.bool)
    if k > 0:
        keep[torch.topk(importance.reshape(-1), k, largest=False).indices] = False
    return keep.view(importance.shape)
""",
        },
        "arithmetic": {
            "ablate_heads": _ablate(
                """    k = keep.to(head_outputs.dtype)[None, :, None, None]
    if mode == "zero":
        return head_outputs * k
    return head_outputs * k + (1 - k) * means.to(head_outputs.dtype)[None, :, None, :]
"""
            ),
            "gate_importance": """
def gate_importance(loss_fn, batches, shape):
    total = None
    for n, batch in enumerate(batches, start=1):
        gates = torch.ones(*shape, requires_grad=True)
        loss = loss_fn(gates, batch)
        grad = torch.autograd.grad(loss, [gates])[0].detach().abs()
        total = grad if total is None else total + grad
    return total / n
""",
            "prune_mask": """
def prune_mask(importance, fraction):
    if not (0.0 <= fraction <= 1.0):
        raise ValueError("fraction must be between 0 and 1")
    flat = importance.detach().reshape(-1)
    k = math.floor(fraction * flat.numel())
    ranks = torch.empty(flat.numel(), dtype=torch.long)
    ranks[flat.argsort(stable=True)] = torch.arange(flat.numel())
    return (ranks >= k).reshape(importance.shape)
""",
        },
    },
    "bugs": {
        "ablation in place": Bug(
            "ablate_heads",
            _ablate(
                """    for h in range(keep.shape[0]):
        if not keep[h]:
            head_outputs[:, h] = 0.0 if mode == "zero" else means[h]
    return head_outputs
"""
            ),
            check="changed its input head_outputs",
            hidden="an input changed",
        ),
        "ablation mask inverted": Bug(
            "ablate_heads", _ablate(_where(swap=True)), check="the mask is inverted", hidden=_HIDDEN_ABLATE
        ),
        "means used in zero mode": Bug(
            "ablate_heads",
            _ablate(_where().replace('if mode == "zero"', "if means is None")),
            check="means is ignored in mode 'zero'",
            hidden=r"mode 'zero' with means given on .*: head \d+ \(removed\)",
        ),
        "means from the batch, not the argument": Bug(
            "ablate_heads",
            _ablate(_where(mean="head_outputs.mean(dim=(0, 2), keepdim=True)")),
            check="wrong mean ablation of head_outputs",
            hidden=r"mode 'mean' on .*: head \d+ \(removed\)",
        ),
        "means aligned with the positions": Bug(
            "ablate_heads",
            _ablate(_where(mean="means[None, None]")),
            check="raised RuntimeError on mode='mean'",
            hidden="must match the size",
            hidden_error=RuntimeError,
        ),
        "unknown mode taken for zero": Bug(
            "ablate_heads",
            _ablate(
                """    other = torch.zeros_like(head_outputs)
    if mode == "mean":
        other = means[None, :, None, :].to(head_outputs.dtype)
    return torch.where(keep[None, :, None, None], head_outputs, other)
""",
                check_mode=False,
            ),
            check=r"mode='max', but should raise ValueError",
            hidden="should raise ValueError for unknown mode 'Zero'",
        ),
        "keep not checked": Bug(
            "ablate_heads",
            _ablate(_where(), check_keep=False),
            check="raised RuntimeError on keep of length 3 for 4 heads, expected a ValueError",
            hidden="raised RuntimeError for keep of length 2 for 3 heads, expected ValueError",
        ),
        "ablation in float32": Bug(
            "ablate_heads",
            _ablate(
                """    out = torch.zeros(head_outputs.shape)
    for h in range(keep.shape[0]):
        if keep[h]:
            out[:, h] = head_outputs[:, h]
        elif mode == "mean":
            out[:, h] = means[h]
    return out
"""
            ),
            check="keep the dtype of head_outputs",
            hidden="dtype torch.float32, expected torch.float64",
        ),
        "ablation by a float mask": Bug(
            "ablate_heads",
            _ablate(
                """    k = keep.float()[None, :, None, None]
    if mode == "zero":
        return head_outputs * k
    return head_outputs * k + (1 - k) * means[None, :, None, :]
"""
            ),
            check=r"returned torch\.float32 for float16 head_outputs, mode 'zero' in torch\.float16",
            hidden=r"dtype torch\.float32, expected torch\.float16",
        ),
        "ablation promotes to the means' dtype": Bug(
            "ablate_heads",
            _ablate(_where(mean="means[None, :, None, :]")),
            check=r"returned torch\.float32 for float16 head_outputs with float32 means, mode 'mean' in torch\.float16",
            hidden=r"mode 'mean' on .* torch\.float16: dtype torch\.float32, expected torch\.float16",
        ),
        "ablation returns its input when every head is kept": Bug(
            "ablate_heads",
            _ablate("    if bool(keep.all()):\n        return head_outputs\n" + _where()),
            check="returned head_outputs itself",
            hidden="every head kept, mode 'zero': the result shares memory with head_outputs",
        ),
        "importance: abs after averaging": Bug(
            "gate_importance",
            _importance(
                """    total, n = torch.zeros(shape), 0
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0]
        n += 1
    return (total / n).abs()
"""
            ),
            check="absolute value of each batch's gradient first",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance keeps its autograd history": Bug(
            "gate_importance",
            _importance(
                """    total, n = 0, 0
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total = total + torch.autograd.grad(loss_fn(gates, batch), gates, create_graph=True)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="still has autograd history",
            hidden="the result still has autograd history",
        ),
        "importance iterates the batches twice": Bug(
            "gate_importance",
            _importance(
                """    n = sum(1 for _ in batches)
    total = torch.zeros(shape)
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
    return total / n
"""
            ),
            check="a generator can be iterated only once",
            hidden=r"a generator, \(6,\): importance 0\.0, expected",
        ),
        "importance summed over batches": Bug(
            "gate_importance",
            _importance(
                """    total = torch.zeros(shape)
    for batch in batches:
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
    return total
"""
            ),
            check="that is the sum over the batches",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance with accumulated gates.grad": Bug(
            "gate_importance",
            _importance(
                """    gates = torch.ones(shape, requires_grad=True)
    total, n = torch.zeros(shape), 0
    for batch in batches:
        loss_fn(gates, batch).backward()
        total += gates.grad.abs()
        n += 1
    return total / n
"""
            ),
            check="gates.grad accumulates",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance at gates = 0": Bug(
            "gate_importance",
            _importance(
                """    total, n = torch.zeros(shape), 0
    for batch in batches:
        gates = torch.zeros(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="gates that are not all 1",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance of the first batch only": Bug(
            "gate_importance",
            _importance(
                """    gates = torch.ones(shape, requires_grad=True)
    return torch.autograd.grad(loss_fn(gates, next(iter(batches))), gates)[0].abs()
"""
            ),
            check="the first batch alone",
            hidden=_HIDDEN_IMPORTANCE,
        ),
        "importance in float64": Bug(
            "gate_importance",
            _importance(
                """    total, n = 0, 0
    for batch in batches:
        gates = torch.ones(shape, dtype=torch.float64, requires_grad=True)
        total = total + torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
        n += 1
    return total / n
"""
            ),
            check="float64 gates: gates = torch.ones\\(shape\\) is float32",
            hidden="dtype torch.float64, expected torch.float32",
        ),
        "importance pops the batches off the list": Bug(
            "gate_importance",
            _importance(
                """    total, n = torch.zeros(shape), 0
    while batches:
        batch = batches.pop()
        gates = torch.ones(shape, requires_grad=True)
        total += torch.autograd.grad(loss_fn(gates, batch), gates)[0].abs()
        n += 1
    return total / n
"""
            ),
            check=r"changed the list of batches it was given \(3 batches before the call, 0 after\)",
            hidden="gate_importance changed the list of batches it was given",
        ),
        "pruning per layer": Bug(
            "prune_mask",
            _prune(
                """    rows = importance.reshape(-1, importance.shape[-1])
    k = math.floor(fraction * rows.shape[1])
    keep = torch.ones(rows.shape, dtype=torch.bool)
    for i in range(rows.shape[0]):
        keep[i, rows[i].argsort()[:k]] = False
    return keep.reshape(importance.shape)
"""
            ),
            check="1 head in each layer",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning rounds k": Bug(
            "prune_mask",
            _argsort_prune(k="round(fraction * importance.numel())"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning with math.ceil": Bug(
            "prune_mask",
            _argsort_prune(k="math.ceil(fraction * importance.numel())"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning one head too many": Bug(
            "prune_mask",
            _argsort_prune(k="math.floor(fraction * importance.numel()) + 1"),
            check="use math.floor",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning mask inverted": Bug(
            "prune_mask",
            _argsort_prune(suffix=".logical_not()"),
            check="the mask is inverted",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "pruning the most important heads": Bug(
            "prune_mask",
            _argsort_prune(descending=", descending=True"),
            check="prunes the MOST important heads",
            hidden="a removed head is more important than a kept one",
        ),
        "pruning by a threshold": Bug(
            "prune_mask",
            _prune(
                """    k = math.floor(fraction * importance.numel())
    if k == 0:
        return torch.ones(importance.shape, dtype=torch.bool)
    return importance > importance.flatten().kthvalue(k).values
"""
            ),
            check="tied importances",
            hidden=_HIDDEN_PRUNE_COUNT,
        ),
        "fraction not checked": Bug(
            "prune_mask",
            _argsort_prune(validate=False),
            check=r"fraction -0\.1, but should raise ValueError",
            hidden="should raise ValueError for fraction -0.5",
        ),
        "pruning changes importance": Bug(
            "prune_mask",
            _prune(
                """    flat = importance.view(-1)
    keep = torch.ones(flat.numel(), dtype=torch.bool)
    for _ in range(math.floor(fraction * flat.numel())):
        i = int(flat.argmin())
        keep[i] = False
        flat[i] = float("inf")
    return keep.reshape(importance.shape)
"""
            ),
            check="prune_mask changed its input importance in place",
            hidden="importance changed",
        ),
        "pruning returns a float mask": Bug(
            "prune_mask", _argsort_prune(suffix=".float()"), check="return a bool tensor", hidden="dtype torch.float32"
        ),
    },
    "mixed": {
        "alternatives with per-layer pruning": ("alternatives", "pruning per layer"),
        "arithmetic with abs after averaging": ("arithmetic", "importance: abs after averaging"),
    },
    "written_prompts": {"would_you_ship": "90 %", "identical_heads": "same block of $W_O$"},
}
