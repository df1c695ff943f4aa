"""Headless Chromium (Debian's) for the tests that look at pages as a reader's browser would, with no network."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str, timeout: int = 120, budget_ms: int = 20000) -> subprocess.CompletedProcess:
    """Run headless Chromium with ``args`` (e.g. ``--dump-dom URL``); any remote host fails to resolve."""
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"chromium-profile-{os.getpid()}"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # no network: anything remote would fail to load
        f"--virtual-time-budget={budget_ms}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
