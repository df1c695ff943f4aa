"""Integrity flags for ``manyheads grade``: things a human should look at, each with its evidence; no points.

Three detectors, all pure functions of notebooks and source code (issue 15, item 3; ``instructors/grading.md``,
"Integrity flags", says what each means to an instructor):

* :func:`out_of_order`: the outputs the student handed in (of their own cells and of the read-only cells such as
  the visible checks) differ from nbgrader's top-to-bottom run of the same code (cells run out of order, or edited
  after they ran); execution counts that are not increasing are quoted as supporting evidence.
* :func:`identical_answers`: the same answer code (comments, docstrings and blank lines aside) for a graded part
  from several students.
* :func:`tampering`: the student's cells reach for the grading process itself: they patch ``builtins``, torch,
  numpy, the course package or the course's test helpers, edit ``sys.modules``, reload modules, trace frames, read
  environment variables or open files outside the notebook's folder (the course's own data loaders do not count).

Every flag is one line that starts with its kind (``out of order:``, ``identical answer:``, ``tampering:``) and
says where ("answer cell softmax, line 3: …"). The runner (:func:`manyheads_grader.runner.grade`) puts
them in ``Row.flags``; they never change a score or a status.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

import nbformat

from manyheads_grader.notebooks import read_submitted
from manyheads_grader.records import AnswerKey, CellEvidence, answer_code

__all__ = [
    "Group",
    "answers",
    "identical_answers",
    "identical_groups",
    "in_class",
    "out_of_order",
    "out_of_order_cells",
    "out_of_order_flag",
    "stored",
    "tampering",
]

# ----------------------------------------------------------------------------------------------------------------
# shared: the Python a cell runs


def _python(source: str) -> str:
    """The cell as the kernel runs it: IPython's ``!cmd``/``%magic`` lines become ``get_ipython()`` calls."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # IPython is there wherever nbgrader is; without it magics simply do not parse
        return source
    try:
        code = TransformerManager().transform_cell(source)
    except Exception:  # a cell IPython cannot transform does not run either: keep it as written
        return source
    # IPython drops the leading blank lines: put them back, so that line numbers in the flags are the cell's own
    return "\n" * (_blank_head(source) - _blank_head(code)) + code


def _blank_head(text: str) -> int:
    lines = text.splitlines()
    return next((i for i, line in enumerate(lines) if line.strip()), len(lines))


def _parse(source: str) -> ast.Module | None:
    """The cell's syntax tree, or None when it does not parse (then it ran nothing: a SyntaxError)."""
    try:
        return ast.parse(_python(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: absurdly nested code
        return None


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------------------------------
# out of order: stored outputs against nbgrader's top-to-bottom run

KEEP_CHARS = 4000  # of each cell's compared text: enough to see a difference, small for a class of hundreds
# Errors the top-to-bottom run can raise because of the grading environment rather than the order of the cells: the
# own-work rule (reported under its own name), the grader's limits (reported as run notes), and the sandbox, which
# has no network and none of the student's other files or extra packages.
ENVIRONMENT_ERRORS = frozenset(
    {
        "OwnWorkError",
        "DelegationError",  # the same error's name before 0.8.0: outputs a student ran with an earlier release
        "KeyboardInterrupt",
        "CellTimeoutError",
        "TimeoutError",
        "MemoryError",
        "OSError",
        "FileNotFoundError",
        "PermissionError",
        "ConnectionError",
        "ConnectionRefusedError",
        "URLError",
        "ModuleNotFoundError",
        "ImportError",
    }
)
GRADER_CUT = "[output cut by the grader"
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")
# "Wall time: 1.2 ms", "3.1 µs ± 20 ns per loop (mean ± std. dev. of 7 runs, 100,000 loops each)", "took 2.5s"
_TIMING = re.compile(r"\d[\d,]*(?:\.\d+)?\s*(?:ns|µs|us|ms|s|sec|seconds|min)\b")
_LOOPS = re.compile(r"\d[\d,]* loops? each")


def _normal_text(text) -> str:
    text = "".join(text) if isinstance(text, list) else str(text)
    text = _LOOPS.sub("N loops each", _TIMING.sub("<time>", _ADDRESS.sub("0x…", text)))
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def _summary(outputs: list) -> list[str]:
    """What is compared of a cell's outputs: stdout text, text/plain results and error names, in order.

    Images, HTML and stderr (warnings, progress bars) are left out: they differ between runs of the same code."""
    found = []
    for out in outputs or []:
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") == "stdout":
            found.append(_normal_text(out.get("text", "")))
        elif kind in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
            found.append(_normal_text(out["data"]["text/plain"]))
        elif kind == "error":
            found.append(str(out.get("ename", "Error")))  # its message may hold paths and addresses
    return [text[:KEEP_CHARS] for text in found if text]


def stored(nb_or_bytes) -> nbformat.NotebookNode | None:
    """A light copy of a notebook as handed in, for :func:`out_of_order`: its code cells with their source, execution
    count and the outputs it compares (cut to ``KEEP_CHARS``); None when the bytes are not a notebook."""
    if isinstance(nb_or_bytes, bytes | bytearray):
        nb = read_submitted(bytes(nb_or_bytes))[0]
    else:
        nb = nb_or_bytes
    if nb is None:
        return None
    light = nbformat.v4.new_notebook()
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = nbformat.v4.new_code_cell(cell.get("source", ""), execution_count=cell.get("execution_count"))
        kept.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in _summary(cell.get("outputs"))]
        light.cells.append(kept)
    return light


def _compared_cells(nb, release) -> list[tuple[int, str, object]]:
    """(index, label, cell) of the cells whose outputs are compared: the code the student wrote (labelled as
    ``runner.student_cells`` labels it) and the read-only cells such as the visible checks, where running the cells
    out of order changes what the student saw. Test cells are left out: nbgrader adds the hidden tests to them."""
    course = {c.source.strip() for c in release.cells if c.cell_type == "code"}
    found = []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        if meta.get("locked"):
            found.append((i, f"read-only cell {meta.get('grade_id', i + 1)}", cell))
        elif cell.source.strip() not in course:
            label = f"answer cell {meta['grade_id']}" if meta.get("grade_id") else f"extra cell {i + 1}"
            found.append((i, label, cell))
    return found


def _counts_note(submitted) -> str:
    counts = [c.get("execution_count") for c in submitted.cells if c.get("cell_type") == "code"]
    counts = [n for n in counts if isinstance(n, int)]
    if all(a < b for a, b in zip(counts, counts[1:], strict=False)):
        return "execution counts increase down the notebook"
    shown = ", ".join(map(str, counts[:15])) + (", …" if len(counts) > 15 else "")
    return f"execution counts in notebook order are not increasing ({shown})"


def out_of_order_cells(submitted_nb, autograded_nb, release_nb) -> list[CellEvidence]:
    """The cells (the student's and the read-only ones) whose stored outputs differ from nbgrader's top-to-bottom
    run, whole: the evidence behind :func:`out_of_order`'s flag, in notebook order.

    ``submitted_nb`` is the notebook as handed in (or its :func:`stored` copy), ``autograded_nb`` nbgrader's graded
    notebook and ``release_nb`` the release. Cells are matched by their source (the repair keeps the student's
    cells as written). Compared: stdout, text/plain and error names, with memory addresses and timings masked.
    Ignored: execution counts as such, cells that never ran, and re-runs that stopped on an error of the grading
    environment (``ENVIRONMENT_ERRORS``) or the grader's output limit."""
    if submitted_nb is None or autograded_nb is None:
        return []
    import difflib

    sub_code = [c for c in submitted_nb.cells if c.get("cell_type") == "code"]
    graded = _compared_cells(autograded_nb, release_nb)
    graded_code = [(i, c) for i, c in enumerate(autograded_nb.cells) if c.cell_type == "code"]
    match = difflib.SequenceMatcher(
        a=[c.get("source", "").strip() for c in sub_code], b=[c.source.strip() for _, c in graded_code], autojunk=False
    )
    sub_of = {}  # autograded cell index -> submitted cell
    for a, b, size in match.get_matching_blocks():
        for k in range(size):
            sub_of[graded_code[b + k][0]] = sub_code[a + k]
    differing = []
    for index, label, cell in graded:
        before = sub_of.get(index)
        if before is None:
            continue
        was, now = _summary(before.get("outputs")), _summary(cell.get("outputs"))
        count = before.get("execution_count")
        ran = isinstance(count, int)
        if not was and not (ran and any(o.get("output_type") == "error" for o in cell.get("outputs", []))):
            continue  # it never ran, or ran silently and still does: nothing to compare
        errors = [o.get("ename") for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if any(e in ENVIRONMENT_ERRORS for e in errors) or any(GRADER_CUT in t for t in now):
            continue
        if was != now:
            differing.append(
                CellEvidence(label, count if ran else None, before.get("source", ""), tuple(was), tuple(now))
            )
    return differing


def out_of_order_flag(cells: list[CellEvidence], submitted_nb, limit: int = 3) -> list[str]:
    """The one-line flag for :func:`out_of_order_cells`' cells (none when there are none): up to ``limit`` cells
    quoted, each output cut to a line; the whole cells go to the report beside it (``Row.evidence``)."""
    if not cells:
        return []
    quoted = []
    for cell in cells[:limit]:
        shown_was = _short(" | ".join(cell.handed_in) or "no output", 70)
        shown_now = _short(" | ".join(cell.rerun) or "no output", 70)
        quoted.append(f"{cell.label} (ran as [{cell.ran_as}]) showed `{shown_was}`, the re-run gives `{shown_now}`")
    more = f" (and {len(cells) - limit} more)" if len(cells) > limit else ""
    return [
        "out of order: the stored outputs differ from a top-to-bottom run: "
        + "; ".join(quoted)
        + more
        + f"; {_counts_note(submitted_nb)}"
    ]


def out_of_order(submitted_nb, autograded_nb, release_nb, limit: int = 3) -> list[str]:
    """One flag when stored outputs differ from nbgrader's top-to-bottom run (student's and read-only cells); up to
    ``limit`` differing cells are quoted (:func:`out_of_order_cells` has them all, whole)."""
    return out_of_order_flag(out_of_order_cells(submitted_nb, autograded_nb, release_nb), submitted_nb, limit)


# ----------------------------------------------------------------------------------------------------------------
# identical answers across students

# An answer shorter than this (in tokens of the code the student wrote, the release's `def` lines and docstrings not
# counted) is never flagged: short answers such as `return a * b` or a two-line softmax are written identically by
# many students on their own, so a match says nothing. At 40, the course's short reference answers (one-line
# formulas such as attention_entropy or repeat_kv, split_heads' reshape, mha_param_count's arithmetic) fall below
# it, while a three-line numerically stable softmax or any longer answer reaches it.
MIN_TOKENS = 40
MAX_NAMES = 5  # other students named in one flag
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")


answers = answer_code  # {grade id: source} of a notebook's code answer cells


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _is_stub(stmt: ast.stmt) -> bool:
    """``raise NotImplementedError`` (with or without a call), or ``pass``/``...`` alone."""
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))


def _as_text(source: str) -> tuple[str, int]:
    """:func:`normalise` for code that does not parse: comment-only and blank lines dropped, ``def`` lines uncounted."""
    kept = [line.rstrip() for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    size = len(_TOKEN.findall(" ".join(line for line in kept if not line.lstrip().startswith("def "))))
    return "\n".join(kept), size


def normalise(source: str) -> tuple[str, int]:
    """(the code with comments, docstrings and blank lines removed and layout made uniform, its size in tokens).

    Nothing is renamed. The size counts what the student wrote: function bodies and top-level statements, not
    ``def`` lines. A still-unanswered stub (every function body just ``raise NotImplementedError``) has size 0.
    Code that does not parse is compared as text, with comment-only and blank lines removed."""
    tree = _parse(source)
    if tree is None:
        return _as_text(source)
    tree = _strip_docstrings(tree)
    written: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            written += [s for s in stmt.body if not _is_stub(s)]
        elif not _is_stub(stmt):
            written.append(stmt)
    try:
        size = sum(len(_TOKEN.findall(ast.unparse(s))) for s in written)
        return ast.unparse(tree), size
    except RecursionError:  # too deeply nested to write back: compare it as text
        return _as_text(source)


@dataclass
class Group:
    """Students whose answer to one graded part is the same code (comments, docstrings and blank lines aside)."""

    part: str
    students: list[str]
    starts: str  # the code's first line, cut
    reference: bool = False  # the code is the published reference solution's
    common: bool = False  # short, and most of the class wrote it so: not flagged


# A short answer (under COMMON_TOKENS) that at least COMMON_MIN students and more than COMMON_SHARE of those who
# answered the part wrote the same way is the ordinary way to write it (a three-line softmax), not a sign of copying.
COMMON_SHARE = 0.5
COMMON_MIN = 5
COMMON_TOKENS = 60


def identical_groups(
    by_student: dict[str, dict[str, str]], release_nb=None, reference: dict[str, str] | None = None
) -> list[Group]:
    """The groups of identical answers, largest first; a group is one student when it is the reference solution.

    ``by_student`` maps each student to {grade id: answer source} (:func:`answers`); ``release_nb`` is the release
    notebook or its {grade id: stub source} (what a run keeps for a re-grade's merge); ``reference`` is {grade id:
    the reference solution's source} (the published solutions: a student handing it in is marked as such). Answers
    that are still the release's stub, unanswered (``raise NotImplementedError``) or shorter than ``MIN_TOKENS``
    are left out; a short answer most of the class wrote the same way is marked ``common`` (see COMMON_TOKENS)."""
    is_notebook = release_nb is None or isinstance(release_nb, nbformat.NotebookNode)  # a NotebookNode is a dict
    release_answers = answers(release_nb) if is_notebook else release_nb
    stubs = {gid: normalise(src)[0] for gid, src in release_answers.items()}
    published = {gid: normalise(src)[0] for gid, src in (reference or {}).items()}
    found: dict[tuple[str, str], list[str]] = {}
    sizes: dict[tuple[str, str], int] = {}
    answered: dict[str, int] = {}
    for student, parts in by_student.items():
        for gid, source in (parts or {}).items():
            code, size = normalise(source)
            if size < MIN_TOKENS or code == stubs.get(gid):
                continue
            answered[gid] = answered.get(gid, 0) + 1
            found.setdefault((gid, code), []).append(student)
            sizes[(gid, code)] = size
    groups = []
    for (gid, code), students in found.items():
        is_reference = published.get(gid) == code
        if len(students) < 2 and not is_reference:
            continue
        first = next((line for line in code.splitlines() if not line.startswith(("def ", "@"))), code)
        common = (
            not is_reference
            and sizes[(gid, code)] < COMMON_TOKENS
            and len(students) >= COMMON_MIN
            and len(students) > COMMON_SHARE * answered[gid]
        )
        groups.append(Group(gid, sorted(students), _short(first, 60), is_reference, common))
    return sorted(groups, key=lambda g: (-len(g.students), g.part, g.students))


def identical_answers(
    by_student: dict[str, dict[str, str]], release_nb=None, reference: dict[str, str] | None = None
) -> dict[str, list[str]]:
    """{student: flags} for the students in an :func:`identical_groups` group (not the common ones)."""
    flags: dict[str, list[str]] = {}
    for group in sorted(identical_groups(by_student, release_nb, reference), key=lambda g: (g.part, g.starts)):
        if group.common:
            continue
        for student in group.students:
            others = [s for s in group.students if s != student]
            if len(others) > MAX_NAMES:  # a large group: its size says more than a long list of names
                others = [f"{len(others)} other students ({', '.join(others[:MAX_NAMES])} and more)"]
            if group.reference:
                also = f"; {len(group.students)} students handed it in" if len(group.students) > 1 else ""
                text = f"answer cell {group.part} is the published reference solution{also}"
            else:
                text = f"answer cell {group.part} has the same code as {', '.join(others)}"
            flags.setdefault(student, []).append(
                f"identical answer: {text} (comments, docstrings and blank lines aside; it starts `{group.starts}`)"
            )
    return flags


def in_class(by_student: dict[str, dict[str, str]], key: AnswerKey) -> tuple[dict[str, list[str]], list[Group]]:
    """The class's identical answers against ``key``: ({student: flags}, the groups that are not the common way to
    write a short answer); what the reviewed stage finds in a run and a re-grade's merge finds again in the class."""
    copied = identical_answers(by_student, key.stubs, key.reference)
    groups = [g for g in identical_groups(by_student, key.stubs, key.reference) if not g.common]
    return copied, groups


# ----------------------------------------------------------------------------------------------------------------
# tampering with the grading process

PROTECTED_MODULES = ("builtins", "torch", "numpy", "manyheads")
DEFAULT_ALIASES = {"__builtins__": "builtins", "mh": "manyheads", "np": "numpy", "torch": "torch"}
# Calls that read (or list, or open) the path in their first argument.
FILE_CALLS = {
    "open",
    "builtins.open",
    "io.open",
    "os.open",
    "codecs.open",
    "tokenize.open",
    "os.listdir",
    "os.scandir",
    "os.walk",
    "glob.glob",
    "glob.iglob",
    "numpy.load",
    "numpy.loadtxt",
    "numpy.genfromtxt",
    "numpy.fromfile",
    "numpy.memmap",
    "torch.load",
    "linecache.getline",
    "linecache.getlines",
    "sqlite3.connect",
    "shutil.copy",
    "shutil.copyfile",
    "shutil.copytree",
    "pickle.load",
}
PATH_METHODS = {"read_text", "read_bytes", "open", "iterdir", "glob", "rglob", "write_text", "write_bytes"}
SHELL_CALLS = {"os.system", "os.popen", "subprocess.run", "subprocess.call", "subprocess.check_call"}
SHELL_CALLS |= {"subprocess.check_output", "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput"}
FRAME_CALLS = {
    "sys.settrace": "sets a trace function",
    "sys.setprofile": "sets a profile function",
    "threading.settrace": "sets a trace function",
    "threading.setprofile": "sets a profile function",
    "sys._getframe": "reaches into the call stack's frames",
    "sys._current_frames": "reaches into the call stack's frames",
    "inspect.currentframe": "reaches into the call stack's frames",
    "inspect.stack": "reaches into the call stack's frames",
    "inspect.getouterframes": "reaches into the call stack's frames",
    "importlib.reload": "reloads a module",
    "imp.reload": "reloads a module",
    "os.getenv": "reads an environment variable",
    "os.getenvb": "reads an environment variable",
    "os.putenv": "sets an environment variable",
    "os.unsetenv": "removes an environment variable",
    "os.chdir": "changes the working folder",
    "exec": "runs code built from a string (the scan cannot see inside)",
    "eval": "runs code built from a string (the scan cannot see inside)",
    "compile": "runs code built from a string (the scan cannot see inside)",
}
BUILTIN_CALLS = {"open", "exec", "eval", "compile", "setattr", "delattr", "getattr", "vars"}
MODULES_EDITS = {"pop", "popitem", "update", "setdefault", "clear", "__setitem__", "__delitem__"}


class _Scan(ast.NodeVisitor):
    def __init__(self, label: str, lines: list[str], aliases: dict[str, str], protected: set[str]):
        self.label, self.lines, self.aliases, self.protected = label, lines, aliases, protected
        self.found: list[str] = []
        self.literals: dict[str, str] = {}

    # where a name or an expression comes from: "torch.testing", "builtins.__dict__", "sys.modules", or None
    def origin(self, node) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            return node.id if node.id in BUILTIN_CALLS else None
        if isinstance(node, ast.Attribute):
            base = self.origin(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            func = self.origin(node.func)
            if func in ("vars", "builtins.vars") and node.args:
                base = self.origin(node.args[0])
                return f"{base}.__dict__" if base else None
            if func in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                base, name = self.origin(node.args[0]), node.args[1]
                if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return f"{base}.{name.value}"
            return None
        if isinstance(node, ast.Subscript):
            base = self.origin(node.value)
            key = node.slice
            if base == "sys.modules" and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
            return None
        return None

    def is_protected(self, origin: str | None) -> bool:
        return bool(origin) and (origin.split(".")[0] in PROTECTED_MODULES or origin in self.protected)

    def flag(self, node, what: str) -> None:
        line = node.lineno
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ast.unparse(node)
        entry = f"tampering: {self.label}, line {line}: {what}: `{_short(text.strip())}`"
        if entry not in self.found:
            self.found.append(entry)

    # -- bindings: imports give aliases; rebinding a protected name is tampering
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            target = alias.name if alias.asname else alias.name.split(".")[0]
            self.rebind(node, name, target)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*" and node.module and not node.level:
                self.rebind(node, alias.asname or alias.name, f"{node.module}.{alias.name}")
        self.generic_visit(node)

    def rebind(self, node, name: str, target: str | None) -> None:
        before = self.aliases.get(name)
        if name in self.protected and target != before:
            self.flag(node, f"rebinds `{name}`, which the course's cells or hidden tests define")
        if target is not None:
            self.aliases[name] = target
        else:
            self.aliases.pop(name, None)

    def visit_FunctionDef(self, node) -> None:
        if node.name in self.protected and node.col_offset == 0:
            self.flag(node, f"redefines `{node.name}`, which the course's cells or hidden tests define")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def assigned(self, node, target, verb: str = "assigns") -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self.assigned(node, element, verb)
        elif isinstance(target, ast.Attribute):
            base = self.origin(target.value)
            if self.is_protected(base):
                self.flag(node, f"{verb} an attribute of {base}")
        elif isinstance(target, ast.Subscript):
            base = self.origin(target.value)
            if base == "sys.modules":
                self.flag(node, "edits sys.modules")
            elif base in ("os.environ", "os.environb"):
                self.flag(node, "sets an environment variable")
            elif base == "builtins" or (self.is_protected(base) and base.endswith("__dict__")):
                self.flag(node, f"{verb} an entry of {base}")
        elif isinstance(target, ast.Name) and node.col_offset == 0 and target.id in self.protected:
            self.flag(node, f"rebinds `{target.id}`, which the course's cells or hidden tests define")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.assigned(node, target)
        value = self.origin(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                path = self.path_text(node.value)
                if path is not None:
                    self.literals[target.id] = path  # p = "data.csv"; p = mh.data_path("x"): open(p) is known
                if value and (self.is_protected(value) or value.split(".")[0] in ("os", "sys")):
                    self.aliases[target.id] = value  # F = torch.nn.functional; env = os.environ
        self.generic_visit(node)

    def visit_AugAssign(self, node) -> None:
        self.assigned(node, node.target)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.assigned(node, target, "deletes")
        self.generic_visit(node)

    # -- reads of the environment
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.origin(node) in ("os.environ", "os.environb", "posix.environ"):
            self.flag(node, "reads the environment variables")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and self.aliases.get(node.id) in ("os.environ", "os.environb"):
            self.flag(node, "reads the environment variables")

    # -- calls
    def visit_Call(self, node: ast.Call) -> None:
        func = self.origin(node.func)
        if func is None and isinstance(node.func, ast.Attribute):
            self.method_call(node)
        elif func in ("setattr", "delattr", "builtins.setattr", "builtins.delattr") and node.args:
            base = self.origin(node.args[0])
            if self.is_protected(base) or base == "sys.modules":
                self.flag(node, f"{func.split('.')[-1]} on {base}")
        elif func in FRAME_CALLS:
            self.flag(node, FRAME_CALLS[func])
        elif func in SHELL_CALLS:
            self.flag(node, "runs a shell command (it can read anything the kernel can)")
        elif func in FILE_CALLS:
            self.file_call(node, func)
        elif func and func.rsplit(".", 1)[-1] in MODULES_EDITS and func.rsplit(".", 1)[0] == "sys.modules":
            self.flag(node, "edits sys.modules")
        elif func and func.rsplit(".", 1)[-1] in ("update", "setdefault", "__setitem__", "pop", "__delitem__"):
            base = func.rsplit(".", 1)[0]
            if base.endswith("__dict__") and self.is_protected(base):
                self.flag(node, f"edits {base}")
            elif base in ("os.environ", "os.environb"):
                self.flag(node, "changes the environment variables")
        elif func and func.rsplit(".", 1)[-1] == "__setattr__" and self.is_protected(func.rsplit(".", 1)[0]):
            self.flag(node, f"__setattr__ on {func.rsplit('.', 1)[0]}")
        self.generic_visit(node)

    def method_call(self, node: ast.Call) -> None:
        """``Path(...).read_text()``, ``get_ipython().system(...)``: a method of something that is not a module."""
        attr, owner = node.func.attr, node.func.value
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "get_ipython":
            magic = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if attr in ("system", "getoutput") or (attr == "run_cell_magic" and magic in ("bash", "sh", "script")):
                self.flag(node, "runs a shell command (it can read anything the kernel can)")
            elif attr == "run_line_magic" and magic in ("env", "set_env"):
                self.flag(node, "reads the environment variables")
            elif attr == "run_line_magic" and magic in ("load", "run", "cat", "pycat", "cd"):
                self.flag(node, f"runs the %{magic} magic (files outside the notebook)")
            return
        if attr in PATH_METHODS and isinstance(owner, ast.Call):
            maker = self.origin(owner.func) or (owner.func.id if isinstance(owner.func, ast.Name) else "")
            if maker.split(".")[-1] in ("Path", "PurePath", "PosixPath"):
                self.check_path(node, [owner], f"Path.{attr}")

    def file_call(self, node: ast.Call, func: str) -> None:
        args = list(node.args) or [k.value for k in node.keywords if k.arg in ("file", "path", "fname", "f", "top")]
        self.check_path(node, args[:1], func)

    def path_text(self, node) -> str | None:
        """The path an expression names when it is written out (a string, a name bound to one, a `/` join or
        ``Path(...)`` of those); "" for a path from the course package; None when computed at run time."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.literals:
            return self.literals[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = self.path_text(node.left), self.path_text(node.right)
            return None if left is None or right is None else f"{left}/{right}".replace("//", "/")
        if isinstance(node, ast.Call):
            func = self.origin(node.func) or (node.func.id if isinstance(node.func, ast.Name) else "")
            if func.startswith("manyheads"):
                return ""  # mh.data_path(...), mh.data.*: the course's own data files
            if func.split(".")[-1] in ("Path", "PurePath", "PosixPath", "join") and node.args:
                parts = [self.path_text(a) for a in node.args]
                return None if None in parts else "/".join(parts)
            if func.split(".")[-1] in ("home", "expanduser", "gettempdir", "getcwd", "abspath", "cwd"):
                return "/" + func  # absolute or outside: never the notebook's folder as such
        return None

    def check_path(self, node, args: list, func: str) -> None:
        if not args:
            return
        path = self.path_text(args[0])
        if path == "":  # a path the course package gave (mh.data_path, mh.data.*): its own data files
            return
        if path is None:
            self.flag(node, f"{func} of a path computed at run time (it may lie outside the notebook's folder)")
        elif path.startswith(("/", "~", "\\")) or ".." in re.split(r"[/\\]", path) or re.match(r"^[A-Za-z]:", path):
            self.flag(node, f"{func} of `{_short(path, 50)}`, outside the notebook's folder")


def course_names(release_nb, hidden: Iterable[str] = ()) -> tuple[set[str], dict[str, str]]:
    """(names the release's read-only and test cells define as functions, classes or imports, plus ``hidden``
    helpers; their import aliases): what :func:`tampering` protects. Data variables of demo cells are not
    protected, so that a student may reassign ``q`` or ``tokens`` to experiment."""
    names, aliases = set(hidden), dict(DEFAULT_ALIASES)
    for cell in release_nb.cells if release_nb is not None else []:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        tree = _parse(cell.source)
        for stmt in tree.body if tree else []:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(stmt.name)
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    names.add(a.asname or a.name.split(".")[0])
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for a in stmt.names:
                    if a.name != "*":
                        names.add(a.asname or a.name)
                        aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return names, aliases


def tampering(student_cells: list[tuple[str, str]], release_nb=None, hidden_helpers: Iterable[str] = ()) -> list[str]:
    """Flags for the student's cells (label, source) that reach for the grading process, each with its line.

    With ``release_nb`` the names the course's cells define (``checks``, ``mh``, helper functions) and the hidden
    tests' helpers are protected too. The scan reads code, it does not run it: aliases, ``getattr`` with a
    literal name, ``vars(...)``, ``__dict__`` and ``sys.modules[...]`` are followed; code built from strings is
    flagged as such because it cannot be seen into."""
    protected, aliases = course_names(release_nb, hidden_helpers)
    found: list[str] = []
    for label, source in student_cells:
        tree = _parse(source)
        if tree is None:
            continue  # it does not parse, so it ran nothing
        scan = _Scan(label, source.splitlines(), aliases, protected)
        try:
            scan.visit(tree)
        except RecursionError:  # code nested deeper than Python's stack: say so rather than stop the grading
            scan.found.append(f"tampering: {label}: code nested too deeply to scan (look by hand)")
        aliases = scan.aliases  # a name imported in one cell is known in the next
        found += scan.found
    return found
