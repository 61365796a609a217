"""docs/lm.md runs as written, every Python block in order (so it cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "lm.md"


def test_every_python_block_of_the_lm_page_runs(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/ and tokenizer files
    corpus = Path(__file__).with_name("data") / "tiny_corpus.txt"
    (tmp_path / "my_corpus.txt").write_text(corpus.read_text(encoding="utf-8"), encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "__lm_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/lm.md block {i + 1}", "exec"), namespace)
