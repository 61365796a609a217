"""nnx-graph's public surface: names announced once as entry points, resolved from
``nnx`` and ``nnx.graph``; the add-on rules (the shared conformance check)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.graph
from nnx import Nets, registered_model_factories
from nnx.testing import check_distribution

POINTS = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
    "project"]["entry-points"]


def test_every_announced_name_resolves_from_nnx_and_its_subpackage() -> None:
    for name, target in POINTS["nnx.exports"].items():
        module, _, attr = target.partition(":")
        # nnx.graph.nets:X is public as nnx.graph.X, nnx.link_tasks.metrics:Y as nnx.link_tasks.Y
        package = importlib.import_module(module.rpartition(".")[0])
        assert attr == name and name in package.__all__
        assert getattr(nnx, name) is getattr(package, name)
    for member in POINTS["nnx.nets"]:
        assert Nets[member].name == member and member in nnx.graph.__all__


def test_nnx_graph_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-graph")


def test_the_recipes_are_announced_as_model_factories() -> None:
    assert sorted(POINTS["nnx.model_factories"]) == ["graph.classifier@v1", "link.predictor@v1"]
    assert ("graph.classifier", 1) in registered_model_factories()
    assert ("link.predictor", 1) in registered_model_factories()
