"""docs/lm.md §1–§3 run as written (so they cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "lm.md"


def test_the_params_net_and_interop_sections_run() -> None:
    text = DOC.read_text(encoding="utf-8")
    sections = text.split("\n## 4.", 1)[0]  # later sections belong to later pieces
    blocks = re.findall(r"^```python\n(.*?)^```$", sections, re.M | re.S)
    assert len(blocks) == 3
    namespace: dict[str, object] = {"__name__": "__lm_doc__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/lm.md block {i + 1}", "exec"), namespace)
