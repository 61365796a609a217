"""nnx-search's shared fixtures: the throwaway PostgreSQL cluster the stored-study tests
also run against (one per pytest process, so one per pytest-xdist worker; started only
when a PostgreSQL-parametrized test runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import _postgres
import pytest


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[_postgres.Cluster]:
    cluster = _postgres.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database for one test: an SQLite file, or a fresh database on the
    PostgreSQL cluster (the URL several machines would share)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    return request.getfixturevalue("postgres_cluster").new_database()
