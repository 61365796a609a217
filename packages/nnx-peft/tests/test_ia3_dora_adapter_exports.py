"""IA3 / DoRA / AdapterLayer names: announced as entry points, resolved from ``nnx``,
exported by ``nnx.peft`` (their modules' imports: test_peft_public's conformance call)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.peft

ROOT = Path(__file__).resolve().parents[1]
EXPORTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
    "nnx.exports"]
#: The IA3, DoRA and adapter-layer modules (a trailing ``:`` is one module).
MODULES = ("nnx.peft.ia3:", "nnx.peft.dora:", "nnx.peft.adapter:")
# The names are the pyproject's nnx.exports entry points (the one list of them) whose
# target lies in those modules, so a name added there is checked with no edit here.
NAMES = tuple(name for name, target in EXPORTS.items() if target.startswith(MODULES))


def test_each_module_still_announces_a_name() -> None:
    # A renamed module fails here rather than leaving the parametrized test empty.
    assert all(any(t.startswith(m) for t in EXPORTS.values()) for m in MODULES)


@pytest.mark.parametrize("name", NAMES)
def test_each_name_is_an_entry_point_resolved_from_nnx(name: str) -> None:
    points = {ep.name: ep for ep in importlib.metadata.entry_points(group="nnx.exports")
              if ep.dist is not None and ep.dist.name == "nnx-peft"}
    assert name in points
    assert points[name].load() is getattr(nnx.peft, name) is getattr(nnx, name)
    assert name in nnx.peft.__all__
