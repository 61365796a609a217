"""Every script in examples/ runs, offline, from an empty working directory, twice.

Parametrized over the glob, so a new example is picked up without touching
this file. Each runs as its own process (``sys.executable``, the workspace's
interpreter) with a 60 s limit, and must exit 0 without printing a
traceback; the scripts assert their own claims, so exit 0 means they held.
The second run starts in the directory the first left behind, as a user who
runs an example again would: what it wrote (runs, pointers) must not make it
fail.
"""

from __future__ import annotations

import os
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
    for attempt in ("first", "second"):
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, (f"{script.name}'s {attempt} run exited "
                                      f"{proc.returncode}:\n{output[-4000:]}")
        assert "Traceback" not in output, output[-4000:]
        assert proc.stdout.strip(), f"{script.name} printed nothing"
