"""nnx-lm keeps the add-on rules (docs/extending.md): core only through nnx and nnx.extend,
no private core name, no import circle, its entry points resolve; never transformers."""

from __future__ import annotations

from nnx.testing import check_distribution


def test_nnx_lm_keeps_the_add_on_rules_and_never_imports_transformers() -> None:
    # transformers is a dev-only dependency: the interop reads safetensors directly.
    check_distribution("nnx-lm", forbid=("transformers",))
