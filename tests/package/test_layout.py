"""The package's layout is its architecture: one job per module, one name per contract, every name reachable."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import manyheads as mh

PACKAGE = Path(mh.__file__).parent
MODULES = sorted(
    m.name for m in pkgutil.walk_packages([str(PACKAGE)], prefix="manyheads.") if not m.name.endswith("__main__")
)
# Modules that teach something: every public name is reachable as mh.<name>. checks/ (exercise checks, reached as
# mh.checks.<name>) and course/ (maintainer and instructor tools) are not part of that namespace.
TEACHING = [
    m
    for m in MODULES
    if not m.startswith(("manyheads.checks", "manyheads.course"))
    and not (PACKAGE / Path(*m.split(".")[1:]) / "__init__.py").is_file()
]


def _docstring(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""


def test_the_folders_say_what_lives_inside():
    for folder in ("models", "data", "analysis", "viz", "checks", "course"):
        assert (PACKAGE / folder / "__init__.py").is_file(), folder
    flat = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert flat == ["attention", "costs", "interventions", "runtime", "training"]


@pytest.mark.parametrize("module", MODULES)
def test_every_module_has_a_docstring_that_names_its_chapters(module):
    doc = _docstring(module)
    assert doc, f"{module} has no docstring"
    if not module.startswith("manyheads.course"):  # course/ is maintainer and instructor tooling
        assert "chapter" in doc.lower() or "exercise" in doc.lower(), (
            f"{module}'s docstring does not name the chapter(s) or exercise(s) that teach it"
        )


def _public(module: str) -> dict[str, object]:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        # Command-line modules of course/ (no __all__): their public functions and classes.
        assert module.startswith("manyheads.course"), f"{module} has no __all__"
        # `main` is every command's entry point (python -m ...), not a shared name.
        names = [
            n
            for n, obj in vars(mod).items()
            if not n.startswith("_") and n != "main" and getattr(obj, "__module__", None) == module
        ]
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{module}.__all__ lists names it does not define: {missing}"
    return {n: getattr(mod, n) for n in names}


def test_no_two_public_names_mean_two_things():
    """One name, one contract: a name exported by two modules must be the same object (a package re-export)."""
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for module in MODULES:
        if module == "manyheads" or (PACKAGE / Path(*module.split(".")[1:]) / "__init__.py").is_file():
            continue  # package __init__ files re-export their modules' names
        for name, obj in _public(module).items():
            if name in seen and seen[name][1] is not obj:
                clashes.append(f"{name}: {seen[name][0]} and {module}")
            seen.setdefault(name, (module, obj))
    assert not clashes, "public names used for two different things: " + "; ".join(clashes)


def test_the_clash_test_would_catch_a_clash(monkeypatch):
    """The test above must be able to fail: give one module a second public `head_dim`."""
    import manyheads.analysis.heads as heads

    monkeypatch.setattr(heads, "__all__", [*heads.__all__, "head_dim"], raising=True)
    monkeypatch.setattr(heads, "head_dim", lambda *a: None, raising=False)
    with pytest.raises(AssertionError, match="head_dim"):
        test_no_two_public_names_mean_two_things()


def test_every_public_name_is_reachable_as_mh_name():
    expected = {name: module for module in TEACHING for name in _public(module)}
    assert mh._NAMES == expected, "regenerate manyheads._NAMES from the modules' __all__"
    for name, module in expected.items():
        assert getattr(mh, name) is getattr(importlib.import_module(module), name)
    for sub in mh._SUBMODULES:
        assert getattr(mh, sub) is importlib.import_module(f"manyheads.{sub}")
    assert mh.viz.attention_views.head_view is mh.head_view  # `mh.attention_views` used to raise AttributeError
    with pytest.raises(AttributeError, match="no attribute 'attention_views'"):
        mh.attention_views  # noqa: B018


def test_the_visible_checks_are_one_flat_stable_namespace():
    from manyheads.course.exercises import EXERCISES

    for exercise in EXERCISES:
        for part in exercise.code_parts:
            assert callable(getattr(mh.checks, part.check)), (exercise.stem, part.check)


def test_import_stays_light():
    """Grading kernels import manyheads once per student: no matplotlib, widgets or transformers at import."""
    code = (
        "import sys, manyheads as mh; mh.TwoRelationTask; mh.head_dim; "
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'transformers', 'bertviz', 'nbformat') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_no_two_test_files_share_a_name():
    # tests/ folders have no __init__.py, so pytest imports test files by basename: two files with one name make
    # the whole run fail to collect (CI failed this way once: tests/book and tests/package both had test_claims.py).
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a name: rename one"
        seen[path.name] = path


def test_the_checks_namespace_lists_each_modules_checks_once_and_loads_them_lazily():
    import importlib

    from manyheads import checks

    by_module: dict[str, set[str]] = {}
    for name, module in checks._CHECKS.items():
        by_module.setdefault(module, set()).add(name)
    for module, names in by_module.items():
        declared = {n for n in importlib.import_module(f"manyheads.checks.{module}").__all__ if n.startswith("check_")}
        assert names == declared, (module, names ^ declared)
    assert mh.checks.single_head_bottleneck.check_softmax is mh.checks.check_softmax  # modules as attributes too
    code = "import sys, manyheads.checks.own_work; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def _private_crossings(package: Path, prefix: str) -> list[str]:
    """Imports of another module's private name (``from x import _name``, ``x._name``) in the package's modules."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix):
                found += [
                    f"{path.name}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    return found


def test_no_module_imports_another_modules_private_name():
    """Issue 25: models/kv_heads.py, analysis/speed.py, induction.py and capacity.py reached into private helpers of
    interventions.py, layers.py and costs.py; what one module needs from another is public."""
    assert _private_crossings(PACKAGE, "manyheads") == []


def test_the_private_name_check_would_catch_one(tmp_path):
    (tmp_path / "a.py").write_text("from manyheads.interventions import _hidden, public\n")
    assert _private_crossings(tmp_path, "manyheads") == ["a.py: manyheads.interventions._hidden"]


def test_no_models_forward_knows_about_interventions():
    """Interventions are hooks from manyheads.interventions: a model's forward takes its inputs only (the
    attention-only transformer's forward(remove=...) moved to mh.paths_removed)."""
    import inspect

    from manyheads.models import attention_only, bert, llama, tiny

    words = ("remove", "ablate", "gate", "mask_heads", "intervention")
    for module in (attention_only, bert, llama, tiny):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and "forward" in vars(cls):
                params = list(inspect.signature(cls.forward).parameters)
                assert not [p for p in params if p.startswith(words)], (cls.__name__, params)
