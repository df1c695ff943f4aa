"""Own work, the guard that runs in the student's kernel: an answer that hands a graded part to the course's own
implementation of that part gets no points, and the report says so (issue 15; the rule is in every exercise's header).

What counts is read from the exercises' descriptions (:mod:`manyheads.course.exercises`): each graded part names,
in ``computed_by``, the package's functions and classes that compute its answer. Every function in a
``manyheads.checks`` module whose name contains ``reference`` counts too, for every part of that exercise. Nothing
here is written per exercise, so a new exercise is covered by its description alone.

How it works. Each such function (for a class: each method it defines, ``__init__`` excepted) is guarded *in
place*: its code is swapped for a small trampoline, so every way of reaching it (``mh.X``, an alias imported
earlier, ``from … import`` inside the answer, ``importlib.import_module``, ``sys.modules[…]``, ``getattr``) reaches
the guard, and the package's own calls (a check's reference, ``MultiHeadAttention`` calling
``scaled_dot_product_attention``) keep working. A module imported later is guarded as it loads, and again if it is
reloaded. When a guarded function is called while the part's answer is running (a frame of the answer's code is on
the stack of this thread or of the main thread), it raises :class:`OwnWorkError` naming the function and the
student's line; otherwise it runs as before. "The answer" is the object the hidden tests call: the name
``CodePart.function`` in the notebook's namespace (a function, lambda, ``functools.partial``, bound method,
callable object or the course's function itself), or any function of the student's called that name.

* At grading time :func:`require_own_work` runs in the kernel before any student cell (the grader's kernel
  launcher, ``manyheads_grader.execution.sandbox``, in the separate grading distribution under ``grader/``), so the
  hidden tests see the rule; the part's test fails with ``OwnWorkError`` and nbgrader gives it no points.
* In the visible checks (:func:`manyheads.checks.core.call_student`), :func:`answering` applies the same rule while
  the check calls the student's function, so a student learns it in Colab before submitting.
* Library routines a part's text rules out and lists by name (``CodePart.forbidden``: for exercise 1's softmax,
  ``torch.softmax``, ``torch.nn.functional.softmax``, ``Tensor.softmax``, ``torch.nn.Softmax``, the log-softmax
  ones, …) are refused the same way, with one difference: only where the *student's own code* calls them (the
  frame that calls the routine, past ``nn.Module``'s call machinery, is the notebook's), so that the package,
  torch itself and the checks keep using them, and a library function that happens to use one inside is not
  refused (the grader flags such ways around for a human: ``manyheads_grader.review.own_work``). A routine written
  in Python (``torch.nn.functional.softmax``, ``torch.nn.Softmax.forward``) is guarded in place like the course's
  functions; a builtin (``torch.softmax``, ``torch.Tensor.softmax``) is replaced on its owner (the module, or the
  ``torch.Tensor`` class) by a thin Python stand-in that calls it. The stand-ins are set before any cell when
  grading; in Colab at the first check, which also rebinds the notebook's names still bound to a builtin (``from
  torch import softmax`` in a cell above), though not one held inside a ``functools.partial``, a default argument or
  a closure made before that check (the grader still refuses those). Stand-ins stay for the rest of the session;
  their cost is one Python call (about 0.5 µs) with no rule in force, a few µs for the package's calls under the
  grading rule, and about 25 µs for a call from the student's code while it holds; code that scripts
  ``torch.softmax`` with ``torch.jit`` after a check has run would see the stand-in (the course does not).
* The grader reads the evidence back from the graded notebook and looks in the student's cells for the ways
  around the rule that a guard in the same process cannot close (``manyheads_grader.review.own_work``, which reads the
  :data:`MARKER` lines this module writes). ``instructors/grading.md`` lists them.

This module lives with the checks because it runs in the student's kernel (Colab's and the grader's); nothing
here reads notebooks or grades.

The guard is an honesty barrier with evidence, not a sandbox: code in the same interpreter can always reach an
object that the interpreter holds. Its kernel start-up cost is importing this module and the exercise descriptions.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from manyheads.course.exercises import EXERCISES, CodePart, Exercise

__all__ = [
    "OwnWorkError",
    "require_own_work",
    "answering",
    "rule_paragraph",
    "suspended",
    "OWN_WORK_RULE",
    "OWN_WORK_WRITTEN",
    "MARKER",
]

# The paragraph of every exercise's header (release.py adds it) and the start of every report line about the rule.
OWN_WORK_RULE = (
    "**Your own work.** Each answer must compute its result itself. The course package already contains the "
    "answers (that is how the book and the checks compute them), so an answer that calls the package's own "
    "implementation of the part it answers (or a visible check's reference), directly, through an alias or through "
    "a helper, gets no points, and "
    "the check and the grader say so with `OwnWorkError`. Using the package for everything else (the imports, "
    "data, models, plots, and what a part tells you to use) is fine."
)
# The same paragraph for an assignment graded by hand, with no code parts (the capstone).
OWN_WORK_WRITTEN = (
    "**Your own work.** Write the answers in your own words; quote and cite what you take from the chapters or "
    "from papers. Your code may use the course package for everything: no part of this assignment is graded "
    "automatically."
)
MARKER = "[manyheads] own-work rule:"  # starts the line the guard writes to stderr: the report's evidence
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../manyheads
CHECKS_PREFIX = "manyheads.checks."


class OwnWorkError(Exception):
    """An answer called the course's own implementation of the part it answers (the own-work rule)."""


@dataclass(frozen=True)
class _Rule:
    part: CodePart
    entry: Any = None  # the answer as the check was given it; None: look it up in the notebook's namespace


# ------------------------------------------------------------------------------------------------------------------
# the state (one per interpreter)

_lock = threading.RLock()
_standing: dict[str, list[_Rule]] = {}  # target -> rules in force for the whole session (grading)
_checking: list[tuple[frozenset[str], _Rule]] = []  # (targets, rule) while a visible check runs an answer
_graded_parts: list[CodePart] = []  # the graded exercise's parts (they also lose the checks' references)
_trampolines: dict[types.CodeType, _Dispatch] = {}  # trampoline code -> its dispatch (the targets it answers to)
_wanted_modules: set[str] = set()  # modules with targets: guarded on import and on reload
_suspended = threading.local()  # suspended().depth > 0: the checks' rule is off (never the grading rule)
_stand_ins: dict[int, tuple[Any, Any]] = {}  # id(a builtin route) -> (the builtin, its stand-in)


def _targets(part: CodePart) -> tuple[str, ...]:
    return part.computed_by


def _routes(part: CodePart) -> tuple[str, ...]:
    return part.forbidden


ROUTES = frozenset(r for ex in EXERCISES for p in ex.code_parts for r in _routes(p))  # every library route


def _modules_of(target: str) -> set[str]:
    """The modules whose import guards ``target``: a route's every dotted prefix (``torch``, ``torch.nn``, … ; which
    of them is a module is known only once torch is imported), a course function's own module."""
    if target in ROUTES:
        parts = target.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))}
    return {_split(target)[0]}


def _split(target: str) -> tuple[str, str]:
    module, _, attr = target.rpartition(".")
    return module, attr


def _exercise_of_check(check: str) -> tuple[Exercise, CodePart] | None:
    for ex in EXERCISES:
        for part in ex.code_parts:
            if part.check == check:
                return ex, part
    return None


# ------------------------------------------------------------------------------------------------------------------
# guarding functions in place


def _template(*args, **kwargs):
    return "DISPATCH".__call__(args, kwargs)


def _trampoline_code(dispatch: Callable[..., Any], original: types.CodeType | None, name: str = "") -> types.CodeType:
    """Code that calls ``dispatch(args, kwargs)``; it carries the original's name and place, so tracebacks and
    ``inspect.getsource`` still point at the package's source. Without an original (a builtin's stand-in), the code
    is this module's, named ``name``."""
    code = _template.__code__
    consts = tuple(dispatch if c == "DISPATCH" else c for c in code.co_consts)
    if original is None:
        return code.replace(co_consts=consts, co_name=name, co_qualname=name)
    return code.replace(
        co_consts=consts,
        co_name=original.co_name,
        co_qualname=original.co_qualname,
        co_filename=original.co_filename,
        co_firstlineno=original.co_firstlineno,
    )


class _Dispatch:
    """What a trampoline calls: the rule's test, then the original code. One function may answer to several targets
    (a checks module's ``_reference_attention`` is ``scaled_dot_product_attention`` under another name)."""

    __slots__ = ("targets", "_run")

    def __init__(self, target: str, run: Callable[..., Any]):
        self.targets, self._run = [target], run

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        if _checking or (_standing and any(_standing.get(t) for t in self.targets)):  # else (the book): free
            _refuse_unless_own_work(self.targets, sys._getframe(1))
        return self._run(*args, **kwargs)


def _innermost(fn: Any) -> Any:
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 10:  # functools.wraps, torch.no_grad(), lru_cache
        fn, seen = fn.__wrapped__, seen + 1
    return fn


def _guard_function(fn: Any, target: str) -> None:
    """Swap ``fn``'s code for a trampoline dispatching under ``target`` (a ``computed_by`` entry or reference)."""
    fn = _innermost(fn)
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"cannot guard {target}: {type(fn).__name__} is not a Python function")
    if fn.__code__ in _trampolines:
        dispatch = _trampolines[fn.__code__]
        if target not in dispatch.targets:  # the package's own names first, for the messages
            dispatch.targets.append(target)
            dispatch.targets.sort(key=lambda t: (t.startswith(CHECKS_PREFIX), t))
        return
    if fn.__closure__:
        raise TypeError(f"cannot guard {target}: a nested function (closure); guard the function that defines it")
    run = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, None)
    run.__kwdefaults__ = fn.__kwdefaults__
    run.__qualname__ = fn.__qualname__
    try:
        import inspect

        fn.__signature__ = inspect.signature(fn)  # help() and the docs keep the real parameters
    except (TypeError, ValueError):
        pass
    dispatch = _Dispatch(target, run)
    code = _trampoline_code(dispatch, fn.__code__)
    fn.__code__ = code
    _trampolines[code] = dispatch


def _guard_object(obj: Any, target: str) -> None:
    if isinstance(obj, type):
        for name, member in list(vars(obj).items()):
            if name == "__init__" or (name.startswith("__") and name != "__call__"):
                continue
            inner = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            if isinstance(_innermost(inner), types.FunctionType) and not _innermost(inner).__closure__:
                _guard_function(inner, target)  # a method answers to its class's rule
    else:
        _guard_function(obj, target)


def _references(module: types.ModuleType) -> list[str]:
    """The reference implementations a checks module keeps (module-level functions named ``*reference*``)."""
    return [
        f"{module.__name__}.{name}"
        for name, obj in vars(module).items()
        if "reference" in name.lower() and isinstance(_innermost(obj), types.FunctionType)
    ]


def _guard_module(module: types.ModuleType) -> None:
    """Guard every target that lives in ``module`` (called when it is imported, reloaded, or already there)."""
    name = module.__name__
    with _lock:
        targets = {t for t in _standing if t not in ROUTES and _split(t)[0] == name}
        targets |= {t for ts, _ in _checking for t in ts if t not in ROUTES and _split(t)[0] == name}
        routes = {
            t for t in [*_standing, *(t for ts, _ in _checking for t in ts)] if t in ROUTES and name in _modules_of(t)
        }
        if name.startswith(CHECKS_PREFIX) and _graded_parts:
            for target in _references(module):
                targets.add(target)
                for part in _graded_parts:
                    rules = _standing.setdefault(target, [])
                    if all(r.part != part for r in rules):
                        rules.append(_Rule(part))
        for target in sorted(targets):
            obj = getattr(module, _split(target)[1], None)
            if obj is not None:
                _guard_object(obj, target)
        for route in sorted(routes):
            _guard_route(route)


def _resolve(route: str) -> tuple[Any, str, Any] | None:
    """(owner, attribute, object) that the dotted ``route`` names, from the longest prefix already imported;
    None while it is not (it is guarded when its module loads)."""
    parts = route.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        owner = sys.modules.get(".".join(parts[:cut]))
        if owner is None:
            continue
        for attribute in parts[cut:-1]:
            owner = getattr(owner, attribute, None)
        obj = getattr(owner, parts[-1], None) if owner is not None else None
        return (owner, parts[-1], obj) if obj is not None else None
    return None


def _guard_route(route: str) -> None:
    """Guard the library routine ``route``: a Python function in place, an ``nn.Module`` class's ``forward`` in
    place, a builtin by a stand-in on its owner (set once; the stand-in's code is a trampoline too)."""
    found = _resolve(route)
    if found is None:
        return
    owner, attribute, obj = found
    if isinstance(obj, type):  # torch.nn.Softmax: calling an instance runs its forward
        _guard_function(obj.forward, route)
    elif isinstance(_innermost(obj), types.FunctionType):  # F.softmax, or the stand-in set here before
        _guard_function(obj, route)
    elif callable(obj):  # a builtin (torch.softmax, Tensor.softmax's method descriptor)
        dispatch = _Dispatch(route, obj)
        code = _trampoline_code(dispatch, None, attribute)
        stand_in = types.FunctionType(code, globals(), attribute)
        stand_in.__qualname__ = getattr(obj, "__qualname__", attribute)
        stand_in.__doc__ = getattr(obj, "__doc__", None)
        stand_in.__module__ = getattr(owner, "__name__", None) or getattr(owner, "__module__", None)
        _trampolines[code] = dispatch
        _stand_ins[id(obj)] = (obj, stand_in)
        setattr(owner, attribute, stand_in)


def _rebind_builtins(fn: Any) -> None:
    """Names that the answer's namespace (the notebook's) bound to a builtin route before its stand-in was set
    (``from torch import softmax`` in a cell above the first check) now name the stand-in: it calls the same
    builtin. The grading kernel sets the stand-ins before any cell, so this only matters in a visible check."""
    spaces = [getattr(_innermost(code_owner), "__globals__", None) for code_owner in (fn, getattr(fn, "func", None))]
    spaces.append(_notebook_namespace())
    for namespace in {id(ns): ns for ns in spaces if isinstance(ns, dict)}.values():
        for name, value in list(namespace.items()):
            found = _stand_ins.get(id(value))
            if found is not None and found[0] is value:
                namespace[name] = found[1]


class _Loader:  # the loader protocol (no importlib.abc: the kernel's start-up stays light)
    """Runs the real loader, then guards the module's targets."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _guard_module(module)

    def __getattr__(self, name):  # get_source, get_code, is_package, … for inspect and linecache
        return getattr(self._loader, name)


class _Finder:  # the meta path finder protocol
    """Hands the modules that hold targets (and the checks modules) to :class:`_Loader`, on import and on reload."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _wanted_modules and not (_graded_parts and fullname.startswith(CHECKS_PREFIX)):
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _Finder):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and not isinstance(spec.loader, _Loader):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _watch(modules: set[str]) -> None:
    """Guard ``modules`` now if imported, else when they are; keep the finder first on ``sys.meta_path``."""
    with _lock:
        _wanted_modules.update(modules)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
        loaded = [sys.modules[m] for m in modules if m in sys.modules]
        if _graded_parts:
            loaded += [m for n, m in list(sys.modules.items()) if n.startswith(CHECKS_PREFIX) and m is not None]
    for module in loaded:
        _guard_module(module)


# ------------------------------------------------------------------------------------------------------------------
# the rule


def require_own_work(stem: str) -> bool:
    """Apply the own-work rule to exercise ``stem`` for the rest of this interpreter (the grading kernel).

    Cheap: imports nothing of the package's numerical code; modules are guarded as the notebook imports them.
    Returns False (and does nothing) for an assignment the exercises' descriptions do not know.
    """
    ex = next((e for e in EXERCISES if e.stem == stem), None)
    if ex is None:
        return False
    with _lock:
        for part in ex.code_parts:
            for target in (*_targets(part), *_routes(part)):
                rules = _standing.setdefault(target, [])
                if all(r.part != part for r in rules):
                    rules.append(_Rule(part))
            if part not in _graded_parts:
                _graded_parts.append(part)
    _watch({m for p in ex.code_parts for t in (*_targets(p), *_routes(p)) for m in _modules_of(t)})
    return True


def _running_check() -> tuple[CodePart, types.ModuleType | None] | None:
    """(the part whose visible check is running, its checks module): the nearest ``check_*`` frame of a checks
    module on the stack. A new exercise's checks are found by their names in the exercises' descriptions."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if code.co_name.startswith("check_") and module.startswith(CHECKS_PREFIX):
            found = _exercise_of_check(code.co_name)
            if found:
                return found[1], sys.modules.get(module)
        frame = frame.f_back
    return None


@contextmanager
def suspended() -> Iterator[None]:
    """The visible checks' rule off in this block: for the course's own tests, which run the package's computation
    of a part through its check to show that the two agree. The grading rule (:func:`require_own_work`) stays on."""
    _suspended.depth = getattr(_suspended, "depth", 0) + 1
    try:
        yield
    finally:
        _suspended.depth -= 1


@contextmanager
def answering(fn: Any, part: CodePart | None = None) -> Iterator[None]:
    """While the block runs ``fn`` (the student's answer), the own-work rule holds for ``part`` (default: the part
    whose visible check is running). Raises :class:`OwnWorkError` at once if ``fn`` is the course's function."""
    module = None
    if getattr(_suspended, "depth", 0):
        yield
        return
    if part is None:
        found = _running_check()
        part, module = found if found else (None, None)
    if part is None or not (_targets(part) or _routes(part)):
        yield
        return
    targets = set(_targets(part)) | set(_routes(part)) | set(_references(module) if module is not None else ())
    entry = (frozenset(targets), _Rule(part, fn))
    with _lock:
        _checking.append(entry)
    try:
        _watch({m for t in targets for m in _modules_of(t)})
        if _routes(part):
            _rebind_builtins(fn)
        guarded = [t for c in _codes(fn) if c in _trampolines for t in _trampolines[c].targets if t in targets]
        if guarded:
            _refuse(part, guarded[0], None, itself=True)
        yield
    finally:
        with _lock:
            _checking[:] = [e for e in _checking if e is not entry]


def _codes(obj: Any, depth: int = 0) -> set[types.CodeType]:
    """The code objects that run when ``obj`` is called (as far as Python objects show it)."""
    found: set[types.CodeType] = set()
    if obj is None or depth > 6:
        return found
    wrapped = getattr(obj, "__wrapped__", None) if not isinstance(obj, type) else None
    if wrapped is not None and wrapped is not obj:
        found |= _codes(wrapped, depth + 1)
    if isinstance(obj, types.FunctionType):
        found.add(obj.__code__)
    elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
        found |= _codes(obj.__func__, depth + 1)
    elif hasattr(obj, "func") and hasattr(obj, "keywords") and hasattr(obj, "args"):  # functools.partial
        found |= _codes(obj.func, depth + 1)
    elif isinstance(obj, type):
        for name in ("__call__", "__init__", "__new__", "forward"):
            member = obj.__dict__.get(name)
            if member is not None:
                found |= _codes(member, depth + 1)
    elif callable(obj):
        found |= _codes(getattr(type(obj), "__call__", None), depth + 1)  # noqa: B004 (the method, not a test)
        if hasattr(obj, "forward"):  # an nn.Module: calling it runs forward
            found |= _codes(type(obj).forward, depth + 1)
    return found


def _library_dirs() -> tuple[str, ...]:
    """Where installed code lives: the Python installation, the virtual environment, site-packages."""
    import site

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(getattr(site, "getsitepackages", lambda: [])())
    paths.add(getattr(site, "USER_SITE", None) or "")
    return tuple(sorted(os.path.join(os.path.abspath(p), "") for p in paths if p))


_LIBRARIES = _library_dirs()


_FILE_KINDS: dict[str, bool] = {}  # file name -> student's? (a library route asks on every call while a rule holds)


def _is_students(code: types.CodeType) -> bool:
    """Code from the notebook (or any file that is neither the package nor an installed library)."""
    name = code.co_filename
    found = _FILE_KINDS.get(name)
    if found is None:
        if name.startswith(("<frozen", "<built-in")):
            found = False
        else:
            path = os.path.abspath(name) if not name.startswith("<") else name
            found = not path.startswith(PACKAGE_DIR + os.sep) and not path.startswith(_LIBRARIES)
        if len(_FILE_KINDS) < 10_000:
            _FILE_KINDS[name] = found
    return found


# The frames between the code that calls an nn.Module and its forward (torch's call machinery, not a caller)
_MODULE_CALL = frozenset({"_call_impl", "_wrapped_call_impl"})
# Modules whose frames run what another thread handed over (pool.submit(torch.softmax, ...)): the caller is there
_HANDED_OVER = frozenset({"threading", "concurrent.futures.thread"})


def _entry_caller(frame: types.FrameType) -> types.FrameType | None:
    """The frame that called the guarded routine whose trampoline runs in ``frame``, past nn.Module's machinery."""
    caller = frame.f_back
    while caller is not None and caller.f_code.co_name in _MODULE_CALL and not _is_students(caller.f_code):
        caller = caller.f_back
    return caller


def _stacks(frame: types.FrameType | None) -> list[types.FrameType]:
    """The frames of this thread from ``frame`` (the trampoline's) out and, if this is another thread, of the main
    thread (an answer that hands the call to a thread still waits in the main thread)."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    main = threading.main_thread()
    if threading.current_thread() is not main and main.ident is not None:
        frame = sys._current_frames().get(main.ident)
        while frame is not None:
            frames.append(frame)
            frame = frame.f_back
    return frames


def _notebook_namespace() -> dict:
    main = sys.modules.get("__main__")
    return getattr(main, "__dict__", {}) if main is not None else {}


def _refuse_unless_own_work(targets: list[str], frame: types.FrameType) -> None:
    """Raise if the function guarded under ``targets`` (its trampoline runs in ``frame``) is called by the answer of
    a part that must not use it.

    The answer that counts is the *outermost* one on the stack: the one the running test (or check) called. So a
    part may use what another part must not (``multi_head_attention`` calling ``mh.split_heads``, even through a
    ``split_heads = mh.split_heads`` of the student's), and that other part's own test still refuses it. A library
    route counts only where the student's own code calls it (or the answer *is* the routine).
    """
    if all(t in ROUTES for t in targets):
        caller = _entry_caller(frame)
        handed = caller is not None and caller.f_globals.get("__name__") in _HANDED_OVER
        if caller is None or not (_is_students(caller.f_code) or handed):
            return  # the package, torch or a check calls it: theirs to use
    with _lock:
        checking = list(_checking)
        graded = list(_graded_parts)
        standing = {r.part: t for t in reversed(targets) for r in _standing.get(t, ())}
    checked = [(r, next((t for t in targets if t in ts), None)) for ts, r in checking]
    if not standing and not any(t for _, t in checked):
        return
    namespace = _notebook_namespace() if graded else {}
    answers = [(r.part, _codes(r.entry), t) for r, t in checked]
    answers += [(p, _codes(namespace.get(p.function)), standing.get(p)) for p in graded]
    frames = _stacks(frame)
    for i in reversed(range(len(frames))):  # outermost first
        code = frames[i].f_code
        caller = frames[i + 1].f_code if i + 1 < len(frames) else None
        if code in _trampolines and caller is not None and not _is_students(caller):
            continue  # the course's function called by the package itself (MultiHeadAttention → split_heads)
        running = [  # (part, the target it must not use or None, the answer's codes)
            (part, forbidden, codes)
            for part, codes, forbidden in answers
            if code in codes or (code.co_name == part.function and _is_students(code))
        ]
        if not running:
            continue
        part, target, codes = next(((p, t, c) for p, t, c in running if t), (None, None, None))
        if part is None:
            return
        if code in _trampolines or (not _is_students(code) and any(c in _trampolines for c in codes)):
            _refuse(part, target, None, itself=True)  # the answer is the guarded function (or an instance of it)
        _refuse(part, target, _student_line(frames))


def _student_line(frames: list[types.FrameType]) -> str | None:
    """The student's line that made the call (the nearest notebook frame), for the message and the report."""
    for frame in frames:
        if _is_students(frame.f_code) and frame.f_code not in _trampolines:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            return f"line {frame.f_lineno}: {line}" if line else f"line {frame.f_lineno}"
    return None


def _short(target: str) -> str:
    """``mh.X`` for a public name of the package (how students reach it), else the dotted path."""
    module, attr = _split(target)
    public = sys.modules.get("manyheads")
    if module.startswith("manyheads.") and getattr(public, "_NAMES", {}).get(attr) == module:
        return f"mh.{attr}"
    return target


def _refuse(part: CodePart, target: str, where: str | None, itself: bool = False) -> None:
    if target in _routes(part):
        how = f"your answer is {target} itself" if itself else f"called while your {part.function} runs"
        message = (
            f"{part.function}: your answer calls {target}, a library routine that this part rules out "
            f"({how}{'; ' + where if where else ''}). The part asks you to compute it yourself, and its text lists "
            "the routines it does not allow. This part gets no points while the answer calls it."
        )
    else:
        how = "your answer is the course's function itself" if itself else f"called while your {part.function} runs"
        message = (
            f"{part.function}: your answer uses {_short(target)}, the course's own implementation of this part "
            f"({how}{'; ' + where if where else ''}). Answers must be your own work: write the computation yourself. "
            "This part gets no points while the answer calls it."
        )
    if _standing:  # grading: a line in the cell's output, kept even if the answer catches the error
        try:
            sys.stderr.write(f"{MARKER} {part.test_id} {message}\n")
        except Exception:  # a student's replaced stderr must not change what is raised
            pass
    raise OwnWorkError(message)


def rule_paragraph(ex: Exercise, width: int = 115) -> str:
    """The header paragraph that states the rule for exercise ``ex``, naming what each part must not call."""
    import textwrap

    if not ex.code_parts:  # graded by hand (the capstone): the package is a tool here, the words are the work
        return textwrap.fill(OWN_WORK_WRITTEN, width=width, break_long_words=False, break_on_hyphens=False)
    parts = []
    for p in ex.code_parts:
        if _targets(p):
            parts.append(f"`{p.function}` must not call {' or '.join(f'`{_short(t)}`' for t in _targets(p))}")
        if _routes(p):
            parts.append(
                f"`{p.function}` must not call the library routines its part rules out "
                f"({', '.join(f'`{t}`' for t in _routes(p))})"
            )
    text = OWN_WORK_RULE + (f" In this exercise: {'; '.join(parts)}." if parts else "")
    return textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)
