"""manyheads.data.corpora: the human-labelled data files verify and load with their documented shapes; a missing or
corrupt file gives an error that names it and the command to run; extraction from real (locally built) wheel and
sdist archives reads only the pinned members, checks every sha256 and refuses path traversal and links. No test here
touches the network: the files come from `make env` (python -m manyheads.data.corpora fetch)."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch

import manyheads as mh
from manyheads.data import corpora
from manyheads.models.checkpoints import PretrainedModelError

FETCH = "python -m manyheads.data.corpora fetch"
GENSIM_FILES = ["lee.cor", "similarities0-1.txt", "lee_background.cor"]


@pytest.fixture
def empty_data_dir(tmp_path, monkeypatch) -> Path:
    """A fresh MANYHEADS_DATA folder (the real files stay where they are)."""
    folder = tmp_path / "data"
    monkeypatch.setenv("MANYHEADS_DATA", str(folder))
    return folder


@pytest.fixture(scope="session")
def real() -> dict[str, bytes]:
    """Every real data file's bytes, read (and verified) from the real data folder before any test moves it."""
    return {name: corpora.data_path(name).read_bytes() for name in corpora.DATA_FILES}


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _tar_gz(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


def _fake_gensim_wheel(folder: Path, real: dict[str, bytes], **changed: bytes) -> Path:
    """A wheel-shaped zip holding the three real members (or ``changed`` bytes), other files and a hostile name."""
    members = {f"gensim/test/test_data/{name}": real[name] for name in GENSIM_FILES}
    members.update({f"gensim/test/test_data/{name}": data for name, data in changed.items()})
    members["gensim/__init__.py"] = b"raise SystemExit('never imported')\n"
    members["../outside.txt"] = b"a member that would land outside the folder"
    return _zip(folder / "gensim-4.4.0-py3-none-any.whl", members)


# ---- the real files ------------------------------------------------------------------------------------------------


def test_every_real_file_verifies():
    assert corpora.verify_data() == {}
    for name, entry in corpora.DATA_FILES.items():
        path = corpora.data_path(name)
        assert path.name == name and hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256


def test_lee_documents_are_the_50_news_documents():
    docs = mh.lee_documents()
    assert len(docs) == 50 and all(isinstance(d, str) for d in docs)
    assert docs[0].startswith("The national executive of the strife-torn Democrats")
    words = [len(d.split()) for d in docs]
    assert min(words) == 45 and max(words) == 126  # facts.md: 45-126 whitespace tokens per document
    assert any("£" in d for d in docs)  # latin-1 decoded, as gensim reads it
    assert not any("\n" in d or d != d.strip() for d in docs)


def test_lee_similarities_are_symmetric_human_scores_over_1225_pairs():
    sims = mh.lee_similarities()
    assert sims.shape == (50, 50) and sims.dtype == torch.float32
    torch.testing.assert_close(sims, sims.T, rtol=0, atol=0)
    assert torch.all(sims.diagonal() == 1)
    i, j = torch.triu_indices(50, 50, offset=1)
    pairs = sims[i, j]
    assert pairs.numel() == 1225
    assert pairs.min().item() == pytest.approx(0.2) and pairs.max().item() == pytest.approx(1.0)
    assert pairs.mean().item() == pytest.approx(0.327, abs=5e-4)  # facts.md
    # The docstring's reading of the values: means of 1-5 ratings over n = 8 to 12 raters, divided by 5.
    ks = torch.stack([pairs.double() * 5 * n for n in (8, 9, 10, 11, 12)])
    is_k_over_5n = (ks - ks.round()).abs() < 1e-5
    assert torch.all(is_k_over_5n.any(0)) and int((~is_k_over_5n[2]).sum()) == 61  # n = 10: all but 61
    # The raw file really is upper-triangular: the loader mirrored it.
    raw = corpora.data_path("similarities0-1.txt").read_text().split("\n")[1].split("\t")
    assert raw[0] == "0" and float(raw[2]) == pytest.approx(sims[1, 2].item())


def test_lee_background_text_is_300_documents_of_real_english():
    text = mh.lee_background_text()
    docs = text.split("\n")
    assert len(docs) == 300 and all(len(d.split()) >= 45 for d in docs)
    assert len(text.split()) > 50_000
    assert text.count(" the ") > 2_000  # English prose, not a table of numbers


def test_movie_review_snippets_have_a_mean_rating_each():
    texts, ratings = mh.movie_review_snippets()
    assert len(texts) == 10_605 and ratings.shape == (10_605,) and ratings.dtype == torch.float32
    assert ratings.min().item() == pytest.approx(-3.875) and ratings.max().item() == pytest.approx(3.941, abs=1e-3)
    assert torch.all(ratings.abs() <= 4)
    assert texts[0].startswith("The Rock is destined to be the 21st Century's new ''Conan''")
    assert not any("\t" in t or "\r" in t or "\n" in t for t in texts)
    assert ratings[0].item() == pytest.approx(2.26666666667)
    assert texts[263].startswith("Münch's genuine insight")  # UTF-8 decoded (id 264)


def test_movie_review_ratings_are_each_sentences_raters_and_give_its_mean():
    ratings = corpora.movie_review_ratings()
    _texts, means = mh.movie_review_snippets()
    counts = [len(r) for r in ratings]
    assert len(ratings) == 10_605 and (min(counts), max(counts)) == (15, 29)  # facts.md section 21
    assert sum(c == 15 for c in counts) == 2_220
    assert all(-4 <= v <= 4 for r in ratings for v in r)
    # The same sentences, in the same order: each mean of the ground-truth file is the mean of these ratings.
    assert max(abs(sum(r) / len(r) - float(m)) for r, m in zip(ratings, means)) < 1e-6


def test_a_ratings_line_whose_mean_does_not_match_is_refused(real, tmp_path, monkeypatch):
    name = "movieReviewSnippets_anonDataRatings.txt"
    lines = real[name].decode("utf-8").split("\n")
    lines[2] = lines[2].replace("[", "[4, ", 1)  # one more rating, the listed mean unchanged
    changed = tmp_path / name
    changed.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(corpora.DataFileError, match="sha256"):
        monkeypatch.setenv("MANYHEADS_DATA", str(tmp_path))
        corpora.movie_review_ratings()  # the pinned hash refuses it first
    monkeypatch.setattr(corpora, "data_path", lambda _name: changed)  # past the hash: the line check still refuses
    with pytest.raises(corpora.DataFileError, match="line 3 .*with that mean"):
        corpora.movie_review_ratings()


# ---- missing and corrupt files -------------------------------------------------------------------------------------


def test_data_dir_is_outside_the_repository_and_can_be_moved(monkeypatch, tmp_path):
    monkeypatch.delenv("MANYHEADS_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert corpora.data_dir() == tmp_path / "xdg" / "manyheads" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert corpora.data_dir() == Path.home() / ".cache" / "manyheads" / "data"
    monkeypatch.setenv("MANYHEADS_DATA", str(tmp_path / "mine"))
    assert corpora.data_dir() == tmp_path / "mine"


def test_a_missing_file_names_itself_and_the_command(empty_data_dir):
    with pytest.raises(corpora.DataFileError) as caught:
        mh.lee_documents()
    message = str(caught.value)
    assert "lee.cor" in message and str(empty_data_dir) in message
    assert FETCH in message and "make env" in message
    assert isinstance(caught.value, PretrainedModelError)
    problems = corpora.verify_data()
    assert set(problems) == set(corpora.DATA_FILES)
    assert corpora.main(["verify"]) == 1


def test_a_corrupt_file_names_itself_both_hashes_and_the_command(real, empty_data_dir):
    empty_data_dir.mkdir()
    bad = real["similarities0-1.txt"].replace(b"0.3\t", b"0.4\t", 1)
    (empty_data_dir / "similarities0-1.txt").write_bytes(bad)
    with pytest.raises(corpora.DataFileError) as caught:
        mh.lee_similarities()
    message = str(caught.value)
    expected = corpora.DATA_FILES["similarities0-1.txt"].sha256
    assert "similarities0-1.txt is corrupt" in message
    assert expected in message and hashlib.sha256(bad).hexdigest() in message
    assert FETCH in message and "make env" in message


def test_an_unknown_name_says_which_names_exist():
    with pytest.raises(ValueError, match=r"unknown data file 'lee\.txt'.*lee\.cor"):
        corpora.data_path("lee.txt")
    with pytest.raises(SystemExit):
        corpora.main(["fetch", "lee.txt"])


# ---- extraction from archives (no network) -------------------------------------------------------------------------


def test_extract_data_installs_the_verified_members_of_a_wheel_and_nothing_else(real, tmp_path, monkeypatch):
    wheel = _fake_gensim_wheel(tmp_path, real)
    target = tmp_path / "data"
    monkeypatch.setenv("MANYHEADS_DATA", str(target))
    paths = corpora.extract_data(wheel, log=None)
    assert sorted(paths) == sorted(GENSIM_FILES)
    assert sorted(p.name for p in target.iterdir()) == sorted(GENSIM_FILES)  # no temporary files, no outside.txt
    assert not (tmp_path / "outside.txt").exists()
    assert corpora.verify_data(GENSIM_FILES) == {}
    assert len(mh.lee_documents()) == 50
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in target.iterdir())


def test_a_member_with_the_wrong_hash_is_not_written(real, tmp_path, monkeypatch):
    wheel = _fake_gensim_wheel(tmp_path, real, **{"lee.cor": real["lee.cor"] + b" "})
    monkeypatch.setenv("MANYHEADS_DATA", str(tmp_path / "data"))
    with pytest.raises(
        corpora.DataFileError, match=r"gensim/test/test_data/lee\.cor in gensim-4\.4\.0.* expected a878"
    ):
        corpora.extract_data(wheel, ["lee.cor"], log=None)
    assert not (tmp_path / "data" / "lee.cor").exists()


def test_a_nested_tarball_in_an_sdist_is_verified_step_by_step(tmp_path):
    inner = _tar_gz({"pkg/data.txt": b"1\t2.5\tA fine film.", "pkg/other.txt": b"x"})
    sdist = tmp_path / "pkg-1.0.tar.gz"
    sdist.write_bytes(_tar_gz({"pkg-1.0/setup.py": b"", "pkg-1.0/resources/inner.tar.gz": inner}))
    chain = (
        corpora.ArchiveMember("pkg-1.0/resources/inner.tar.gz", hashlib.sha256(inner).hexdigest()),
        corpora.ArchiveMember("pkg/data.txt", hashlib.sha256(b"1\t2.5\tA fine film.").hexdigest()),
    )
    assert corpora._read_member_chain(sdist, chain) == b"1\t2.5\tA fine film."
    wrong_outer = (corpora.ArchiveMember(chain[0].path, "0" * 64), chain[1])
    with pytest.raises(corpora.DataFileError, match=r"inner\.tar\.gz in pkg-1\.0\.tar\.gz has sha256 .* expected 0000"):
        corpora._read_member_chain(sdist, wrong_outer)
    with pytest.raises(corpora.DataFileError, match=r"pkg-1\.0\.tar\.gz has no member pkg-1\.0/missing\.txt"):
        corpora._read_member_chain(sdist, (corpora.ArchiveMember("pkg-1.0/missing.txt", "0" * 64),))


@pytest.mark.parametrize("name", ["../outside.txt", "/etc/passwd", "a/../../b", "C:/x", "a\\..\\b", ""])
def test_path_traversal_members_are_refused(tmp_path, name):
    archive = _zip(tmp_path / "evil.whl", {"../outside.txt": b"x", "ok.txt": b"y"})
    with pytest.raises(corpora.DataFileError, match="not a plain relative path"):
        corpora._read_member(archive, "evil.whl", name)
    assert corpora._read_member(archive, "evil.whl", "ok.txt") == b"y"


def test_links_in_a_tarball_are_refused(tmp_path):
    """A member with the wanted name that is a symlink (to a file on this machine) is not followed."""
    tarball = _tar_gz({"pkg/real.txt": b"real"}, links={"pkg/data.txt": "/etc/passwd", "pkg/rel.txt": "real.txt"})
    for name in ("pkg/data.txt", "pkg/rel.txt"):
        with pytest.raises(corpora.DataFileError, match="it is a link"):
            corpora._read_member(tarball, "evil.tar.gz", name)


def test_data_is_written_only_under_a_plain_name(tmp_path):
    for name in ("../x", "a/b", ".."):
        with pytest.raises(corpora.DataFileError, match="not a plain file name"):
            corpora._write_atomically(tmp_path, name, b"")
    assert list(tmp_path.iterdir()) == []


def test_fetch_data_downloads_only_what_is_missing(real, tmp_path, monkeypatch):
    """fetch_data with its pip step replaced by a locally built wheel: present files are never downloaded again."""
    wheel = _fake_gensim_wheel(tmp_path, real)
    target = tmp_path / "data"
    target.mkdir()
    (target / "lee.cor").write_bytes(real["lee.cor"])
    monkeypatch.setenv("MANYHEADS_DATA", str(target))
    downloads = []

    def fake_download(requirement, kind, dest):
        downloads.append((requirement, kind))
        return Path(shutil.copy(wheel, dest))

    monkeypatch.setattr(corpora, "_download", fake_download)
    (target / "similarities0-1.txt").write_bytes(b"corrupt")
    paths = corpora.fetch_data(GENSIM_FILES, log=None)
    assert downloads == [("gensim==4.4.0", "wheel")]
    assert corpora.verify_data(GENSIM_FILES) == {} and sorted(paths) == sorted(GENSIM_FILES)
    assert corpora.fetch_data(GENSIM_FILES, log=None) == paths and len(downloads) == 1  # all present: no download


def test_pip_is_asked_for_one_pinned_package_and_any_wheel_is_the_fallback(tmp_path, monkeypatch):
    """The pip commands themselves, with pip replaced: nothing here reaches the network."""
    calls, replies = [], []

    def fake_pip(command, **kwargs):
        calls.append(command)
        code, output, made = replies.pop(0)
        if made:
            (tmp_path / made).write_bytes(b"")
        return subprocess.CompletedProcess(command, code, "", output)

    monkeypatch.setattr(corpora.subprocess, "run", fake_pip)
    # No wheel for this Python (a Python newer than the release): the second try asks for a manylinux cp312 wheel.
    replies[:] = [(1, "ERROR: No matching distribution found for gensim==4.4.0", None), (0, "", "g-4.4.0-cp312.whl")]
    assert corpora._download("gensim==4.4.0", "wheel", tmp_path).name == "g-4.4.0-cp312.whl"
    assert calls[0][-3:] == ["--only-binary", ":all:", "gensim==4.4.0"] and "--no-deps" in calls[0]
    assert "--platform" in calls[1] and calls[1][-1] == "gensim==4.4.0"
    # A network failure is not retried, and the error says what pip said.
    calls.clear()
    replies[:] = [(1, "ERROR: Could not find a version (Connection refused)", None)]
    with pytest.raises(corpora.DataFileError, match=r"(?s)could not download the sdist.*Connection refused"):
        corpora._download("vaderSentiment==3.3.2", "sdist", tmp_path)
    assert len(calls) == 1 and "--require-hashes" in calls[0] and "--no-build-isolation" in calls[0]
    pinned = Path(calls[0][calls[0].index("-r") + 1]).read_text()
    assert pinned == f"vaderSentiment==3.3.2 --hash=sha256:{corpora._SDIST_SHA256['vaderSentiment==3.3.2']}\n"
