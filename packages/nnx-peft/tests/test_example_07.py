"""examples/07_lora_finetuning.py runs and holds its own assertions (also run by
tests-integration/test_examples.py as a subprocess)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "07_lora_finetuning.py"


def test_the_lora_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not SCRIPT.exists():  # an installed sdist ships no examples/
        pytest.skip("examples/ is not part of this checkout")
    namespace = runpy.run_path(str(SCRIPT), run_name="__example__")
    namespace["main"](str(tmp_path))
    out = capsys.readouterr().out
    assert "every base parameter unchanged" in out and "predicts identically" in out
