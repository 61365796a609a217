"""What nnx.calibration reads and writes on disk: primitive JSON documents
(``nnx.calibration/1``, and ``nnx.abstention/1`` for its sibling package, which imports
them from here: one home in the distribution), one writer, one reader.

Floats are written as Python's shortest round-trip repr, so a float64 reloads
bit-exact; files are written with nnx-core's one atomic writer and read with its
bounded JSON reader.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from nnx.extend import atomic_write_text, canonical_bytes, load_json, sha256_hex

__all__ = ["JsonDocument", "digest", "dumps", "read", "save"]


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


_D = TypeVar("_D", bound="JsonDocument")


class JsonDocument:
    """``to_json`` / ``save`` / ``from_json`` / ``load`` over a class's ``document()`` and
    ``_from_document``; the class names its format, kind and load error."""

    FORMAT: ClassVar[str]
    KIND: ClassVar[str]
    ERROR: ClassVar[type[ValueError]]

    def document(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def _from_document(cls: type[_D], doc: dict[str, Any]) -> _D:
        raise NotImplementedError

    def to_json(self) -> str:
        return dumps(self.document())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the document as JSON atomically (nnx-core's one atomic writer)."""
        save(path, self.document())

    @classmethod
    def from_json(cls: type[_D], text: str) -> _D:
        return cls._from_document(read(None, text, cls.FORMAT, cls.KIND, cls.ERROR))

    @classmethod
    def load(cls: type[_D], path: str | os.PathLike[str]) -> _D:
        """Reload a saved document; a malformed one raises the class's ERROR."""
        return cls._from_document(read(path, None, cls.FORMAT, cls.KIND, cls.ERROR))
