"""docs/paradigms.md's SimCLR, Mixup/CutMix and MoE sections run as written (so they
cannot rot): every Python block of those sections, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "paradigms.md"
SECTIONS = ("SimCLR", "Mixup and CutMix", "Mixture of experts")


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("title", SECTIONS)
def test_every_python_block_of_the_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                title: str) -> None:
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    text = section(DOC.read_text(encoding="utf-8"), title)
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    assert blocks
    namespace: dict[str, object] = {"__name__": "__paradigms_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/paradigms.md {title} block {i + 1}", "exec"), namespace)
