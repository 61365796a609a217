"""Every script in examples/ runs, offline, from an empty working directory, twice.

Parametrized over the glob, so a new example is picked up without touching
this file. Each runs as its own process (``sys.executable``, the workspace's
interpreter) with a 60 s limit, and must exit 0 without printing a
traceback; the scripts assert their own claims, so exit 0 means they held.
The second run starts in the directory the first left behind, as a user who
runs an example again would: what it wrote (runs, pointers) must not make it
fail. Decoded text an example prints (its ``greedy:`` / ``sampled:`` lines) must
read like text, not noise ("keeperssss…", a line of spaces), and a seeded
example decodes the same text on the second run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# Each script imports torch and trains a few tiny runs: several seconds apiece.
pytestmark = pytest.mark.slow


def test_the_examples_directory_is_not_empty() -> None:
    assert len(EXAMPLES) >= 8, EXAMPLES  # the glob must not silently match nothing


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    # Tiny nets gain nothing from intra-op threads; CI's two cores are shared.
    env["OMP_NUM_THREADS"] = "1"
    env.pop("PYTHONPATH", None)  # the installed nnx, as a user would run it
    decoded_per_run = []
    for attempt in ("first", "second"):
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True,
                              timeout=300)  # a hang guard; a loaded 2-core machine is slow
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, (f"{script.name}'s {attempt} run exited "
                                      f"{proc.returncode}:\n{output[-4000:]}")
        assert "Traceback" not in output, output[-4000:]
        assert proc.stdout.strip(), f"{script.name} printed nothing"
        decoded_per_run.append(decoded_text(proc.stdout))
    if ".generate(" in script.read_text(encoding="utf-8"):  # an LM example shows its text
        assert decoded_per_run[0], f"{script.name} printed no greedy: / sampled: line"
    assert decoded_per_run[0] == decoded_per_run[1]
    for text in decoded_per_run[0]:
        words = re.findall(r"[A-Za-z]+", text)
        assert len(words) >= 5, text
        assert not re.search(r"(.)\1{3,}", text), text  # no "ssss", no run of spaces
        assert max(words.count(w) for w in words) <= len(words) // 2, text


def decoded_text(stdout: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in stdout.splitlines()
            if line.startswith(("greedy:", "sampled:"))]


def test_the_onnx_example_exports_a_registered_module(tmp_path: Path) -> None:
    """examples/04_onnx_export.py::registered_module_variant (spec §3.2), called as a user
    importing the example would: it asserts onnxruntime matches torch itself."""
    import importlib.util

    pytest.importorskip("onnxruntime")
    path = ROOT / "examples" / "04_onnx_export.py"
    spec = importlib.util.spec_from_file_location("onnx_export_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.registered_module_variant(str(tmp_path))
    assert written == (tmp_path / "scorer.onnx").resolve() and written.stat().st_size > 0
