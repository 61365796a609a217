"""The two provenance files of a run directory, read and written as JSON.

Every write goes through the project's one atomic writer, so an interrupted
write leaves the previous record in place. Every read goes through the bounded
JSON reader, so a huge or deeply nested file is a ValueError (an ignored,
unreadable record) rather than a RecursionError.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.bounded import load_json

__all__ = ["ATTEMPT_FILE", "PROVENANCE_FILE", "loads", "read_json", "write_json"]

PROVENANCE_FILE = "provenance.json"
ATTEMPT_FILE = "attempt.json"


def write_json(path: str | os.PathLike[str], document: Any) -> None:
    """Write ``document`` (JSON-like) as sorted, indented UTF-8 JSON, atomically."""
    # Here, not at the top: the run-file check reads this module's file names alone,
    # and a fit without provenance= loads nothing more of the package (issue 38).
    from nnx.provenance._values import thaw

    text = json.dumps(thaw(document), sort_keys=True, indent=2, ensure_ascii=False,
                      allow_nan=False)
    atomic_write_text(path, text + "\n")


def loads(text: str | bytes) -> Any:
    """Parse JSON strictly: NaN / Infinity are refused, and so is a document too large or
    too deeply nested to be a provenance record (ValueError)."""
    return load_json(data=text, where="provenance JSON", parse_constant=_no_constant)


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a UTF-8 JSON file strictly (as :func:`loads`)."""
    return load_json(path, where=Path(path).name, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in provenance JSON")
