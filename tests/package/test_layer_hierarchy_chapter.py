"""Plumbing that chapter 6 (the layer hierarchy) adds: training induction models in background processes.

The chapter trains its toy models in two worker processes while it measures the pretrained models; the runs it
gets back must be exactly the runs it would have trained itself, in the order it asked for them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import manyheads as mh
from manyheads.analysis.induction import probe_batches, train_induction_model
from manyheads.data.repeats import RepeatedHalvesTask

TASK = RepeatedHalvesTask(vocab_size=12, min_half=3, max_half=4)
CONFIG = replace(mh.INDUCTION_RECIPE, steps=12, eval_every=4, eval_size=16, batch_size=8)
SMALL = {"task": TASK, "config": CONFIG, "d_model": 16, "n_heads": 2}


def test_background_runs_equal_runs_trained_here_in_the_order_asked():
    probes = probe_batches(TASK, per_half=4)
    jobs = [
        {**SMALL, "seed": 3, "probes": probes, "snapshot_every": 4},
        {**SMALL, "seed": 5, "n_layers": 1, "probes": probes},
    ]
    background = mh.train_in_background(jobs, processes=2)
    runs = background.results()
    assert background.done()
    assert [(r.seed, r.n_layers) for r in runs] == [(3, 2), (5, 1)]
    for job, run in zip(jobs, runs):
        here = train_induction_model(**job, progress=False)
        assert run.train_loss == here.train_loss and run.steps == here.steps
        assert [m.second for m in run.history] == [m.second for m in here.history]
        torch.testing.assert_close(run.induction, here.induction, rtol=0, atol=0)
        assert sorted(run.snapshots) == sorted(here.snapshots)
        for step, state in here.snapshots.items():
            assert all(torch.equal(state[k], run.snapshots[step][k]) for k in state)
        for a, b in zip(run.model.state_dict().values(), here.model.state_dict().values()):
            assert torch.equal(a, b)
    assert sorted(runs[0].snapshots) == [0, 4, 8, 12] and runs[1].snapshots == {}


def test_an_error_in_a_worker_comes_back_to_the_caller():
    background = mh.train_in_background([{**SMALL, "seed": 0, "snapshot_every": 3}], processes=1)
    with pytest.raises(ValueError, match="snapshot_every"):
        background.results()


@pytest.mark.parametrize(
    ("jobs", "processes", "message"),
    [
        ([], 2, "jobs is empty"),
        ([{"seed": 0, "layers": 2}], 2, "unsupported .*layers"),
        ([{"seed": 0, "progress": True}], 2, "unsupported .*progress"),
        ([{"seed": 0}], 0, "processes must be a positive int"),
        ([{"seed": 0}], True, "processes must be a positive int"),
    ],
)
def test_bad_jobs_are_rejected_before_anything_starts(jobs, processes, message):
    with pytest.raises(ValueError, match=message):
        mh.train_in_background(jobs, processes=processes)


# -- whole-layer ablation of the decoder ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_decoder():
    from manyheads.models.llama import LlamaConfig, LlamaDecoder

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=53,
        d_model=32,
        d_ff=64,
        n_layers=3,
        n_heads=4,
        n_kv_heads=2,
        d_head=8,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
    )
    return LlamaDecoder(config).eval()


def test_layer_ablation_losses_equal_ablating_each_layer_and_running_the_whole_model(tiny_decoder):
    from manyheads.analysis import language_model as lm

    ids = torch.randint(53, (3, 11), generator=torch.Generator().manual_seed(1))
    losses = lm.layer_ablation_losses(tiny_decoder, ids)
    expected = []
    for layer in range(3):
        with mh.ablated(tiny_decoder, [(layer, h) for h in range(4)]):
            expected.append(lm.next_token_losses(tiny_decoder, ids).mean())
    torch.testing.assert_close(losses, torch.stack(expected), rtol=1e-5, atol=1e-5)
    intact = lm.next_token_losses(tiny_decoder, ids).mean()
    assert (losses - intact).abs().min() > 1e-4  # each removal changes the loss: the heads were really removed
    # The model is left as it was.
    torch.testing.assert_close(lm.next_token_losses(tiny_decoder, ids).mean(), intact)


@pytest.mark.parametrize(
    ("ids", "error"),
    [
        (torch.zeros(2, 1, dtype=torch.long), ValueError),
        (torch.zeros(5, dtype=torch.long), ValueError),
        (torch.zeros(2, 4), ValueError),
    ],
)
def test_layer_ablation_losses_rejects_bad_ids(tiny_decoder, ids, error):
    from manyheads.analysis import language_model as lm

    with pytest.raises(error, match="ids must be"):
        lm.layer_ablation_losses(tiny_decoder, ids)


def test_layer_ablation_losses_needs_the_course_decoder():
    from manyheads.analysis import language_model as lm

    with pytest.raises(TypeError, match="LlamaDecoder"):
        lm.layer_ablation_losses(torch.nn.Linear(2, 2), torch.zeros(1, 3, dtype=torch.long))


def test_induction_runs_returns_the_runs_started_in_the_background():
    jobs = [{**SMALL, "seed": 4, "probes": probe_batches(TASK, per_half=2)}]
    mh.train_in_background(jobs, processes=1)
    (run,) = mh.induction_runs(jobs)
    here = train_induction_model(**jobs[0], progress=False)
    assert run.train_loss == here.train_loss


# -- the chapter's code: no visible cell uses a name that only a hidden cell defines (issue 24) ----------------------


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell defines, names it reads) from its code (IPython magics dropped)."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    defined, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store | ast.Del) else used).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return defined, used


def hidden_names_used_visibly(nb) -> list[str]:
    """'cell N uses X' for each name a visible code cell reads whose latest definition so far is in a hidden cell:
    defined only there, or redefined there after a visible cell defined it."""
    hidden_tags = {"remove-cell", "remove-input"}
    last_definer: dict[str, bool] = {}  # name → whether the latest cell that defined it is hidden
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        defined, used = _names(cell.source)
        hidden = bool(hidden_tags & set(cell.metadata.get("tags", [])))
        if not hidden:
            problems += [f"cell {index} uses {name}" for name in sorted(used - defined) if last_definer.get(name)]
        last_definer.update(dict.fromkeys(defined, hidden))
    return problems


def test_a_planted_hidden_definition_used_visibly_is_found():
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("top_heads = [1]", metadata={"tags": ["remove-cell"]}),
            nbformat.v4.new_code_cell("print(top_heads)"),
            nbformat.v4.new_code_cell("x = 1\nprint(x)"),
            nbformat.v4.new_code_cell("prev_heads = [0]"),
            nbformat.v4.new_code_cell("prev_heads = [2]", metadata={"tags": ["remove-cell"]}),
            nbformat.v4.new_code_cell("print(prev_heads, x)"),
        ]
    )
    assert hidden_names_used_visibly(nb) == ["cell 1 uses top_heads", "cell 5 uses prev_heads"]


def test_chapter_6s_visible_code_uses_no_name_defined_only_in_a_hidden_cell():
    import nbformat

    from manyheads.course.layout import REPO

    nb = nbformat.read(REPO.chapters_dir / "06_layer_hierarchy.ipynb", as_version=4)
    assert hidden_names_used_visibly(nb) == []
