"""docs/installation.md's two ways to install from a clone without the workspace, run
for real (issue 36): the wheels ``uv build --all-packages`` writes, nnx-core plus one
add-on installed from them in a fresh venv and used there; and nnx-core installed by
its git URL (``nnx-core @ git+<clone-url>#subdirectory=packages/nnx-core``).

The installs go through ``uv pip`` with the versions uv.lock pins (already in uv's
cache), so no newer torch is fetched; the requirement strings are the page's. Each
venv runs its checks from a temporary directory, so the source tree is not importable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "installation.md"

pytestmark = pytest.mark.slow

# Runs in the fresh venv: the add-on works on top of core, a missing add-on's
# subpackage names its distribution, and nothing is imported from the clone.
_USE = """
import json, nnx
from nnx.comparison import Metric, Observation, summarize
obs = [Observation(run_id=f"r{s}", attempt_id=None, metric=Metric("acc", "max"), value=v,
                   status="completed", config="A", replicate=f"seed={s}")
       for s, v in ((0, 0.5), (1, 0.7))]
group = summarize(obs).groups[0]
try:
    import nnx.search
    missing = None
except ModuleNotFoundError as exc:
    missing = [type(exc).__name__, str(exc)]
print(json.dumps({"file": nnx.__file__, "mean": group.mean, "missing": missing}))
"""


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    return uv


def _run(cmd: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT")}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _venv(uv: str, where: Path) -> Path:
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(where)], where.parent)
    return where / "bin" / "python"


def _pins(uv: str, out: Path) -> list[str]:
    _run([uv, "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--all-extras",
          "--all-groups", "--format", "requirements-txt", "--output-file", str(out)], ROOT)
    return ["--constraints", str(out)]


def test_the_page_gives_the_commands_this_test_runs():
    text = PAGE.read_text()
    assert "uv build --all-packages --wheel --out-dir dist/" in text
    assert '"nnx-core @ git+<clone-url>#subdirectory=packages/nnx-core"' in text
    assert "not on PyPI" in text.replace("\n", " ") or "Not on PyPI" in text


def test_core_and_one_add_on_install_from_the_built_wheels(tmp_path: Path):
    uv = _uv()
    dist = tmp_path / "dist"
    _run([uv, "build", "--all-packages", "--wheel", "--out-dir", str(dist)], ROOT)
    names = sorted(p.name.split("-")[0] for p in dist.glob("*.whl"))
    expected = sorted(p.name.replace("-", "_") for p in (ROOT / "packages").iterdir()
                      if (p / "pyproject.toml").is_file())
    assert names == expected  # one wheel per distribution

    python = _venv(uv, tmp_path / "venv")
    (core,), (comparison,) = dist.glob("nnx_core-*.whl"), dist.glob("nnx_comparison-*.whl")
    _run([uv, "pip", "install", "--python", str(python), *_pins(uv, tmp_path / "pins.txt"),
          str(core), str(comparison)], tmp_path)
    out = json.loads(_run([str(python), "-c", _USE], tmp_path))
    assert str(ROOT) not in out["file"]
    assert out["mean"] == pytest.approx(0.6)
    assert out["missing"] == [
        "MissingSubpackageError",
        "nnx.search is provided by the nnx-search distribution, which is not installed; "
        "install it with: pip install nnx-search",
    ]


def test_core_installs_by_its_git_url(tmp_path: Path):
    uv = _uv()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git clone")
    python = _venv(uv, tmp_path / "venv")
    requirement = f"nnx-core @ git+{ROOT.as_uri()}#subdirectory=packages/nnx-core"
    _run([uv, "pip", "install", "--python", str(python), *_pins(uv, tmp_path / "pins.txt"),
          requirement], tmp_path)
    code = ("import json, nnx, torch\n"
            "from nnx import NNParams, Nets\n"
            "net = Nets.FEED_FWD(NNParams(input_dim=3, output_dim=2))\n"
            "shape = list(net(torch.zeros(1, 3)).shape)\n"
            "print(json.dumps({'file': nnx.__file__, 'shape': shape}))")
    out = json.loads(_run([str(python), "-c", code], tmp_path))
    assert str(ROOT) not in out["file"] and out["shape"] == [1, 2]
