"""nnx-graph keeps the add-on rules (the shared conformance check)."""

from __future__ import annotations

from nnx.testing import check_distribution


def test_nnx_graph_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-graph")
