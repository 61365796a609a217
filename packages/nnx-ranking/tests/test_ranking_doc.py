"""docs/ranking.md runs as written, every Python block in order (so it cannot rot), and
prints the worked numbers its comment claims (spec §24: MRR 1, Recall 1/2, NDCG
0.826235)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "ranking.md"


def test_every_python_block_of_the_ranking_page_runs(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert len(blocks) == 2
    namespace: dict[str, object] = {"__name__": "__ranking_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/ranking.md block {i + 1}", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1.0 0.5 0.826235"
    assert 0.0 <= float(printed[1]) <= 1.0
