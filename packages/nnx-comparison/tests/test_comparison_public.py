"""nnx-comparison's public surface: names through nnx-core's entry points, the add-on rules."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.comparison
from nnx.testing import check_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_from_nnx_import_reaches_comparison() -> None:
    from nnx import ComparisonReport, observations_from_runs

    assert observations_from_runs is nnx.comparison.observations_from_runs
    assert ComparisonReport is nnx.comparison.ComparisonReport


def test_every_announced_name_resolves_to_its_package_export() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["nnx-core>=0.1,<0.2", "numpy>=1.24"]
    for name in project["entry-points"]["nnx.exports"]:
        assert name in nnx.comparison.__all__
        assert getattr(nnx, name) is getattr(nnx.comparison, name)


def test_nnx_comparison_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-comparison", forbid=("torch", "scipy", "pickle"))


def test_importing_nnx_comparison_loads_no_torch() -> None:
    # Issue 37: comparison reads run files and does statistics; nnx.extend resolves its
    # names lazily, so the import loads none of core's torch modules.
    import subprocess

    code = "import sys, nnx.comparison; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False", done.stderr
