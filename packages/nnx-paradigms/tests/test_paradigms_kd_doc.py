"""docs/paradigms.md's distillation blocks and docs/offline-distillation.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"


#: The distillation part of paradigms.md: its introduction and the sections before SimCLR
#: (the later sections have their own test, and their own namespace).
_DISTILLATION_END = "\n## SimCLR\n"


def blocks(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    text = text.split(_DISTILLATION_END, 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


@pytest.mark.parametrize("page, at_least", [("paradigms.md", 4),
                                            ("offline-distillation.md", 2)])
def test_every_python_block_runs_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          page: str, at_least: int) -> None:
    if not (DOCS / page).exists():
        pytest.skip(f"docs/{page} ships with the repository, not the sdist")
    monkeypatch.chdir(tmp_path)  # the blocks write runs/
    found = blocks(page)
    assert len(found) >= at_least
    namespace: dict[str, object] = {"__name__": "__paradigms_doc__"}
    for i, code in enumerate(found):
        exec(compile(code, f"docs/{page} block {i + 1}", "exec"), namespace)
