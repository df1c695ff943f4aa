"""The package's tests call the training loop itself: no training cache (tests/conftest.py) for them."""

import pytest

from manyheads.training import CACHE_ENV


@pytest.fixture(autouse=True)
def _train_for_real(monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
