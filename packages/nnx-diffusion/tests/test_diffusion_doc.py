"""docs/diffusion.md runs as written, every Python block in order (so it cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "diffusion.md"


def test_every_python_block_of_the_diffusion_page_runs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) >= 5
    namespace: dict[str, object] = {"__name__": "__diffusion_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/diffusion.md block {i + 1}", "exec"), namespace)
