"""The wheel that Colab installs (pip install from the repository) carries everything the chapters load."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_contains_package_data(tmp_path):
    # Build from a clean copy, as Colab's `pip install git+...` does: an editable install's egg-info in src/
    # would otherwise leak its file list into the build and hide missing package-data declarations.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("manyheads-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped_data = sorted(
        p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src/manyheads/data").iterdir() if p.is_file()
    )
    assert shipped_data, "src/manyheads/data should hold the probe data"
    missing = [p for p in shipped_data if p not in names]
    assert missing == [], f"the wheel lacks {missing}: add them to [tool.setuptools.package-data]"
    modules = sorted(p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src/manyheads").rglob("*.py"))
    assert [m for m in modules if m not in names] == []
