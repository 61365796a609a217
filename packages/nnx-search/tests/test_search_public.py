"""nnx-search's public surface: names through nnx-core's entry points, the add-on rules."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.search
from nnx.testing import check_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_from_nnx_import_reaches_search() -> None:
    from nnx import SearchBudget, SearchSpace

    assert SearchBudget is nnx.search.SearchBudget and SearchSpace is nnx.search.SearchSpace
    # ``search`` itself is not an ``nnx.exports`` name: ``nnx.search`` is the subpackage.
    assert callable(nnx.search.search)


def test_every_announced_name_resolves_to_its_package_export() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["nnx-core>=0.1,<0.2", "optuna>=4.0",
                                       "sqlalchemy>=1.4.2"]
    for name in project["entry-points"]["nnx.exports"]:
        assert name in nnx.search.__all__ and getattr(nnx, name) is getattr(nnx.search, name)


def test_nnx_search_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-search")
