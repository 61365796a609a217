"""nnx-decisions' public surface: names through nnx-core's entry points, the add-on rules."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.abstention
import nnx.calibration
from nnx.testing import check_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_from_nnx_import_reaches_calibration_and_abstention() -> None:
    from nnx import AbstentionPolicy, fit_temperature

    assert fit_temperature is nnx.calibration.fit_temperature
    assert AbstentionPolicy is nnx.abstention.AbstentionPolicy


def test_every_announced_name_resolves_to_its_package_export() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["nnx-core>=0.1,<0.2", "numpy>=1.24"]
    for name, target in project["entry-points"]["nnx.exports"].items():
        package = target.split(".")[1]
        module = nnx.calibration if package == "calibration" else nnx.abstention
        assert name in module.__all__ and getattr(nnx, name) is getattr(module, name)


def test_nnx_decisions_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-decisions", forbid=("torch", "scipy", "sklearn"))
