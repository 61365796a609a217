"""nnx-peft's public surface: top-level names through nnx-core's entry points, public imports."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.peft
from nnx.testing import check_distribution

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
    "nnx.exports"]
#: The LoRA modules and the recipes (a trailing ``:`` is one module).
LORA_MODULES = ("nnx.peft.lora:", "nnx.peft.files:", "nnx.peft.merging:", "nnx.peft.recipe:")
# The names are the nnx.exports entry points (the one list of them) in those modules.
LORA = [name for name, target in EXPORTS.items() if target.startswith(LORA_MODULES)]


def test_from_nnx_import_apply_lora_to() -> None:
    from nnx import apply_lora_to

    assert apply_lora_to is nnx.peft.apply_lora_to


def test_every_lora_name_is_announced_exported_and_resolves() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    exports = project["entry-points"]["nnx.exports"]
    # Each module still announces a name: a renamed module fails here, not silently.
    assert all(any(t.startswith(m) for t in exports.values()) for m in LORA_MODULES)
    assert project["entry-points"]["nnx.transforms"] == {
        "nnx.lora@v1": "nnx.peft.recipe:materialize_lora",
        "nnx.dora@v1": "nnx.peft.recipe:materialize_dora",
        "nnx.ia3@v1": "nnx.peft.recipe:materialize_ia3"}
    for name in LORA:
        assert exports[name].partition(":")[2] == name and name in nnx.peft.__all__
        assert getattr(nnx, name) is getattr(nnx.peft, name)


def test_nnx_peft_keeps_the_add_on_rules_and_never_imports_hf_peft() -> None:
    check_distribution("nnx-peft", forbid=("peft", "transformers"))
