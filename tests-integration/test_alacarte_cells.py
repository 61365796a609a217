"""tools/check_alacarte.py's cells (issues 25, 37): which nnx-core the lowest-core cell
installs (and building a recorded release from its commit), which nnx wheels an extra
adds, which tests a third-party extra's cell runs, and what a cell's venv may hold. The
installs themselves run in CI and in .ci/run; these check the decisions."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

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


SHA_010 = "a" * 40
SHA_013 = "b" * 40


def test_the_lowest_core_cell_installs_the_workspace_core_only_when_it_is_the_lowest():
    peft = _dist("nnx-peft")
    core = _dist("nnx-core", "0.1.0", "", ())
    releases = {"nnx-core": {"0.1.0": SHA_010}}
    assert tool.lowest_core(peft, {"nnx-core": core}, releases) == (
        "0.1.0", None, "lowest nnx-core allowed by nnx-peft's nnx-core>=0.1,<0.2 is 0.1: "
                       "installing the workspace's nnx-core 0.1.0")


def test_after_a_core_bump_the_lowest_core_cell_builds_the_recorded_release():
    # The workspace's core moved to 0.1.1: 0.1.0 comes from the commit releases.toml records.
    peft = _dist("nnx-peft")
    bumped = {"nnx-core": _dist("nnx-core", "0.1.1", "", ())}
    version, commit, note = tool.lowest_core(peft, bumped, {"nnx-core": {"0.1.0": SHA_010}})
    assert (version, commit) == ("0.1.0", SHA_010)
    assert note == ("lowest nnx-core allowed by nnx-peft's nnx-core>=0.1,<0.2 is 0.1: building "
                    "nnx-core 0.1.0 from aaaaaaaaaaaa (releases.toml); the workspace's is 0.1.1")
    # The lowest *release* the range allows, as an installer resolving lowest would pick.
    later = _dist("nnx-x", core_range=">=0.1.2,<0.2")
    releases = {"nnx-core": {"0.1.0": SHA_010, "0.1.3": SHA_013}}
    assert tool.lowest_core(later, bumped | {"nnx-core": _dist("nnx-core", "0.1.4", "", ())},
                            releases)[:2] == ("0.1.3", SHA_013)


def test_the_lowest_core_cell_refuses_a_range_without_floor_or_release():
    core = {"nnx-core": _dist("nnx-core", "0.1.1", "", ())}
    releases = {"nnx-core": {"0.1.0": SHA_010}}
    with pytest.raises(tool.CheckFailed, match=r"nnx-x's nnx-core<0\.2: no lower bound"):
        tool.lowest_core(_dist("nnx-x", core_range="<0.2"), core, releases)
    with pytest.raises(tool.CheckFailed, match=r"none of 0\.1\.0, 0\.1\.1 satisfies '>=0\.2'"):
        tool.lowest_core(_dist("nnx-x", core_range=">=0.2"), core, releases)


def test_a_core_release_missing_from_the_clone_is_named(tmp_path):
    core = _dist("nnx-core", "0.1.1", "", ())
    core.path = ROOT / "packages" / "nnx-core"
    with pytest.raises(tool.CheckFailed, match=r"commit f{40} \(nnx-core 0\.1\.0 in releases"
                                               r"\.toml\) is not in this clone"):
        tool.build_at_commit(core, "0.1.0", "f" * 40, tmp_path)


@pytest.mark.slow
def test_the_recorded_core_release_builds_from_its_commit(tmp_path):
    # The real path of a lowest-core cell after a bump, short of installing: git archive
    # of packages/nnx-core at the recorded commit, uv build, the wheel says 0.1.0.
    (version, commit), = tool.read_releases()["nnx-core"].items()
    core = _dist("nnx-core", "0.1.1", "", ())
    core.path = ROOT / "packages" / "nnx-core"
    old = tool.build_at_commit(core, version, commit, tmp_path)
    assert (old.name, old.version) == ("nnx-core", version)
    assert old.wheel.name == f"nnx_core-{version}-py3-none-any.whl"
    assert "nnx/__init__.py" in old.files
    assert not str(old.path).startswith(str(ROOT))  # built from the archive, not the tree


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


def test_a_third_party_extra_runs_the_tests_importing_its_packages(tmp_path):
    requires, extra_requires = ["nnx-core", "torch"], {
        "onnx": ["onnx", "onnxruntime", "torch"], "lm": ["nnx-lm"]}
    # torch is a plain requirement too, so it selects nothing; an nnx extra runs everything.
    assert tool.third_party_added(requires, extra_requires, ("onnx",)) == ["onnx", "onnxruntime"]
    assert tool.third_party_added(requires, extra_requires, ("lm",)) == []
    assert tool.third_party_added(requires, extra_requires, ()) == []
    tests = tmp_path / "tests"
    (tests / "engine").mkdir(parents=True)
    files = {
        "engine/test_export.py": 'ort = pytest.importorskip("onnxruntime")\n',
        "test_model.py": "import onnx.helper as h\n",
        "test_other.py": "import onnxscript\nimport torch  # onnx is spelled in a comment\n",
        "helper_onnx.py": "import onnx\n",  # not a test file
    }
    for name, text in files.items():
        (tests / name).write_text(text)
    assert tool.tests_needing(tests, ["onnx", "onnxruntime"]) == [
        tests / "engine/test_export.py", tests / "test_model.py"]
    out = ("SKIPPED [1] engine/test_export.py:3: could not import 'onnxruntime': No module\n"
           "SKIPPED [2] test_loggers.py:9: could not import 'wandb': No module named 'wandb'\n")
    assert tool.skipped_for_want_of(out, ["onnx", "onnxruntime"]) == [out.splitlines()[0]]


def test_core_extras_cells_name_tests_that_exist():
    # Each third-party extra of the workspace's distributions selects some test file.
    for name in ("nnx-core", "nnx-decisions"):
        path = ROOT / "packages" / name
        project = tomllib.loads((path / "pyproject.toml").read_text())["project"]
        for extra, reqs in project["optional-dependencies"].items():
            modules = {"huggingface-hub": "huggingface_hub", "typesafe-sdk": "typesafe_sdk"}
            added = [tool.normalize(r.split(">")[0].split("<")[0]) for r in reqs]
            names = [modules.get(a, a.replace("-", "_")) for a in added if a != "torch"]
            assert tool.tests_needing(path / "tests", names), (name, extra, names)


def test_the_cells_test_tools_bring_no_runtime_package():
    # Before issue 37 the test tools were pytest, pytest-xdist, hypothesis and
    # scikit-learn, which brought scipy (and numpy) into every cell. Now a cell gets
    # the runner only; hypothesis and scikit-learn come with the test group of the
    # distribution whose tests use them.
    closure = _closure(tool.TEST_TOOLS)
    assert not closure & {"scipy", "numpy", "scikit-learn", "hypothesis"}, sorted(closure)
    assert tool.test_group(ROOT / "packages" / "nnx-core") == ["hypothesis", "scikit-learn"]
    assert tool.test_group(ROOT / "packages" / "nnx-comparison") == []


def test_the_environment_check_names_what_nothing_declares():
    # Run on the workspace venv with the cell's roots, scipy is undeclared; with
    # scikit-learn among the roots (nnx-core's test group), it is reached.
    def undeclared(roots):
        proc = subprocess.run([sys.executable, "-c", tool.ENV_CHECK, json.dumps(roots)],
                              capture_output=True, text=True)
        assert proc.returncode != 0, proc.stdout  # the workspace holds far more
        return proc.stdout.count("UNDECLARED scipy ")
    tools = [[t, []] for t in tool.TEST_TOOLS]
    assert undeclared([["nnx-comparison", []], *tools]) == 1
    assert undeclared([["nnx-comparison", []], *tools, ["scikit-learn", []]]) == 0


def _closure(roots) -> set[str]:
    """The installed distributions ``roots`` require, transitively (markers ignored:
    an over-approximation, which is the safe side here)."""
    seen, todo = set(), [tool.normalize(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo.extend(tool.normalize(m.group(0)) for r in reqs
                    if "extra ==" not in r and (m := re.match(r"[A-Za-z0-9._-]+", r)))
    return seen
