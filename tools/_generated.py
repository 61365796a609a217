"""How a list generator under tools/ finishes: write the generated text, or, with
``--check``, leave the file alone and fail with the diff when it is stale (CI's mode).

Shared by tools/gen_catalog.py and tools/gen_exports.py. Standard library only.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path


def settle(path: Path, text: str, *, check: bool, tool: str) -> int:
    """Exit status for ``tool``: 0 when ``path`` holds ``text`` (written unless ``check``),
    1 with a unified diff on stdout when ``check`` finds it stale."""
    current = path.read_text() if path.is_file() else ""
    if check:
        if current == text:
            print(f"{tool}: {path.name} is current")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True),
            str(path), "generated"))
        print(f"{tool}: {path} is stale; run: uv run python tools/{tool}.py", file=sys.stderr)
        return 1
    if current != text:
        path.write_text(text)
        print(f"{tool}: wrote {path}")
    return 0
