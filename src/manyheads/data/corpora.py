"""Human-labelled data that nobody here wrote: fetched from two registry packages, verified, never committed.

Chapter 5 (pruning) scores heads on Lee's document similarity and on movie-review sentiment; chapters 6-7 measure
the decoder's next-token loss on Lee's background news text (:mod:`manyheads.analysis.language_model`).

Where the files come from (:data:`DATA_FILES` pins each file's sha256, and each step of the way to it):

* ``gensim==4.4.0`` (its wheel for this platform), ``gensim/test/test_data/``: ``lee.cor`` (50 news documents),
  ``similarities0-1.txt`` (the averaged human similarity of every pair of them) and ``lee_background.cor`` (300
  other news documents). Lee, Pincombe & Welsh 2005 (references.bib: ``lee2005empirical``).
* ``vaderSentiment==3.3.2`` (its source distribution), ``additional_resources/hutto_ICWSM_2014.tar.gz``, and in
  that tarball ``movieReviewSnippets_GroundTruth.txt`` (10,605 movie-review sentences, each with its mean human
  sentiment rating). Hutto & Gilbert 2014 (references.bib: ``hutto2014vader``).

Three steps, and only the first touches the network:

1. :func:`fetch_data` (or ``python -m manyheads.data.corpora fetch``; ``make env`` runs it) downloads each package
   with pip -- one named, pinned package at a time, ``--no-deps``, so pip's own settings (``PIP_INDEX_URL``,
   ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``) apply -- reads only the members it needs (never ``extractall``), verifies
   their sha256 and writes them atomically into :func:`data_dir`. Files already there and intact are skipped.
   :func:`extract_data` does the same from an archive already on disk.
2. :func:`data_path`: the verified path of one file, with no network. A missing or corrupt file raises
   :class:`DataFileError` saying what to run.
3. The loaders the chapters call: :func:`lee_documents`, :func:`lee_similarities`, :func:`lee_background_text`,
   :func:`movie_review_snippets`.

The data directory is ``$MANYHEADS_DATA`` if set, else ``$XDG_CACHE_HOME/manyheads/data`` (``~/.cache/manyheads/data``
when ``XDG_CACHE_HOME`` is unset): outside the repository, so the files are never committed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch
from torch import Tensor

from manyheads.models.checkpoints import PretrainedModelError, sha256_of

__all__ = [
    "DATA_FILES",
    "ArchiveMember",
    "DataFile",
    "DataFileError",
    "data_dir",
    "data_path",
    "extract_data",
    "fetch_data",
    "verify_data",
    "lee_documents",
    "lee_similarities",
    "lee_background_text",
    "movie_review_snippets",
    "movie_review_ratings",
]


class DataFileError(PretrainedModelError):
    """A data file is missing, corrupt or could not be fetched; the message says what to run.

    A subclass of :class:`~manyheads.models.checkpoints.PretrainedModelError`, so code that handles a missing
    model handles missing data the same way."""


@dataclass(frozen=True)
class ArchiveMember:
    """One step inside an archive: the member's path and the sha256 its bytes must have."""

    path: str
    sha256: str


@dataclass(frozen=True)
class DataFile:
    """One verified data file: where it comes from and what it must hash to.

    ``members`` is the path from the downloaded archive to the file: the member of the wheel or sdist, then, when
    that member is itself a tarball, the member inside it. Every step's bytes are verified before the next is read.
    """

    name: str  # its file name in data_dir()
    requirement: str  # the pinned package, "name==version"
    kind: str  # "wheel" or "sdist": which distribution of the package holds it
    members: tuple[ArchiveMember, ...]
    citation: str  # key in references.bib
    description: str

    @property
    def sha256(self) -> str:
        return self.members[-1].sha256


_GENSIM = "gensim==4.4.0"
_VADER = "vaderSentiment==3.3.2"
_LEE = "gensim/test/test_data"
_HUTTO = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
_HUTTO_SHA256 = "d5bb07d87474b3eb8d30b4deccbc23f19d742a6c5718fbacc65485b70b95c5fa"

DATA_FILES: dict[str, DataFile] = {
    f.name: f
    for f in (
        DataFile(
            "lee.cor",
            _GENSIM,
            "wheel",
            (ArchiveMember(f"{_LEE}/lee.cor", "a878f9a58f6743c32985c56c2f2f75988386216b38a4023a01fd3bcf7884d93e"),),
            "lee2005empirical",
            "50 short news documents, one per line, latin-1",
        ),
        DataFile(
            "similarities0-1.txt",
            _GENSIM,
            "wheel",
            (
                ArchiveMember(
                    f"{_LEE}/similarities0-1.txt", "23762bc6b728897144dda3d324a2c032dc1e059e1009806226d64b6dd123ed79"
                ),
            ),
            "lee2005empirical",
            "the mean human similarity of each pair of the 50 documents: an upper-triangular 50 x 50 table",
        ),
        DataFile(
            "lee_background.cor",
            _GENSIM,
            "wheel",
            (
                ArchiveMember(
                    f"{_LEE}/lee_background.cor", "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb"
                ),
            ),
            "lee2005empirical",
            "300 further news documents, one per line",
        ),
        DataFile(
            "movieReviewSnippets_GroundTruth.txt",
            _VADER,
            "sdist",
            (
                ArchiveMember(_HUTTO, _HUTTO_SHA256),
                ArchiveMember(
                    "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
                    "c8293b0d942e90e223ea2c0955d969040d1a1be514a978b9af0698940bd13350",
                ),
            ),
            "hutto2014vader",
            "10,605 movie-review sentences with their mean human sentiment rating (-4 to +4)",
        ),
        DataFile(
            "movieReviewSnippets_anonDataRatings.txt",
            _VADER,
            "sdist",
            (
                ArchiveMember(_HUTTO, _HUTTO_SHA256),
                ArchiveMember(
                    "hutto_ICWSM_2014/movieReviewSnippets_anonDataRatings.txt",
                    "658a086bc7239b98b750baa232cab80e6447789020f96a6c847cc1248d7c82f4",
                ),
            ),
            "hutto2014vader",
            "each of the 10,605 sentences' individual ratings (15-29 raters each), their mean and standard deviation",
        ),
    )
}

# The sdist is the same file on every platform, so it is pinned too: pip checks this before it runs the sdist's
# setup.py to read its metadata. (A wheel differs per platform and Python, so only its members are pinned.)
_SDIST_SHA256 = {_VADER: "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"}
# When this Python has no wheel of the package (a Python newer than the release), any wheel will do: the data
# members are the same in all of them.
_FALLBACK_WHEEL = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.12", "--implementation", "cp"]
_MAX_MEMBER_BYTES = 64 << 20  # the largest member read is 2.3 MB; refuse anything that claims to be huge
_FETCH = "python -m manyheads.data.corpora fetch"
_HOW_TO = (
    f"Fetch the course's data files (once, from PyPI) with:\n    {_FETCH}\n"
    "(from a clone of the course, `make env` does it; set MANYHEADS_DATA to keep them in another folder)."
)


def data_dir() -> Path:
    """Where the data files live: ``$MANYHEADS_DATA``, else ``$XDG_CACHE_HOME/manyheads/data`` (or ~/.cache/...)."""
    if os.environ.get("MANYHEADS_DATA"):
        return Path(os.environ["MANYHEADS_DATA"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(cache).expanduser() / "manyheads" / "data"


def _entry(name: str) -> DataFile:
    if name not in DATA_FILES:
        raise ValueError(f"unknown data file {name!r}; the course's data files are: {', '.join(DATA_FILES)}")
    return DATA_FILES[name]


def data_path(name: str) -> Path:
    """The path of the data file ``name`` (a key of :data:`DATA_FILES`), its sha256 verified. No network.

    Raises :class:`DataFileError`, naming the file and the command to run, when it is missing or corrupt.
    """
    entry = _entry(name)
    path = data_dir() / entry.name
    if not path.is_file():
        raise DataFileError(f"The data file {entry.name} ({entry.description}) is not in {path.parent}. {_HOW_TO}")
    actual = sha256_of(path)
    if actual != entry.sha256:
        raise DataFileError(
            f"{path} is corrupt: its sha256 is {actual}, expected {entry.sha256}. Fetch it again (the command "
            f"replaces corrupt files) with:\n    {_FETCH}\n(from a clone of the course, `make env` does it)."
        )
    return path


def verify_data(names: Iterable[str] | None = None) -> dict[str, str]:
    """``{name: problem}`` for each data file that is missing or corrupt (empty when all are fine). No network."""
    problems = {}
    for name in DATA_FILES if names is None else names:
        try:
            data_path(name)
        except DataFileError as error:
            problems[name] = str(error)
    return problems


def fetch_data(names: Iterable[str] | None = None, *, log=print) -> dict[str, Path]:
    """Download (with pip) and verify the data files that are missing or corrupt; ``{name: path}`` of all asked for.

    The only function here that touches the network. ``names``: keys of :data:`DATA_FILES` (default: all).
    ``log``: where progress lines go (``None`` for silence). Raises :class:`DataFileError` when pip fails or an
    extracted file has the wrong sha256 (nothing is written then).
    """
    names = list(DATA_FILES if names is None else names)
    wanted = [_entry(name) for name in names]
    log = log or (lambda *_: None)
    missing = [entry for entry in wanted if verify_data([entry.name])]
    for entry in wanted:
        if entry not in missing:
            log(f"{entry.name}: verified, already in {data_dir()}")
    for requirement, kind in dict.fromkeys((e.requirement, e.kind) for e in missing):
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="manyheads-fetch-") as tmp:
            archive = _download(requirement, kind, Path(tmp))
            extract_data(archive, [e.name for e in missing if e.requirement == requirement], log=log)
        log(f"({requirement} {kind}: {time.perf_counter() - start:.1f} s)")
    return {name: data_path(name) for name in names}


def extract_data(archive: str | Path, names: Iterable[str] | None = None, *, log=print) -> dict[str, Path]:
    """Verify and install data files from a wheel or sdist already on disk (no network); ``{name: path}``.

    ``names`` defaults to every file that the archive's package (read from its file name) provides. Only the named
    members are read; each step's sha256 is checked before the file is written, atomically, into :func:`data_dir`.
    """
    archive = Path(archive)
    log = log or (lambda *_: None)
    if names is None:
        stem = archive.name.lower().replace("-", "_")
        names = [n for n, e in DATA_FILES.items() if stem.startswith(e.requirement.split("==")[0].lower() + "_")]
        if not names:
            raise DataFileError(f"{archive.name} is not an archive of a package the course takes data files from.")
    paths = {}
    for name in names:
        entry = _entry(name)
        data = _read_member_chain(archive, entry.members)
        paths[name] = _write_atomically(data_dir(), entry.name, data)
        log(f"{entry.name}: verified, written to {paths[name]}")
    return paths


def _download(requirement: str, kind: str, dest: Path) -> Path:
    """pip-download one pinned distribution of one package into ``dest``; its path."""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest)]
    pip += ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
    if kind == "wheel":
        attempts = [[*pip, "--only-binary", ":all:", requirement]]
        attempts.append([*attempts[0][:-1], *_FALLBACK_WHEEL, requirement])
    else:
        # Pinned by hash, so pip refuses a different file before running its setup.py. Without build isolation pip
        # reads the metadata with the setuptools already installed instead of installing one first (8-20 s → 2.5 s).
        pinned = dest / "requirement.txt"
        pinned.write_text(f"{requirement} --hash=sha256:{_SDIST_SHA256[requirement]}\n")
        base = [*pip, "--no-binary", ":all:", "--require-hashes", "-r", str(pinned)]
        attempts = [base] if importlib.util.find_spec("setuptools") is None else [[*base, "--no-build-isolation"]]
    for command in attempts:
        done = subprocess.run(command, capture_output=True, text=True)
        found = [p for p in dest.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip"))]
        if done.returncode == 0 and len(found) == 1:
            return found[0]
        if "No matching distribution" not in done.stdout + done.stderr:
            break  # a network or index problem: another platform's wheel will not help
    lines = (done.stdout + done.stderr).strip().splitlines()
    tail = "\n".join([line for line in lines if "ERROR" in line] or lines[-8:])
    raise DataFileError(
        f"pip could not download the {kind} of {requirement} (exit {done.returncode}):\n{tail}\n"
        "It needs the Python package index (or PIP_INDEX_URL / PIP_FIND_LINKS pointing to a copy)."
    )


def _read_member_chain(archive: Path, members: tuple[ArchiveMember, ...]) -> bytes:
    """The bytes at the end of ``members``: each member read from the previous one, each one's sha256 checked."""
    source: Path | bytes = archive
    where = archive.name
    for member in members:
        data = _read_member(source, where, member.path)
        actual = hashlib.sha256(data).hexdigest()
        if actual != member.sha256:
            raise DataFileError(
                f"{member.path} in {where} has sha256 {actual}, expected {member.sha256}: the package differs from "
                "the one the course pinned. Nothing was written."
            )
        source, where = data, f"{where}:{member.path}"
    return data


def _safe_member_path(name: str) -> str:
    """``name`` if it is a plain relative path inside an archive; otherwise a :class:`DataFileError`."""
    path = PurePosixPath(name)
    if not name or "\\" in name or path.is_absolute() or ".." in path.parts or ":" in path.parts[0]:
        raise DataFileError(f"refusing archive member {name!r}: not a plain relative path (path traversal).")
    return name


def _read_member(source: Path | bytes, where: str, name: str) -> bytes:
    """One regular-file member of a zip (wheel) or tar (sdist, .tar.gz) archive, a path or bytes; nothing else is
    read, and nothing is written."""
    name = _safe_member_path(name)
    with io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb") as f:
        if zipfile.is_zipfile(f):
            with zipfile.ZipFile(f) as z:
                try:
                    info = z.getinfo(name)
                except KeyError:
                    raise DataFileError(f"{where} has no member {name}.") from None
                _check_size(info.file_size, where, name)
                return z.read(info)
        f.seek(0)
        try:
            tar = tarfile.open(fileobj=f, mode="r:*")
        except tarfile.TarError as error:
            raise DataFileError(f"{where} is neither a zip nor a tar archive ({error}).") from None
        with tar:
            try:
                info = tar.getmember(name)
            except KeyError:
                raise DataFileError(f"{where} has no member {name}.") from None
            if not info.isreg():  # a link could point anywhere, in the archive or on this machine
                raise DataFileError(f"refusing archive member {name!r} in {where}: it is a link or a folder.")
            _check_size(info.size, where, name)
            return tar.extractfile(info).read()


def _check_size(size: int, where: str, name: str) -> None:
    if size > _MAX_MEMBER_BYTES:
        raise DataFileError(f"refusing archive member {name!r} in {where}: {size} bytes is far more than expected.")


def _write_atomically(folder: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``folder / name`` through a temporary file in ``folder``: no reader sees half a file."""
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise DataFileError(f"refusing to write {name!r}: not a plain file name.")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{name}.", delete=False) as tmp:
        tmp.write(data)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.chmod(tmp.name, 0o644)  # a temporary file is created private; the data is public
    path = folder / name
    os.replace(tmp.name, path)
    return path


# ---- loaders -------------------------------------------------------------------------------------------------------


def _lines(name: str, encoding: str, newline: str = "\n") -> list[str]:
    return data_path(name).read_bytes().decode(encoding).split(newline)


def lee_documents() -> list[str]:
    """Lee's 50 news documents (``lee.cor``), in the order :func:`lee_similarities` indexes them (chapter 5).

    Short Australian news items (45-126 words). Read as latin-1, as gensim does (one holds a '£').
    Lee, Pincombe & Welsh 2005 (references.bib: ``lee2005empirical``).
    """
    docs = [line.rstrip() for line in _lines("lee.cor", "latin-1")]
    if len(docs) != 50:
        raise DataFileError(f"lee.cor holds {len(docs)} documents, expected 50.")
    return docs


def lee_similarities() -> Tensor:
    """Mean human similarity of every pair of :func:`lee_documents`: a symmetric (50, 50) float32 tensor (chapter 5).

    The file (``similarities0-1.txt``) holds only the upper triangle of a 50 x 50 table (its diagonal is 1, its lower
    triangle 0); this mirrors it, so ``sims[i, j] == sims[j, i]`` and the diagonal stays 1. The 1,225 distinct pairs
    are ``torch.triu_indices(50, 50, offset=1)``. Values run from 0.2 to 1.0: each is a mean rating on a 1-5 scale
    divided by 5, over about 10 raters (inferred from the values: every one is k / (5n) for an n from 8 to 12, and
    n = 10 fits all but 61 of the 1,225).
    Lee, Pincombe & Welsh 2005 (references.bib: ``lee2005empirical``).
    """
    rows = [line.split("\t") for line in _lines("similarities0-1.txt", "ascii") if line]
    table = torch.tensor([[float(x) for x in row] for row in rows], dtype=torch.float32)
    if table.shape != (50, 50) or table.tril(-1).any() or not torch.all(table.diagonal() == 1):
        raise DataFileError("similarities0-1.txt is not the upper-triangular 50 x 50 table it should be.")
    return table + table.triu(1).T


def lee_background_text() -> str:
    """Lee's 300 background news documents (``lee_background.cor``) as one text, a newline between documents.

    About 60,000 words of ordinary English news that the course's models did not see as course data: the text
    chapters 6-7 measure the decoder's next-token loss on. ``text.split("\\n")`` gives the 300 documents.
    Lee, Pincombe & Welsh 2005 (references.bib: ``lee2005empirical``).
    """
    docs = [line.rstrip() for line in _lines("lee_background.cor", "latin-1")]
    if len(docs) != 300:
        raise DataFileError(f"lee_background.cor holds {len(docs)} documents, expected 300.")
    return "\n".join(docs)


def movie_review_snippets() -> tuple[list[str], Tensor]:
    """``(texts, ratings)``: 10,605 movie-review sentences and their mean human sentiment rating (chapter 5).

    ``ratings`` is a float32 tensor (10605,); each is the mean of 15-29 raters' integer ratings on the scale -4
    (extremely negative) to +4 (extremely positive), 0 neutral; the file's means run from -3.875 to +3.941.
    The sentences are Rotten Tomatoes snippets (from Pang & Lee's reviews); file order, whose ids run 1 ... 10605.
    Hutto & Gilbert 2014 (references.bib: ``hutto2014vader``) (the VADER paper).
    """
    records = [line.split("\t") for line in _lines("movieReviewSnippets_GroundTruth.txt", "utf-8", "\r\n")]
    if len(records) != 10605 or any(len(r) != 3 for r in records):
        raise DataFileError("movieReviewSnippets_GroundTruth.txt does not hold 10,605 'id<TAB>rating<TAB>text' lines.")
    if [int(r[0]) for r in records] != list(range(1, 10606)):
        raise DataFileError("movieReviewSnippets_GroundTruth.txt: the ids are not 1 ... 10605 in order.")
    return [r[2] for r in records], torch.tensor([float(r[1]) for r in records], dtype=torch.float32)


def movie_review_ratings() -> list[list[int]]:
    """Each movie-review sentence's individual human ratings (integers from -4 to +4), in the order of
    :func:`movie_review_snippets` (ids 1 ... 10605): how many people rated each one, and how much they agreed.

    The raw file of Hutto & Gilbert 2014 (references.bib: ``hutto2014vader``); each line's listed mean is checked
    against its ratings, so a file that does not hold what the means in ``movieReviewSnippets_GroundTruth.txt``
    were computed from is refused.
    """
    name = "movieReviewSnippets_anonDataRatings.txt"
    ratings = []
    for number, line in enumerate(_lines(name, "utf-8", "\n"), start=1):
        fields = line.rstrip("\r").split("\t")
        values = fields[3].strip("[] ").split(",") if len(fields) == 4 else []
        try:
            row = [int(v) for v in values]
            mean = float(fields[1])
        except (ValueError, IndexError):
            row, mean = [], float("nan")
        if fields[0] != str(number):
            raise DataFileError(f"{name}: line {number} does not start with the id {number}.")
        if not row or any(abs(v) > 4 for v in row) or abs(sum(row) / len(row) - mean) > 1e-6:
            raise DataFileError(
                f"{name}: line {number} is not 'id<TAB>mean<TAB>sd<TAB>[ratings -4..4]' with that mean."
            )
        ratings.append(row)
    if len(ratings) != 10605:
        raise DataFileError(f"{name} holds {len(ratings)} sentences, expected 10,605.")
    return ratings


# ---- command line --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m manyheads.data.corpora fetch|verify [NAME ...]``: exit 0 when every file asked for is verified."""
    parser = argparse.ArgumentParser(prog="python -m manyheads.data.corpora", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["fetch", "verify"], help="fetch what is missing or corrupt, or only check")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"data files (default: all): {', '.join(DATA_FILES)}")
    args = parser.parse_args(argv)
    names = args.names or list(DATA_FILES)
    unknown = [n for n in names if n not in DATA_FILES]
    if unknown:
        parser.error(f"unknown data file(s) {', '.join(unknown)}; choose from {', '.join(DATA_FILES)}")
    if args.command == "fetch":
        start = time.perf_counter()
        try:
            fetch_data(names)
        except DataFileError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"{len(names)} data files verified in {data_dir()} ({time.perf_counter() - start:.1f} s).")
        return 0
    problems = verify_data(names)
    for name in names:
        print(f"{name}: {'MISSING OR CORRUPT' if name in problems else 'verified'}")
    for problem in problems.values():
        print(f"\n{problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
