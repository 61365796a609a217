"""Canonical serialization and the project's digests.

One place decides how a configuration becomes bytes: UTF-8 JSON with sorted
keys, no whitespace, tuples as arrays, NaN/inf refused. The run id is the md5
of those bytes; content digests (files, manifests) are SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["canonical_bytes", "file_sha256", "frozen_plain", "md5_hex", "plain", "sealed",
           "sha256_hex"]


def plain(value: Any, path: str = "$") -> Any:
    """Return ``value`` as JSON-like plain data, refusing anything else by path.

    Mappings need string keys; tuples and lists become lists; NumPy scalars
    become Python numbers; booleans stay booleans. Floats must be finite.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(f"{path}: non-finite number {value!r} cannot be serialized")
        return f
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: mapping keys must be strings; got {k!r}")
            out[k] = plain(v, f"{path}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise TypeError(
        f"{path}: {type(value).__name__} is not JSON-like configuration data "
        "(use str, int, float, bool, None, lists and string-keyed mappings)"
    )


def frozen_plain(value: Any, path: str = "$") -> Any:
    """:func:`plain`, then made read-only: mappings become proxies, lists tuples."""
    return _freeze(plain(value, path))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def canonical_bytes(value: Any) -> bytes:
    """The canonical UTF-8 JSON encoding of ``value`` (sorted keys, compact)."""
    text = json.dumps(
        plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def md5_hex(value: Any) -> str:
    """md5 of the canonical encoding: the run-id digest."""
    return hashlib.md5(canonical_bytes(value), usedforsecurity=False).hexdigest()


def sha256_hex(data: bytes) -> str:
    """SHA-256 of raw bytes: the content digest for files and manifests."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in blocks (a file may be optimizer-sized)."""
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def sealed(encoded: bytes, hashed: bytes | None = None) -> bytes:
    """``encoded`` (the canonical bytes of a non-empty mapping whose keys all sort before
    ``"sha256"``) with ``"sha256"``: the SHA-256 of ``hashed`` (default: ``encoded``)
    added as its last key: exactly ``canonical_bytes({**mapping, "sha256": digest})``,
    without encoding the mapping a second time to hash it."""
    digest = sha256_hex(encoded if hashed is None else hashed)
    return encoded[:-1] + b',"sha256":"' + digest.encode("ascii") + b'"}'
