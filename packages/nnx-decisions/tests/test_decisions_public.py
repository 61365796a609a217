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
import nnx.decisions
from nnx.testing import check_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_from_nnx_import_reaches_calibration_abstention_and_decisions() -> None:
    from nnx import AbstentionPolicy, DecisionJob, FixedHeadProvider, fit_temperature

    assert fit_temperature is nnx.calibration.fit_temperature
    assert AbstentionPolicy is nnx.abstention.AbstentionPolicy
    assert FixedHeadProvider is nnx.decisions.FixedHeadProvider
    assert DecisionJob is nnx.decisions.DecisionJob


def test_every_announced_name_resolves_to_its_package_export() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["nnx-core>=0.1,<0.2", "numpy>=1.24"]
    for name, target in project["entry-points"]["nnx.exports"].items():
        package = target.split(".")[1]
        module = {"calibration": nnx.calibration, "abstention": nnx.abstention,
                  "decisions": nnx.decisions}[package]
        assert name in module.__all__ and getattr(nnx, name) is getattr(module, name)


def test_nnx_decisions_keeps_the_add_on_rules() -> None:
    check_distribution("nnx-decisions", forbid=("torch", "scipy", "sklearn"))


def test_importing_nnx_decisions_needs_no_hosted_sdk() -> None:
    import subprocess

    code = ("import sys, nnx.decisions; from nnx import JevProvider; "
            "assert 'typesafe_sdk' not in sys.modules, 'the SDK was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_readme_presents_typed_decisions_as_shipped() -> None:
    # The README once called nnx.decisions "planned" while it shipped (issue 36, item 23):
    # every public surface it names must be one the distribution has.
    readme = (ROOT / "README.md").read_text()
    assert "planned" not in readme.lower()
    for name in ("nnx.decisions", "nnx.calibration", "nnx.abstention", "FixedHeadProvider",
                 "JevProvider", "DecisionJob.ask", "docs/decisions.md"):
        assert name in readme, name
    for name in ("FixedHeadProvider", "JevProvider", "DecisionJob", "Choice", "Boolean",
                 "Score"):
        assert name in nnx.decisions.__all__


def test_importing_nnx_calibration_loads_no_torch() -> None:
    # Spec §18 (Dependencies): calibration's own imports are NumPy and the standard
    # library; issue 37 makes what it takes from nnx-core (nnx.extend) torch-free too.
    import subprocess

    code = "import sys, nnx.calibration; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False", done.stderr
