"""docs/jepa.md and docs/dpo.md run as written, every Python block in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _run(page: str, minimum: int) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) >= minimum
    namespace: dict[str, object] = {"__name__": f"__{page}__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/{page} block {i + 1}", "exec"), namespace)


def test_every_python_block_of_the_jepa_page_runs(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    _run("jepa.md", 4)


def test_every_python_block_of_the_dpo_page_runs(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nnx.lm")
    monkeypatch.chdir(tmp_path)
    _run("dpo.md", 3)
