"""nnx-embeddings keeps the add-on rules (nnx.testing.check_distribution, docs/extending.md):
core only through nnx and nnx.extend, no private core name, no import circle, its entry
points resolve, its training skeleton declared, no nnx/__init__.py."""

from __future__ import annotations

from nnx.testing import check_distribution


def test_nnx_embeddings_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-embeddings")
