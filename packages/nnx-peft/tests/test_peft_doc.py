"""docs/peft.md's LoRA sections run as written, every Python block in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "peft.md"
SECTIONS = ("LoRA", "Matching and refusals", "Adapter files", "Merging",
            "LoRA runs: recipes and resume")


def _blocks(text: str) -> dict[str, list[str]]:
    """Section heading → its Python blocks (``## `` headings split the page)."""
    out: dict[str, list[str]] = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, body = part.partition("\n")
        out[heading.strip()] = re.findall(r"^```python\n(.*?)^```$", body, re.M | re.S)
    return out


def test_every_lora_block_of_the_peft_page_runs(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if not DOC.exists():  # an installed sdist ships no docs/
        pytest.skip("docs/ is not part of this checkout")
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(DOC.read_text(encoding="utf-8"))
    namespace: dict[str, object] = {"__name__": "__peft_doc__"}
    for section in SECTIONS:
        assert blocks.get(section), f"docs/peft.md has no Python block under ## {section}"
        for i, code in enumerate(blocks[section]):
            exec(compile(code, f"docs/peft.md ## {section} block {i + 1}", "exec"), namespace)
