"""The add-on mechanics end to end, against real wheels in a real venv.

One venv, in two stages: first nnx-core's wheel alone (the "absent" checks: a
catalogued add-on name raises MissingDistributionError with its install hint),
then the example plugin's wheel on top (the "present" checks: entry points
resolve, ``Nets`` grows a member, the plugin's own tests pass). Each stage runs
its checks in one subprocess, from a temporary working directory so that the
source tree is not importable.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIR = ROOT / "tests-integration" / "example-plugin"
CORE_DIR = ROOT / "packages" / "nnx-core"
HINT = "pip install nnx-example-plugin"
OPTIONAL_DEPS = ("tensorboard", "wandb", "pandas", "onnx", "onnxruntime", "huggingface_hub")


def _load_tool() -> ModuleType:
    path = ROOT / "tools" / "check_alacarte.py"
    spec = importlib.util.spec_from_file_location("check_alacarte", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


# A probe runs labelled snippets in one interpreter. A snippet leaves its answer
# in ``out``; an exception is recorded with its type, ancestry and message.
_PROBE = """
import json, sys, traceback
results = {}
for label, code in json.loads(sys.argv[1]).items():
    ns = {}
    try:
        exec(code, ns)
        results[label] = {"ok": True, "out": ns.get("out")}
    except BaseException as exc:
        results[label] = {
            "ok": False,
            "type": type(exc).__name__,
            "mro": [c.__name__ for c in type(exc).__mro__],
            "msg": str(exc),
            "tb": traceback.format_exc(),
        }
print(json.dumps(results))
"""

_IMPORT_NNX = """
import json, sys
import nnx
mods = {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}
print(json.dumps({"nnx_file": nnx.__file__, "nnx_path": list(nnx.__path__), "modules": mods}))
"""

ABSENT_CHECKS = {
    "export": "from nnx import ExampleScaler",
    "attr": "import nnx; nnx.ExampleScaler",
    "net": "from nnx import Nets; Nets.EXAMPLE_MLP",
    "net_item": "from nnx import Nets; Nets['EXAMPLE_MLP']",
    "hasattr": (
        "import nnx\n"
        "out = [hasattr(nnx, 'ExampleScaler'), getattr(nnx, 'ExampleScaler', None),\n"
        "       hasattr(nnx.Nets, 'EXAMPLE_MLP'), getattr(nnx.Nets, 'EXAMPLE_MLP', None)]"
    ),
    "resolve": (
        "from nnx import NNParams\n"
        "NNParams.resolve_from_state({'input_dim': 3, 'output_dim': 2}, 'EXAMPLE_MLP')"
    ),
    "unknown": "from nnx import NoSuchThing",
    "unknown_net": "from nnx import Nets; Nets.NO_SUCH_NET",
    "factory": (
        "from nnx._foundation.plugins import versioned_registry\n"
        "out = versioned_registry('nnx.optimizer_factories').get('example.sgd', 1)"
    ),
    "module": "import nnx.example_plugin",
    "module_from": "from nnx.example_plugin import ExampleMLP",
    "unknown_module": "import nnx.no_such_subpackage",
    "factory_hint": (
        "from nnx._engine.optimizer_factories import resolve_optimizer_factory\n"
        "from nnx.params.optim_factory import OptimizerFactorySpec\n"
        "resolve_optimizer_factory(OptimizerFactorySpec('example.sgd', 1))"
    ),
    "core_still_works": (
        "import torch\n"
        "from nnx import Nets, NNParams\n"
        "out = list(Nets.FEED_FWD(NNParams(input_dim=3, output_dim=2))(torch.zeros(1, 3)).shape)"
    ),
}

PRESENT_CHECKS = {
    # First: the later checks import the plugin in the same interpreter.
    "dir": (
        "import sys, nnx\n"
        "out = {'listed': 'ExampleScaler' in dir(nnx),\n"
        "       'imported': 'nnx.example_plugin' in sys.modules}"
    ),
    "export": (
        "import sys, torch\n"
        "before = 'nnx.example_plugin' in sys.modules\n"
        "from nnx import ExampleScaler\n"
        "y = ExampleScaler(init=2.0)(torch.tensor([1.0, 3.0]))\n"
        "out = {'before': before, 'module': ExampleScaler.__module__, 'y': y.tolist()}"
    ),
    "net": (
        "import torch\n"
        "from nnx import Nets\n"
        "from nnx.example_plugin import ExampleMLP, ExampleMLPParams\n"
        "net = Nets.EXAMPLE_MLP(ExampleMLPParams(input_dim=3, output_dim=2, scale=2.0))\n"
        "x = torch.randn(4, 3)\n"
        "y = net(x)\n"
        "out = {'type': type(net).__name__, 'shape': list(y.shape),\n"
        "       'scaled': bool(torch.allclose(y, 2.0 * net.linear(x))),\n"
        "       'members': [m.name for m in Nets]}"
    ),
    "resolve": (
        "from nnx import NNParams\n"
        "p = NNParams.resolve_from_state({'input_dim': 3, 'output_dim': 2, 'scale': 0.5},"
        " 'EXAMPLE_MLP')\n"
        "out = [type(p).__name__, p.scale]"
    ),
    "factory": (
        "from nnx._foundation.plugins import versioned_registry\n"
        "f = versioned_registry('nnx.optimizer_factories').get('example.sgd', 1)\n"
        "out = f'{f.__module__}:{f.__name__}'"
    ),
    "unknown": "from nnx import NoSuchThing",
}


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    return uv


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)
    return env


def _run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, f"{cmd[:3]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _probe(python: Path, cwd: Path, checks: dict[str, str]) -> dict[str, Any]:
    out = _run([str(python), "-c", _PROBE, json.dumps(checks)], cwd)
    results: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return results


def _import_nnx(python: Path, cwd: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_run([str(python), "-c", _IMPORT_NNX], cwd))
    return result


class Env:
    """The shared venv and what each stage observed in it."""

    def __init__(self, root: Path, python: Path, plugin_files: list[str]) -> None:
        self.root = root
        self.python = python
        self.plugin_files = plugin_files
        self.absent: dict[str, Any] = {}
        self.absent_import: dict[str, Any] = {}
        self.present: dict[str, Any] = {}
        self.present_import: dict[str, Any] = {}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    """Build both wheels, run the absent checks on core alone, then add the plugin."""
    uv = _uv()
    tool = _load_tool()
    root = tmp_path_factory.mktemp("plugin-mechanics")
    core = tool.build(CORE_DIR, root / "core-wheel")
    plugin = tool.build(PLUGIN_DIR, root / "plugin-wheel")
    python = root / "venv" / "bin" / "python"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(root / "venv")], root)
    # Install the versions uv.lock pins (already in uv's cache), never a newer torch.
    pins = ["--constraints", str(tool.lock_constraints(root / "constraints.txt"))]
    _run([uv, "pip", "install", "--python", str(python), *pins, str(core.wheel),
          *tool.TEST_TOOLS], root)

    state = Env(root, python, plugin.files)
    state.absent_import = _import_nnx(python, root)
    state.absent = _probe(python, root, ABSENT_CHECKS)

    _run([uv, "pip", "install", "--python", str(python), *pins, str(plugin.wheel)], root)
    state.present_import = _import_nnx(python, root)
    state.present = _probe(python, root, PRESENT_CHECKS)
    return state


def _raised(result: dict[str, Any], exc_name: str) -> str:
    assert not result["ok"], f"expected {exc_name}, got {result.get('out')!r}"
    assert exc_name in result["mro"], result["tb"]
    msg: str = result["msg"]
    return msg


def _value(result: dict[str, Any]) -> Any:
    assert result["ok"], result["tb"]
    return result["out"]


# ---------------------------------------------------------------- the wheel


@pytest.mark.slow
def test_plugin_wheel_ships_only_its_subpackages(env: Env) -> None:
    # Its two halves: the training extensions and the tool over runs.
    assert "nnx/example_plugin/__init__.py" in env.plugin_files
    assert "nnx/example_tool/__init__.py" in env.plugin_files
    assert "nnx/__init__.py" not in env.plugin_files
    prefixes = ("nnx/example_plugin/", "nnx/example_tool/", "nnx_example_plugin-0.1.0.dist-info/")
    assert all(f.startswith(prefixes) for f in env.plugin_files), env.plugin_files


@pytest.mark.slow
def test_venv_uses_installed_wheels_not_the_source_tree(env: Env) -> None:
    for observed in (env.absent_import, env.present_import):
        assert not observed["nnx_file"].startswith(str(ROOT))
        assert all(not p.startswith(str(ROOT)) for p in observed["nnx_path"])


# ---------------------------------------------------------- plugin absent


@pytest.mark.slow
@pytest.mark.parametrize("check", ["export", "net_item", "resolve"])
def test_absent_plugin_name_raises_install_hint(env: Env, check: str) -> None:
    msg = _raised(env.absent[check], "MissingDistributionError")
    assert "ImportError" in env.absent[check]["mro"]
    assert HINT in msg


@pytest.mark.slow
@pytest.mark.parametrize("check", ["attr", "net"])
def test_absent_plugin_attribute_raises_the_hint_as_an_attribute_error(env: Env,
                                                                       check: str) -> None:
    msg = _raised(env.absent[check], "MissingDistributionAttributeError")
    assert "AttributeError" in env.absent[check]["mro"]
    assert HINT in msg
    assert _value(env.absent["hasattr"]) == [False, None, False, None]


@pytest.mark.slow
def test_absent_plugin_unknown_names_raise_without_hint(env: Env) -> None:
    assert "pip install" not in _raised(env.absent["unknown"], "ImportError")
    assert "MissingDistributionError" not in env.absent["unknown"]["mro"]
    assert "pip install" not in _raised(env.absent["unknown_net"], "AttributeError")


@pytest.mark.slow
@pytest.mark.parametrize("check", ["module", "module_from"])
def test_absent_plugin_subpackage_import_names_its_distribution(env: Env, check: str) -> None:
    # ``import nnx.<sub>`` is a ModuleNotFoundError, as any absent module, with the hint.
    msg = _raised(env.absent[check], "MissingSubpackageError")
    assert "ModuleNotFoundError" in env.absent[check]["mro"]
    assert msg == ("nnx.example_plugin is provided by the nnx-example-plugin distribution, "
                   "which is not installed; install it with: " + HINT)
    plain = _raised(env.absent["unknown_module"], "ModuleNotFoundError")
    assert plain == "No module named 'nnx.no_such_subpackage'"


@pytest.mark.slow
def test_absent_plugin_optimizer_factory_names_its_distribution(env: Env) -> None:
    assert HINT in _raised(env.absent["factory_hint"], "MissingOptimizerFactoryError")


@pytest.mark.slow
def test_absent_plugin_leaves_registries_and_core_alone(env: Env) -> None:
    assert _value(env.absent["factory"]) is None
    assert _value(env.absent["core_still_works"]) == [1, 2]


# --------------------------------------------------------- plugin present


@pytest.mark.slow
def test_present_plugin_export_resolves_lazily(env: Env) -> None:
    out = _value(env.present["export"])
    assert out == {"before": False, "module": "nnx.example_plugin.net", "y": [2.0, 6.0]}


@pytest.mark.slow
def test_present_plugin_net_builds_and_forwards(env: Env) -> None:
    out = _value(env.present["net"])
    assert out["type"] == "ExampleMLP"
    assert out["shape"] == [4, 2]
    assert out["scaled"]
    assert "EXAMPLE_MLP" in out["members"]
    assert out["members"][:4] == ["FEED_FWD", "CONV", "VIT", "MOE"]


@pytest.mark.slow
def test_present_plugin_resolves_params_and_factory(env: Env) -> None:
    assert _value(env.present["resolve"]) == ["ExampleMLPParams", 0.5]
    assert _value(env.present["factory"]) == "nnx.example_plugin.optim:example_sgd"


@pytest.mark.slow
def test_present_plugin_exports_are_listed_by_dir_without_importing_it(env: Env) -> None:
    assert _value(env.present["dir"]) == {"listed": True, "imported": False}


@pytest.mark.slow
def test_present_plugin_unknown_name_still_raises_without_hint(env: Env) -> None:
    msg = _raised(env.present["unknown"], "ImportError")
    assert "MissingDistributionError" not in env.present["unknown"]["mro"]
    assert "pip install" not in msg


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["absent", "present"])
def test_import_nnx_imports_no_addon_and_no_optional_dep(env: Env, stage: str) -> None:
    modules = (env.absent_import if stage == "absent" else env.present_import)["modules"]
    assert "nnx.example_plugin" not in modules
    # nnx/__init__.py promises more: no submodule at all until a name is asked for.
    assert [m for m in modules if m.startswith("nnx.")] == []
    assert [m for m in OPTIONAL_DEPS if m in modules] == []


@pytest.mark.slow
def test_plugin_own_tests_pass_in_the_venv(env: Env) -> None:
    pytest_bin = env.python.parent / "pytest"
    out = _run(
        [str(pytest_bin), str(PLUGIN_DIR / "tests"), "-q", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(env.root), "-p", "no:cacheprovider", "--import-mode=importlib",
         "-rs"],
        env.root,
    )
    summary = out.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, out
    # Only the optional crossing's present case skips: this venv has no nnx-peft (the
    # plugin's peft extra; check_alacarte's --extras peft cell runs it).
    assert "1 skipped" in summary and "the peft extra is not installed" in out, out


# ------------------------------------------------------------------- fast


def test_import_nnx_loads_no_addon_and_no_optional_dependency(tmp_path: Path) -> None:
    """In this environment: ``import nnx`` loads only nnx-core code, and no extra."""
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_NNX], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    modules: dict[str, str | None] = json.loads(proc.stdout)["modules"]
    core_src = (CORE_DIR / "src" / "nnx").resolve()
    core_dirs = [core_src, *(Path(p).resolve() for p in json.loads(proc.stdout)["nnx_path"][:1])]
    foreign = {
        name: file
        for name, file in modules.items()
        if name.startswith("nnx.")
        and (file is None or not any(Path(file).resolve().is_relative_to(d) for d in core_dirs))
    }
    assert foreign == {}, f"import nnx loaded add-on modules: {foreign}"
    assert [m for m in OPTIONAL_DEPS if m in modules] == []
