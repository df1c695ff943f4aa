"""Chapters 4-7 and the interlude put their models and heavy loops on ``mh.device()`` (design §4, issue 23).

Two halves, both on the CPU:

1. **The chapters choose the device and pass it on.** Each chapter's set-up cell says ``DEVICE = mh.device()``, and
   every call in the chapter that loads a model or runs a training / timing loop passes ``device=`` (the toy
   induction runs of chapter 6 take it in each job). This catches a chapter that loads SmolLM2 or MiniLM without a
   device, so that it stays on the CPU beside a GPU (chapter 6 and the interlude did until issue 23), or that
   hard-codes ``device="cpu"``.
2. **What the chapters call puts every tensor where the model is.** The package functions the chapters call with
   a model on ``DEVICE`` run here on small randomly initialised models of the real shapes (MiniLM 384 wide, 12
   heads; SmolLM2 576 wide, 9 query / 3 K/V heads; fewer layers) placed on PyTorch's ``meta`` device, which stands
   in for a GPU: every operation there computes shapes only, so the checks are fast. ``mh.device()`` is made to
   return ``meta`` too, for functions that default to it. A dispatch mode records every operation; the test fails
   if a model-sized tensor (one whose last dimension is a width of the model: d_model, d_ff, the vocabulary, the
   heads' concatenated width) is computed on the CPU, or if an operation takes meta inputs and returns CPU
   tensors, and it checks that the model's parameters and buffers are still on meta afterwards. This catches a
   function that builds its inputs on the CPU beside a model on the GPU (a decoder that did not move a CPU prompt,
   a ridge probe whose identity matrix or targets stayed on the CPU), one that trains on the CPU whatever the
   model's device (``uptrain``), and one that moves the model off its device (chapter 7's speed panel did).

Reading a meta tensor (``.item()``, ``.cpu()``) gives zeros here: the numbers are meaningless, only where they were
computed is checked. The numbers themselves are tested elsewhere, on the CPU.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import manyheads as mh
import manyheads.runtime
import manyheads.training
from manyheads.models.bert import BertConfig, BertEncoder
from manyheads.models.llama import LlamaConfig, LlamaDecoder

META = torch.device("meta")
CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
aten = torch.ops.aten

# ------------------------------------------------------------------------------------------------ 1. the chapters
DEVICE_CHAPTERS = [
    "04_specialization",
    "05_pruning",
    "interlude_meet_a_decoder",
    "06_layer_hierarchy",
    "07_grouped_query_attention",
]
# Package functions that load a model or run a loop over a model: a chapter must pass them device=.
TAKES_DEVICE = {"load_encoder", "load_decoder", "train", "train_grid", "decoding_speed"}


def _code_cells(name: str) -> list[ast.Module]:
    cells = json.loads((CHAPTERS / f"{name}.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    # IPython magics are not Python; none of the device code uses them.
    return [
        ast.parse("\n".join(line for line in s.splitlines() if not line.lstrip().startswith(("%", "!"))))
        for s in sources
    ]


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


@pytest.mark.parametrize("chapter", DEVICE_CHAPTERS)
def test_chapter_chooses_the_device_in_its_set_up_cell(chapter):
    # the cells importing manyheads: the set-up cell, and a hidden plumbing cell that may come before it
    set_up = [
        cell
        for cell in _code_cells(chapter)
        if any(isinstance(n, ast.Import) and n.names[0].name == "manyheads" for n in ast.walk(cell))
    ]
    chosen = [
        node
        for cell in set_up
        for node in ast.walk(cell)
        if isinstance(node, ast.Assign)
        and [ast.unparse(t) for t in node.targets] == ["DEVICE"]
        and ast.unparse(node.value) == "mh.device()"
    ]
    assert chosen, f"{chapter}: the set-up cell (the one importing manyheads) has no line DEVICE = mh.device()"


@pytest.mark.parametrize("chapter", DEVICE_CHAPTERS)
def test_chapter_passes_the_device_to_every_loader_and_loop(chapter):
    missing = []
    # jobs may be built in one cell and started in another (chapter 6: TOY_JOBS, then train_in_background(TOY_JOBS))
    assigned = {
        target.id: node.value
        for cell in _code_cells(chapter)
        for node in ast.walk(cell)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for cell in _code_cells(chapter):
        for node in ast.walk(cell):
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            keywords = {k.arg: k.value for k in node.keywords}
            if name in TAKES_DEVICE:
                device = keywords.get("device")
                if device is None or isinstance(device, ast.Constant):
                    missing.append(ast.unparse(node).splitlines()[0])
            elif name == "train_in_background":
                given = [assigned.get(a.id, a) if isinstance(a, ast.Name) else a for a in node.args]
                jobs = [n for arg in given for n in ast.walk(arg) if isinstance(n, ast.Dict)]
                if not jobs or any("device" not in [ast.literal_eval(k) for k in job.keys] for job in jobs):
                    missing.append(ast.unparse(node).splitlines()[0])
    assert not missing, f"{chapter}: calls without a device (or with a fixed one): {missing}"


# ------------------------------------------------------------------------------------------ 2. the package, on meta
# Models are initialised on the CPU and then moved (a seed gives the same weights on every device): allowed.
INITIALISATION = {"empty", "empty_strided", "normal_", "uniform_", "zero_", "fill_", "zeros", "ones", "full"}


class PlacementRecorder(TorchDispatchMode):
    """Records model-sized tensors computed on the CPU, and CPU results of operations on meta inputs.

    ``widths``: the last dimensions that mark a model-sized tensor. Copies from meta to the CPU (``.cpu()``) and
    scalar reads (``.item()``) give zeros instead of failing, so code that brings small results back runs on.
    """

    def __init__(self, widths) -> None:
        super().__init__()
        self.widths = set(widths)
        self.on_cpu: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat_args = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        from_meta = any(a.is_meta for a in flat_args)
        if func is aten._local_scalar_dense.default and args[0].is_meta:
            return False if args[0].dtype == torch.bool else 0 if not args[0].is_floating_point() else 0.5
        if func is aten._to_copy.default and args[0].is_meta and kwargs.get("device", META).type != "meta":
            return torch.zeros(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype, device=kwargs["device"])
        if func is aten.copy_.default and args[1].is_meta and not args[0].is_meta:
            return args[0]
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.is_meta:
                continue
            if from_meta:
                self.on_cpu.append(f"{func}: meta inputs, {t.device} output {tuple(t.shape)}")
            elif (
                t.is_floating_point()
                and t.dim()
                and t.shape[-1] in self.widths
                and not func.is_view
                and func.overloadpacket.__name__ not in INITIALISATION
            ):
                self.on_cpu.append(f"{func}: {tuple(t.shape)} computed on {t.device}")
        return out


def _all_on_meta(model: torch.nn.Module) -> list[str]:
    return [name for name, t in [*model.named_parameters(), *model.named_buffers()] if not t.is_meta]


@pytest.fixture(autouse=True)
def _device_is_meta(monkeypatch):
    """mh.device() returns meta, wherever the package or a chapter asks for it."""
    monkeypatch.setattr(manyheads.runtime, "device", lambda: META)
    monkeypatch.setattr(mh, "device", lambda: META, raising=False)
    monkeypatch.setattr(manyheads.training, "default_device", lambda: META)
    # The training loop asks for Adam's fused kernel, which has a meta version but is not offered for meta.
    optimizer = importlib.import_module("torch.optim.optimizer")
    supported = optimizer._get_fused_kernels_supported_devices
    monkeypatch.setattr(optimizer, "_get_fused_kernels_supported_devices", lambda: [*supported(), "meta"])
    # nonzero() of a meta tensor (masks, selected heads) counts every element as nonzero instead of failing.
    with importlib.import_module("torch.fx.experimental._config").patch(meta_nonzero_assume_all_nonzero=True):
        yield


MINILM = BertConfig(vocab_size=30522, d_model=384, n_layers=2, n_heads=12, d_ff=1536)
SMOLLM2 = LlamaConfig(
    vocab_size=49152,
    d_model=576,
    d_ff=1536,
    n_layers=2,
    n_heads=9,
    n_kv_heads=3,
    d_head=64,
    rms_norm_eps=1e-5,
    rope_theta=100000.0,
    eos_token_id=2,
    bos_token_id=1,
)
ENCODER_WIDTHS = (384, 1536, 30522)
DECODER_WIDTHS = (576, 1536, 49152, 192)


def meta_encoder() -> BertEncoder:
    with META:
        return BertEncoder(MINILM).eval()


def meta_decoder() -> LlamaDecoder:
    with META:
        return LlamaDecoder(SMOLLM2).eval()


@pytest.fixture(scope="module")
def word_pieces():
    from manyheads.models.checkpoints import model_dir
    from manyheads.models.tokenizer import Tokenizer

    return Tokenizer.from_dir(model_dir(), max_length=512)


def check(model, widths, run):
    """Run ``run()`` under the recorder; fail if it computed model-sized tensors off meta or moved the model."""
    recorder = PlacementRecorder(widths)
    with recorder:
        result = run()
    assert not recorder.on_cpu, "computed off the model's device:\n" + "\n".join(recorder.on_cpu[:10])
    assert not _all_on_meta(model), f"moved off meta: {_all_on_meta(model)[:5]}"
    return result


SENTENCES = ["The old dog chased my neighbour's cat .", "A cat sat on the mat .", "It rained all day long ."]


# Chapter 4: attention of every head over sentences, and the toy models trained on DEVICE.
def test_chapter4_attention_collection_runs_on_the_device(word_pieces):
    from manyheads import analysis

    encoder = meta_encoder()
    attns, _ = check(encoder, ENCODER_WIDTHS, lambda: analysis.token_attentions(encoder, word_pieces, SENTENCES))
    assert attns[0].device.type == "cpu"  # results come back to the CPU for the statistics


def test_chapter4_toy_training_runs_on_the_device():
    from manyheads.data import TwoRelationTask
    from manyheads.models import TinyAttentionModel
    from manyheads.training import TrainConfig, train_grid

    task = TwoRelationTask(vocab_size=16, seq_len=10, offsets=(1, 2, 4))
    config = TrainConfig(steps=3, batch_size=4, eval_every=3, eval_size=8)
    runs = check(
        torch.nn.Module(),
        (48, 16 * 3),
        lambda: train_grid(TinyAttentionModel.for_task, {"4 heads": (48, 4)}, task, config, (0,), device=META),
    )
    assert not _all_on_meta(runs["4 heads", 0].model)


# Chapter 5 (and 6, 7): the pruning tasks on MiniLM, their ablation maps, importance, curves and the toy task.
LEE_DOCS = [f"{s} Story {i}." for i in range(4) for s in SENTENCES][:8]


@pytest.fixture
def encoder_tasks(word_pieces):
    from manyheads import analysis

    encoder = meta_encoder()
    texts = [f"{s} number {i}" for i in range(8) for s in SENTENCES][:16]
    ratings = torch.linspace(-2, 2, len(texts))

    def build():
        lee = analysis.lee_similarity_task(encoder, word_pieces, LEE_DOCS, torch.rand(8, 8), max_tokens=16)
        sentiment = analysis.sentiment_probe_task(
            encoder, word_pieces, texts, ratings, n_fit=8, n_eval=4, n_importance=4, tokens_per_batch=64
        )
        return lee, sentiment

    return encoder, check(encoder, ENCODER_WIDTHS, build)


def test_chapter5_pruning_runs_on_the_device(encoder_tasks):
    from manyheads import analysis

    encoder, tasks = encoder_tasks
    for task in tasks:
        check(encoder, ENCODER_WIDTHS, lambda task=task: task.score(task.ones()))
        means = check(encoder, ENCODER_WIDTHS, task.head_means)
        for mode in ("zero", "mean"):
            check(
                encoder,
                ENCODER_WIDTHS,
                lambda task=task, mode=mode, means=means: analysis.ablation_map(
                    task, mode, n_boot=4, means=means if mode == "mean" else None
                ),
            )
        check(encoder, ENCODER_WIDTHS, lambda task=task: analysis.head_importance(task, "gradient"))
        check(encoder, ENCODER_WIDTHS, lambda task=task: analysis.pruning_curve(task, "random", step=0.5, seed=0))
    check(encoder, ENCODER_WIDTHS, lambda: analysis.self_distillation_gradient(tasks[0]))


def test_chapter5_toy_pruning_task_runs_on_the_device():
    import torch.nn.functional as F

    from manyheads import analysis
    from manyheads.data import TwoRelationTask
    from manyheads.models import TinyAttentionModel

    toy = TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    with META:
        model = TinyAttentionModel.for_task(toy, 32, 8).eval()
    tokens, targets = toy.sample(16, torch.Generator().manual_seed(7))  # on the CPU, as in the chapter

    def build():
        task = analysis.ModelTask(
            model,
            tokens,
            targets,
            metric=lambda logits, targets: float((logits.argmax(-1) == targets).float().mean()),
            loss=lambda logits, targets: F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=-100),
        )
        return analysis.pruning_curve(task, "gradient", step=0.5)

    check(model, (32, 16 * 2, 16), build)


# The interlude: SmolLM2 loaded on the device, generating and scoring text there.
@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from manyheads.models.gguf_file import read_gguf

    return read_gguf()[2]


def test_load_decoder_and_load_encoder_put_the_model_on_the_device():
    from manyheads.models import llama

    decoder, _ = llama.load_decoder(device=META)
    encoder, _ = mh.load_encoder(device=META)
    assert not _all_on_meta(decoder) and not _all_on_meta(encoder)


def test_interlude_generation_and_losses_run_on_the_device(smollm2_tokenizer):
    from manyheads.analysis import language_model as lm
    from manyheads.models import llama

    decoder = meta_decoder()
    prompt = torch.tensor([[1, 504, 2436, 314]])  # on the CPU, as a tokenizer makes it
    generated = check(decoder, DECODER_WIDTHS, lambda: llama.generate_greedy(decoder, prompt, max_new_tokens=3))
    assert generated.is_meta
    out = check(decoder, DECODER_WIDTHS, lambda: decoder(prompt, output_attentions=True))
    assert out.logits.is_meta and out.attentions[0].is_meta
    repeated = lm.repeated_random_tokens(8, vocabulary=torch.arange(3, 400), bos_id=1, seeds=range(2))
    check(decoder, DECODER_WIDTHS, lambda: lm.next_token_losses(decoder, repeated))
    check(decoder, DECODER_WIDTHS, lambda: lm.real_vs_shuffled_loss(decoder, smollm2_tokenizer, window=16, n_windows=2))


# Chapter 6: layer ablation on SmolLM2, and the toy induction models trained and probed on the device.
def test_chapter6_layer_ablation_runs_on_the_device():
    from manyheads.analysis import language_model as lm

    decoder = meta_decoder()
    windows = torch.randint(3, 400, (2, 17))
    check(decoder, DECODER_WIDTHS, lambda: lm.layer_ablation_losses(decoder, windows))
    with mh.ablated(decoder, [(0, 1), (1, 2)]):
        check(decoder, DECODER_WIDTHS, lambda: lm.next_token_losses(decoder, windows))


def test_chapter6_induction_runs_on_the_device():
    from manyheads.training import TrainConfig

    task = mh.RepeatedHalvesTask()
    probes = {half: tokens[:2] for half, tokens in mh.probe_batches(task).items() if half <= 5}
    config = TrainConfig(steps=2, batch_size=4, eval_every=2, eval_size=4)
    widths = (64, task.vocab_size)
    run = check(
        torch.nn.Module(),
        widths,
        lambda: mh.train_induction_model(seed=0, config=config, probes=probes, device=META, progress=False),
    )
    model = run.model
    assert not _all_on_meta(model)
    check(model, widths, lambda: mh.composition_test(model, probes, (0, 1)))
    with mh.ablated(model, [(0, 0)]):
        check(model, widths, lambda: mh.repeat_metrics(model, probes))
    weights = check(model, widths, lambda: model(probes[4]).weights)  # a CPU probe batch, as in the chapter
    assert weights.is_meta


# Chapter 7: K/V-head conversion, decoding speed, conversion scores and uptraining on the device.
def test_chapter7_kv_heads_run_on_the_device(encoder_tasks):
    decoder = meta_decoder()
    for variant in (mh.repeat_kv_heads(decoder, 9), mh.group_kv_heads(decoder, 1, "mean")):
        assert not _all_on_meta(variant)
        records = check(variant, DECODER_WIDTHS, lambda v=variant: mh.decoding_speed(v, [4], steps=1, device=META))
        assert records[0].device == "meta"
    encoder, tasks = encoder_tasks
    original = [task.embeddings(task.ones()) for task in tasks]
    converted = mh.group_kv_heads(encoder, 4, "random", seed=0)
    check(converted, ENCODER_WIDTHS, lambda: mh.conversion_scores(converted, tasks, original))


def test_chapter7_decoding_speed_elsewhere_leaves_the_model_in_place():
    decoder = meta_decoder()
    with torch.device("cpu"):
        small = LlamaDecoder(LlamaConfig(**{**SMOLLM2.__dict__, "vocab_size": 64, "d_model": 32, "d_head": 8})).eval()
    (record,) = mh.decoding_speed(small, [4], steps=1, device=META)
    assert record.device == "meta" and all(p.device.type == "cpu" for p in small.parameters())
    assert not _all_on_meta(decoder)


def test_chapter7_uptraining_runs_on_the_device():
    from manyheads.data import TwoRelationTask
    from manyheads.models import TinyAttentionModel
    from manyheads.training import TrainConfig

    toy = TwoRelationTask(vocab_size=16, seq_len=12, offsets=(1, 3))
    with META:
        pretrained = TinyAttentionModel.for_task(toy, 32, 8)
    config = TrainConfig(steps=2, batch_size=4, eval_every=2, eval_size=4, seed=1)
    held_out = toy.sample(8, torch.Generator().manual_seed(99))  # on the CPU
    check(
        pretrained,
        (32, 16 * 2, 16),
        lambda: mh.uptrain(pretrained, toy, 2, steps=(1, 2), config=config, held_out=held_out),
    )
