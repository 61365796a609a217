"""Identity references (spec §4.4): declared, digest or unknown.

A *declared* reference is a name you supply (a dataset id, a data_id): it is
recorded but never reported as verified. A *digest* is the SHA-256 of bytes,
made only by the explicit :func:`hash_file` / :func:`hash_bytes` calls (or a
split plan's own ``digest()``). *unknown* says an identity exists but was not
established. In a manifest a reference is the JSON object
``{"identity": <kind>, "value": <name | hex | null>}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx._foundation.hashing import sha256_hex

__all__ = ["KINDS", "IdentityRef", "declared", "hash_bytes", "hash_file", "is_reference"]

#: The three kinds of identity a reference can carry.
KINDS = ("declared", "digest", "unknown")
_KEYS = frozenset({"identity", "value"})
_HEX = re.compile(r"[0-9a-f]+")
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class IdentityRef:
    """One identity: ``kind`` (declared / digest / unknown) and its ``value``.

    ``value`` is the declared name, the lowercase hex digest, or ``None`` for
    an unknown identity.
    """

    kind: str
    value: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"IdentityRef.kind must be one of {', '.join(KINDS)}; "
                             f"got {self.kind!r}")
        if self.kind == "unknown":
            if self.value is not None:
                raise ValueError(f"an unknown IdentityRef has no value; got {self.value!r}")
            return
        if not isinstance(self.value, str) or not self.value:
            raise ValueError(f"a {self.kind} IdentityRef needs a non-empty string value; "
                             f"got {self.value!r}")
        if self.kind == "digest":
            digest = self.value.lower()
            if not _HEX.fullmatch(digest):
                raise ValueError(f"a digest IdentityRef needs a hex string; got {self.value!r}")
            object.__setattr__(self, "value", digest)

    @classmethod
    def unknown(cls) -> IdentityRef:
        """An identity that exists but was not established."""
        return cls("unknown")

    @property
    def verified(self) -> bool:
        """Whether the identity is a digest of the content (never true for a name)."""
        return self.kind == "digest"

    def state(self) -> dict[str, Any]:
        """The JSON form stored in a manifest."""
        return {"identity": self.kind, "value": self.value}

    @classmethod
    def from_state(cls, state: Any) -> IdentityRef:
        if not is_reference(state):
            raise ValueError("an identity reference is a mapping with exactly the keys "
                             f"'identity' and 'value'; got {state!r}")
        return cls(state["identity"], state["value"])

    def to_json(self) -> str:
        return json.dumps(self.state(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> IdentityRef:
        return cls.from_state(json.loads(text))


def is_reference(value: Any) -> bool:
    """Whether ``value`` has the JSON shape of an identity reference."""
    return isinstance(value, Mapping) and set(value) == _KEYS


def declared(name: str) -> IdentityRef:
    """A declared identity: recorded as given, never verified."""
    if not isinstance(name, str):
        raise ValueError(f"a declared identity is a non-empty string; got {type(name).__name__}")
    return IdentityRef("declared", name)


def hash_bytes(data: bytes | bytearray | memoryview) -> IdentityRef:
    """The SHA-256 digest identity of ``data``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"hash_bytes needs bytes; got {type(data).__name__}")
    return IdentityRef("digest", sha256_hex(bytes(data)))


def hash_file(path: str | os.PathLike[str]) -> IdentityRef:
    """The SHA-256 digest identity of the file at ``path``, read in chunks."""
    sha = hashlib.sha256()
    with open(os.fspath(path), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
    return IdentityRef("digest", sha.hexdigest())
