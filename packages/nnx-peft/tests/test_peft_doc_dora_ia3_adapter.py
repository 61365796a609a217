"""docs/peft.md's DoRA, IA3 and Adapter-layers sections run as written (so they cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "peft.md"
SECTIONS = ("DoRA", "IA3", "Adapter layers")


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/peft.md has no '## {title}' section"
    return match.group(1)


@pytest.mark.parametrize("title", SECTIONS)
def test_every_python_block_of_the_section_runs(title: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if not DOC.exists():  # an installed sdist ships no docs/
        pytest.skip("docs/ is not part of this checkout")
    monkeypatch.chdir(tmp_path)  # the blocks write adapter files
    blocks = re.findall(r"^```python\n(.*?)^```$", _section(title), re.M | re.S)
    assert blocks
    namespace: dict[str, object] = {"__name__": "__peft_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/peft.md '{title}' block {i + 1}", "exec"), namespace)
