"""tools/check_alacarte.py's cells (issue 25): which nnx-core the lowest-core cell
installs, and which nnx wheels an extra adds. The installs themselves run in CI
and in .ci/run; these check the decisions without building anything."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_alacarte",
                                                  ROOT / "tools" / "check_alacarte.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tool = _tool()


def _dist(name: str, version: str = "0.1.0", core_range: str = ">=0.1,<0.2",
          requires: tuple[str, ...] = ("nnx-core",), **extras: list[str]):
    return tool.Dist(Path(name), Path(f"{name}.whl"), name, list(requires), [], version,
                     dict(extras), core_range)


def test_the_lowest_core_cell_installs_the_workspace_core_only_at_the_lower_bound():
    core = _dist("nnx-core", "0.1.0", "", ())
    peft = _dist("nnx-peft")
    chosen, note = tool.lowest_core(peft, {"nnx-core": core}, None)
    assert chosen is core
    assert note == ("lowest nnx-core allowed by nnx-peft's nnx-core>=0.1,<0.2 is 0.1: "
                    "installing the workspace's nnx-core 0.1.0")
    newer = _dist("nnx-core", "0.1.3", "", ())
    with pytest.raises(tool.CheckFailed, match=r"lowest nnx-core nnx-peft allows .* is 0\.1, "
                                               r"but only nnx-core 0\.1\.3 is here.*--core-wheel"):
        tool.lowest_core(peft, {"nnx-core": newer}, None)
    with pytest.raises(tool.CheckFailed, match="declares no lower bound on nnx-core"):
        tool.lowest_core(_dist("nnx-x", core_range="<0.2"), {"nnx-core": core}, None)


def test_an_extra_adds_the_nnx_wheels_it_requires():
    core, lm = _dist("nnx-core", core_range="", requires=()), _dist("nnx-lm")
    peft = _dist("nnx-peft", lm=["nnx-lm"])
    built = {"nnx-core": core, "nnx-lm": lm, "nnx-peft": peft}
    assert sorted(map(str, tool.wheels_for(peft, built))) == ["nnx-core.whl", "nnx-peft.whl"]
    assert sorted(map(str, tool.wheels_for(peft, built, ("lm",)))) == [
        "nnx-core.whl", "nnx-lm.whl", "nnx-peft.whl"]


def test_the_core_cell_check_of_add_on_runs_fails_where_nnx_lm_reads_them(tmp_path):
    # The check passes only where nnx-lm is absent (the nnx-core cell; issue 26 item 3):
    # here, in the workspace venv, nnx-lm reads the LM run and the check says so.
    with pytest.raises(tool.CheckFailed, match=r"nnx runs list without nnx-lm \(LM run "):
        tool.runs_without_add_ons(Path(sys.prefix), tmp_path)
