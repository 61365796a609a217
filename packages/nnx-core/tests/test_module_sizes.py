"""No module of nnx-core over 450 lines (issue 37).

A module holds one concept; past 450 lines it has grown a second one, and the
next engineer must read both to change either. Counted as lines of the file
(``wc -l``), comments and docstrings included: they are read too.
"""

from __future__ import annotations

from pathlib import Path

import nnx

SRC = Path(nnx.__file__).parent
LIMIT = 450



def module_sizes(src: Path) -> dict[str, int]:
    """Each module under ``src`` (the ``nnx`` package folder), by its path from the
    folder above, with its line count."""
    return {path.relative_to(src.parent).as_posix():
            len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(src.rglob("*.py"))}


def test_no_module_of_nnx_core_is_over_450_lines():
    over = {path: lines for path, lines in module_sizes(SRC).items()
            if lines > LIMIT}
    assert not over, (f"over {LIMIT} lines: {over}; split by concept (one concept per "
                      "module), not into arbitrary halves")
