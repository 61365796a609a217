"""nnx-viz keeps the add-on rules (nnx.testing.check_distribution, docs/extending.md):
core only through nnx and nnx.extend, no private core name, no import circle, its tool
skeleton declared and complete, no nnx/__init__.py."""

from __future__ import annotations

from nnx.testing import check_distribution


def test_nnx_viz_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-viz")
