"""The course as students and readers get it: one commit per version, found from git's history.

A release is the commit that set ``[project] version`` in pyproject.toml to ``X.Y.Z``. Everything a user reaches
names it: the book's launch buttons and the README's Colab links (``_config.yml``'s ``repository.branch`` is the tag
``vX.Y.Z``), the set-up cell's install (``git+<url>@vX.Y.Z``) and the published site (the Pages workflow runs on
that tag). A clone of the repository need not have the tag (``git clone`` of a fork, CI's checkout), so the tag is
resolved here from the history, never looked up: :func:`release_commit`. That needs the whole history; a shallow
clone gets :class:`HistoryMissing`, whose message says to clone with full history.

``python -m manyheads.course.delivery check-tag vX.Y.Z`` (the Pages workflow, before it publishes) fails unless the
checked-out commit is the release of that version.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile
from functools import cache
from pathlib import Path

from manyheads.course.layout import REPO_ROOT

__all__ = [
    "HistoryMissing",
    "ReleaseNotFound",
    "archive",
    "git",
    "installed_ref",
    "linked_ref",
    "notebooks_at",
    "read_at",
    "release_commit",
    "resolve_ref",
    "version_at",
]

TAG = re.compile(r"v(\d+\.\d+\.\d+)")
# The set-up cell's install line (manyheads.course.hygiene.setup_cell_source writes it).
INSTALL_LINE = re.compile(r'^COURSE_PACKAGE = "manyheads(?:\[[\w,]+\])? @ git\+(?P<url>\S+?)@(?P<ref>[\w.\-/]+)"', re.M)
FULL_HISTORY = (
    "clone with full history: `git fetch --unshallow` in this clone, or `fetch-depth: 0` for actions/checkout"
)


class HistoryMissing(RuntimeError):
    """The clone has no history (shallow, or no git at all): a release cannot be found. Says what to do."""


class ReleaseNotFound(LookupError):
    """No commit in the history sets the version a link or install names."""


def git(*args: str, root: Path = REPO_ROOT, binary: bool = False) -> str | bytes:
    """Run git in ``root``; its stdout. :class:`HistoryMissing` when ``root`` is not a git clone."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise HistoryMissing(f"git is not installed; install it and {FULL_HISTORY}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        if "not a git repository" in message:
            raise HistoryMissing(f"{root} is not a git clone ({message}): {FULL_HISTORY}")
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout if binary else done.stdout.decode()


def require_full_history(root: Path = REPO_ROOT) -> None:
    """:class:`HistoryMissing` unless ``root`` is a git clone with its whole history."""
    if git("rev-parse", "--is-shallow-repository", root=root).strip() == "true":
        raise HistoryMissing(f"{root} is a shallow clone, so its releases cannot be found: {FULL_HISTORY}")


def _version_of(pyproject: str) -> str | None:
    table = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", pyproject, re.MULTILINE | re.DOTALL)
    found = table and re.search(r'^version\s*=\s*"([^"]*)"', table.group(1), re.MULTILINE)
    return found.group(1) if found else None


def read_at(commit: str, path: str, root: Path = REPO_ROOT) -> bytes | None:
    """The bytes of ``path`` at ``commit`` (from git's objects, not the working tree), or None if it has none."""
    try:
        return git("show", f"{commit}:{path}", root=root, binary=True)
    except subprocess.CalledProcessError:
        return None


def version_at(commit: str, root: Path = REPO_ROOT) -> str | None:
    """The course version (pyproject.toml's ``[project] version``) at ``commit``."""
    text = read_at(commit, "pyproject.toml", root)
    return _version_of(text.decode()) if text is not None else None


@cache
def _release_commits(root: Path, head: str) -> dict[str, str]:
    """{version: the commit that set it}, over ``head``'s history (the newest such commit per version)."""
    found: dict[str, str] = {}
    log = git("log", "--format=%H %P", head, "--", "pyproject.toml", root=root).splitlines()
    # --format=%P under a path filter gives rewritten parents; the real ones decide what changed.
    for line in log:
        commit = line.split()[0]
        version = version_at(commit, root)
        if version is None or version in found:
            continue
        parents = git("rev-list", "--parents", "-n", "1", commit, root=root).split()[1:]
        if all(version_at(p, root) != version for p in parents):
            found[version] = commit
    return found


def release_commit(version: str, root: Path = REPO_ROOT, head: str = "HEAD") -> str:
    """The commit that set ``version`` in pyproject.toml: the release ``v<version>``, found in ``head``'s history.

    A local tag ``v<version>``, if there is one, must point at the same commit (a tag on another commit would
    publish a book that the tests never saw); the tag is not needed."""
    require_full_history(root)
    head_commit = git("rev-parse", "--verify", f"{head}^{{commit}}", root=root).strip()
    found = _release_commits(Path(root).resolve(), head_commit).get(version)
    if found is None:
        known = ", ".join(sorted(_release_commits(Path(root).resolve(), head_commit))) or "none"
        raise ReleaseNotFound(
            f"no commit in the history of {head} sets version {version} in pyproject.toml (versions set: {known}); "
            "a link or set-up cell names a release that was never cut: see the README's Releasing"
        )
    try:
        tagged = git("rev-parse", "--verify", "-q", f"refs/tags/v{version}^{{commit}}", root=root).strip()
    except subprocess.CalledProcessError:
        tagged = ""
    if tagged and tagged != found:
        raise ReleaseNotFound(
            f"the tag v{version} points at {tagged[:12]}, but the commit that set version {version} is {found[:12]}: "
            f"move the tag (git tag -f v{version} {found[:12]}) before pushing it"
        )
    return found


def resolve_ref(ref: str, root: Path = REPO_ROOT, head: str = "HEAD") -> str:
    """The commit a link or an install names: a release tag ``vX.Y.Z`` through :func:`release_commit`, anything
    else (a branch, as the course linked before releases were the unit; a commit) through git."""
    tag = TAG.fullmatch(ref)
    if tag:
        return release_commit(tag.group(1), root, head)
    require_full_history(root)
    return git("rev-parse", "--verify", f"{ref}^{{commit}}", root=root).strip()


def linked_ref(root: Path = REPO_ROOT, commit: str | None = None) -> str:
    """The ref the book's launch buttons and the README's links name: ``_config.yml``'s ``repository.branch``, in
    the working tree or at ``commit``."""
    if commit is None:
        text = (Path(root) / "_config.yml").read_text(encoding="utf-8")
    else:
        text = (read_at(commit, "_config.yml", root) or b"").decode()
    block = re.search(r"^repository:\n((?:[ \t]+.*\n?)+)", text, re.MULTILINE)
    branch = block and re.search(r"^\s+branch:\s*(\S+)", block.group(1), re.MULTILINE)
    if not branch:
        raise ValueError("_config.yml's `repository:` block needs `branch:` (the release tag the links name)")
    return branch.group(1)


def installed_ref(setup_cell: str) -> tuple[str, str] | None:
    """(url, ref) that a notebook's set-up cell installs the course from, or None if it has no install line."""
    found = INSTALL_LINE.search(setup_cell)
    return (found.group("url"), found.group("ref")) if found else None


def notebooks_at(commit: str, root: Path = REPO_ROOT) -> list[str]:
    """The course's notebooks at ``commit``: chapters, student versions and nbgrader sources (paths)."""
    listed = git("ls-tree", "-r", "--name-only", commit, "--", "chapters", "exercises", "solutions", root=root)
    return sorted(p for p in listed.splitlines() if p.endswith(".ipynb") and ".ipynb_checkpoints" not in p)


def archive(commit: str, dest: Path, root: Path = REPO_ROOT) -> Path:
    """The tree of ``commit`` written into ``dest`` (``git archive``: git's objects, not the working tree)."""
    data = git("archive", "--format=tar", commit, root=root, binary=True)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "check-tag" or not TAG.fullmatch(args[1]):
        print("usage: python -m manyheads.course.delivery check-tag vX.Y.Z", file=sys.stderr)
        return 2
    tag = args[1]
    try:
        release = release_commit(tag[1:], root)
    except (HistoryMissing, ReleaseNotFound) as exc:
        print(exc, file=sys.stderr)
        return 1
    head = git("rev-parse", "HEAD", root=root).strip()
    linked = linked_ref(root)
    if head != release or linked != tag:
        print(
            f"{tag} is not this commit's release: HEAD is {head[:12]}, the commit that set {tag[1:]} is "
            f"{release[:12]}, and _config.yml links {linked}",
            file=sys.stderr,
        )
        return 1
    print(f"{tag} is the release commit {release[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
