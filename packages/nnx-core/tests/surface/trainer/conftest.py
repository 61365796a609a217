"""The Trainer tests' registry fixture: autouse for every file here, so it lives in a conftest
rather than being imported into each module."""

from __future__ import annotations

import pytest
from _support.trainer import FACTORY_CALLS, lion_factory

from nnx import register_optimizer_factory
from nnx._foundation.plugins import versioned_registry


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """Every test sees test.lion@v1, and nothing a test (un)registers leaks out of it."""
    names = versioned_registry("nnx.optimizer_factories")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    register_optimizer_factory("test.lion", 1, lion_factory)
    FACTORY_CALLS.clear()
    return names
