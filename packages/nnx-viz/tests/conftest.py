"""nnx-viz's shared test fixtures: the real browser of :mod:`_browser`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _browser import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests (skipped, naming why, without one)."""
    yield from chromium()
