"""Cut a release: everything a user reaches names version X.Y.Z (README, "Releasing"; ``make release VERSION=X.Y.Z``).

Writes the version into pyproject.toml and ``manyheads.__version__``; the ref of the book's launch buttons
(``_config.yml``'s ``repository.branch``) and of the README's Colab links becomes the tag ``vX.Y.Z``; the changelog's
``[Unreleased]`` section becomes ``[X.Y.Z] - <today>`` with its link; then every chapter and solution gets the set-up
cell and metadata of the new version (``make clean-notebooks``) and the student versions are generated again
(``make exercises``). It commits nothing: the maintainer reviews, commits (that commit is the release, found from
the history by manyheads.course.delivery), runs ``make test`` on it and pushes the tag.
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _replace(path: Path, pattern: str, replacement: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    new, found = re.subn(pattern, replacement, text, count=count, flags=re.MULTILINE)
    if not found:
        raise SystemExit(f"{path.name}: found nothing to replace for {pattern!r}; fix it by hand and retry")
    path.write_text(new, encoding="utf-8")


def write_version(version: str, root: Path = ROOT, today: datetime.date | None = None) -> None:
    """Every file that names the release, rewritten for ``version`` (the notebooks are left to hygiene/release)."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise SystemExit(f"a version is X.Y.Z, not {version!r}")
    tag = f"v{version}"
    _replace(root / "pyproject.toml", r'^(\[project\]\n(?:.*\n)*?version = )"[^"]*"', rf'\g<1>"{version}"')
    _replace(root / "src" / "manyheads" / "__init__.py", r'^__version__ = "[^"]*"', f'__version__ = "{version}"')
    # The grader (grader/, its own distribution) has the course's version and requires exactly that course release.
    _replace(root / "grader" / "pyproject.toml", r'^(\[project\]\n(?:.*\n)*?version = )"[^"]*"', rf'\g<1>"{version}"')
    _replace(root / "grader" / "pyproject.toml", r'"manyheads==[^"]*"', f'"manyheads=={version}"')
    _replace(root / "_config.yml", r"^(repository:\n(?:[ \t]+.*\n)*?[ \t]+branch:[ \t]*)\S+", rf"\g<1>{tag}")
    _replace(
        root / "README.md", r"(colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/)[\w.-]+/", rf"\g<1>{tag}/", 0
    )
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text(encoding="utf-8")
    if f"## [{version}]" not in text:
        date = (today or datetime.date.today()).isoformat()
        text = text.replace("## [Unreleased]\n", f"## [Unreleased]\n\n## [{version}] - {date}\n", 1)
        url = re.search(
            r"^repository:\n(?:[ \t]+.*\n)*?[ \t]+url:[ \t]*(\S+)", (root / "_config.yml").read_text(), re.M
        )
        links = re.search(r"^\[\d+\.\d+\.\d+\]: ", text, re.MULTILINE)
        line = f"[{version}]: {url.group(1)}/releases/tag/{tag}\n"
        text = text[: links.start()] + line + text[links.start() :] if links else text.rstrip("\n") + "\n\n" + line
        text = re.sub(r"(/compare/)v[\d.]+(\.\.\.HEAD)", rf"\g<1>{tag}\g<2>", text)
        changelog.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="X.Y.Z")
    args = parser.parse_args(argv)
    write_version(args.version)
    python = sys.executable
    subprocess.run([python, "-m", "manyheads.course.hygiene", "clean"], cwd=ROOT, check=True)
    subprocess.run([python, "-m", "manyheads.course.release"], cwd=ROOT, check=True)
    print(
        f"Version {args.version} written. Review the diff and CHANGELOG.md, then commit (that commit is the release "
        f"v{args.version}), run `make test`, and push the tag: git tag -a v{args.version} -m 'Many Heads "
        f"{args.version}' && git push origin v{args.version}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
