"""Fetch the book's third-party JavaScript from the npm registry into _vendor/ (run by `make book`).

Pinned in assets/vendor.json by version and sha512 integrity; a tarball whose hash differs is refused. Only the
files the pages load are copied. Idempotent: a package already in place at the pinned version is skipped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "_vendor"  # not under _static/: Jupyter Book 1 loads every .js found there on every page


def _fetch(spec: str, integrity: str, workdir: Path) -> Path:
    try:
        out = (
            subprocess.run(
                ["npm", "pack", spec, "--silent", "--pack-destination", str(workdir)],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
    except FileNotFoundError:
        sys.exit(
            "npm is needed to fetch the book's JavaScript (apt-get install nodejs npm), then run `make book` again"
        )
    except subprocess.CalledProcessError as exc:
        sys.exit(f"npm could not fetch {spec}: {exc.stderr.strip()}")
    tarball = workdir / out
    algo, expected = integrity.split("-", 1)
    actual = base64.b64encode(hashlib.new(algo, tarball.read_bytes()).digest()).decode()
    if actual != expected:
        sys.exit(f"{spec}: integrity mismatch (expected {integrity}, got {algo}-{actual}); refusing to use it")
    return tarball


def main() -> int:
    manifest = json.loads((ROOT / "assets" / "vendor.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        for package in manifest["packages"]:
            dest = VENDOR / package["dest"]
            stamp = dest / ".version"
            if stamp.exists() and stamp.read_text() == package["integrity"]:
                continue
            tarball = _fetch(package["spec"], package["integrity"], Path(tmp))
            shutil.rmtree(dest, ignore_errors=True)
            with tarfile.open(tarball) as tar:
                members = [
                    m
                    for m in tar.getmembers()
                    if m.isfile()
                    and not m.name.endswith(".map")
                    and any(m.name.removeprefix("package/").startswith(f) for f in package["files"])
                ]
                for m in members:
                    target = dest / m.name.removeprefix("package/")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(tar.extractfile(m).read())
            stamp.write_text(package["integrity"])
            print(f"vendored {package['spec']} ({len(members)} files) into {dest.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
