"""Primitive JSON documents (``nnx.calibration/1``, ``nnx.abstention/1``): one writer,
one reader.

Floats are written as Python's shortest round-trip repr, so a float64 reloads
bit-exact; files are written with nnx-core's one atomic writer and read with its
bounded JSON reader.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from nnx.extend import atomic_write_text, canonical_bytes, load_json, sha256_hex

__all__ = ["digest", "dumps", "read", "save"]


def dumps(document: Mapping[str, Any]) -> str:
    """The document as indented, key-sorted JSON text; NaN and infinity refused."""
    return json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"


def digest(document: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical encoding: an artifact's id."""
    return sha256_hex(canonical_bytes(document))


def save(path: str | os.PathLike[str], document: Mapping[str, Any]) -> None:
    atomic_write_text(path, dumps(document))


def read(source: str | os.PathLike[str] | None, text: str | None, fmt: str, kind: str,
         error: type[ValueError]) -> dict[str, Any]:
    """A ``fmt`` document of ``kind`` from a file or text; anything else is ``error``."""
    try:
        document = load_json(source) if source is not None else load_json(data=text)
    except (OSError, ValueError) as exc:
        raise error(f"cannot read a {fmt} document: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != fmt:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise error(f"not a {fmt} document (format {found!r})")
    if document.get("kind") != kind:
        raise error(f"a {fmt} document of kind {document.get('kind')!r}; expected {kind!r}")
    return document
