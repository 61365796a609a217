"""docs/graphs.md runs as written, every Python block in order (so it cannot rot): the
node split planned over node ids (spec §13.3) among them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "graphs.md"


def test_every_python_block_of_the_graphs_page_runs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) >= 3 and any("plan.resolve(node_ids)" in b for b in blocks)
    namespace: dict[str, object] = {"__name__": "__graphs_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/graphs.md block {i + 1}", "exec"), namespace)
