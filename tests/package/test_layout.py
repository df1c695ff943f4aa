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
# mh.checks.<name>) and course/ (maintainer and instructor tools) are not part of that namespace, nor is the private
# plumbing that hands the names on (manyheads._public_names).
TEACHING = [
    m
    for m in MODULES
    if not m.startswith(("manyheads.checks", "manyheads.course", "manyheads._"))
    and not (PACKAGE / Path(*m.split(".")[1:]) / "__init__.py").is_file()
]
SUBPACKAGES = ("analysis", "data", "models", "viz")  # their modules' names: mh.<sub>.<name> and mh.<name>


def _docstring(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) or ""


def test_the_folders_say_what_lives_inside():
    for folder in ("models", "data", "analysis", "viz", "checks", "course"):
        assert (PACKAGE / folder / "__init__.py").is_file(), folder
    flat = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert flat == ["_public_names", "attention", "costs", "interventions", "runtime", "training"]


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
    """The registry read from the modules' source (manyheads._public_names) is what their __all__ says once
    imported; every name is mh.<name>, and mh.<sub>.<name> in its subpackage, the same object."""
    expected = {name: module for module in TEACHING for name in _public(module)}
    assert mh._NAMES == expected, "a module's __all__ is not a literal list that manyheads._public_names can read"
    for name, module in expected.items():
        assert getattr(mh, name) is getattr(importlib.import_module(module), name)
        sub = module.split(".")[1]
        if sub in SUBPACKAGES:
            assert getattr(getattr(mh, sub), name) is getattr(mh, name), (sub, name)
            assert name in dir(getattr(mh, sub)), (sub, name)
    assert set(dir(mh)) == set(expected) | set(mh._SUBMODULES) == set(mh.__all__)  # tab completion lists them
    for sub in mh._SUBMODULES:
        assert getattr(mh, sub) is importlib.import_module(f"manyheads.{sub}")
    assert mh.viz.attention_views.head_view is mh.head_view  # `mh.attention_views` used to raise AttributeError
    with pytest.raises(AttributeError, match="no attribute 'attention_views'"):
        mh.attention_views  # noqa: B018


def test_subpackages_hand_names_on_lazily_and_old_import_forms_still_work():
    """Importing a subpackage imports none of its modules (so `import manyheads` never pulls in torch or
    matplotlib); `from manyheads.models import llama` and `mh.viz.glue` (the function, though a module of that name
    exists) work as before, whichever is used first."""
    code = (
        "import sys, manyheads as mh, manyheads.analysis, manyheads.data, manyheads.models, manyheads.viz\n"
        "print(sorted(m for m in ('torch', 'numpy', 'matplotlib', 'ipywidgets') if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.startswith('manyheads.') and m.count('.') == 2))\n"
        "mh.glue; import manyheads.viz.glue; from manyheads.models import llama\n"
        "print(callable(mh.viz.glue) and mh.viz.glue is mh.glue, llama.__name__, mh.models.llama is llama)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:3] == ["[]", "['manyheads.viz.glue']", "True manyheads.models.llama True"]


def _plant_package(folder: Path, modules: dict[str, str]) -> Path:
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def test_a_name_public_in_two_modules_stops_the_import(tmp_path):
    from manyheads._public_names import PublicNameError, hand_on, public_names

    folder = _plant_package(tmp_path / "pkg", {"one": '__all__ = ["head_dim"]\n', "two": '__all__ = ["head_dim"]\n'})
    with pytest.raises(PublicNameError, match=r"'head_dim' is public in both pkg\.one and pkg\.two"):
        public_names(folder, "pkg")
    nested = _plant_package(tmp_path / "top", {"flat": '__all__ = [\n    "glue",  # a comment\n]\n'})
    _plant_package(nested / "viz", {"glue": '__all__ = ["glue"]\n'})
    with pytest.raises(PublicNameError, match=r"'glue' is public in both top\.flat and top\.viz\.glue"):
        public_names(nested, "top", subpackages=("viz",))
    assert public_names(nested, "top") == {"glue": "top.flat"}
    hidden = _plant_package(tmp_path / "hides", {"glue": "__all__ = []\n", "plots": '__all__ = ["glue"]\n'})
    with pytest.raises(PublicNameError, match=r"'glue' is both hides\.glue and a public name of hides\.plots"):
        hand_on({"__name__": "hides", "__file__": str(hidden / "__init__.py")})


def test_a_module_without_a_literal_all_stops_the_import(tmp_path):
    from manyheads._public_names import PublicNameError, declared_names

    for text in ("x = 1\n", "__all__ = NAMES\n", '__all__ = ["a"]\n__all__ = ["b"]\n', '__all__ = ["a", "a"]\n'):
        (tmp_path / "m.py").write_text(text)
        with pytest.raises(PublicNameError, match="m.py"):
            declared_names(tmp_path / "m.py")


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
