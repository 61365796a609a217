"""JSON-like values in immutable form, refused by path (spec §4.4).

:func:`freeze` accepts what :func:`nnx._foundation.hashing.plain` accepts (the project's
one definition of serializable data) plus :class:`IdentityRef` objects, and
returns read-only mappings and tuples. Anything else (non-finite floats, sets,
bytes, callables, other objects) is a ``ValueError`` naming its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from nnx._foundation.hashing import plain
from nnx.provenance.identity import IdentityRef, is_reference

__all__ = ["freeze", "thaw"]


def freeze(value: Any, path: str) -> Any:
    """``value`` as immutable JSON-like data; a ``ValueError`` names what is refused."""
    try:
        data = plain(_with_refs(value), path)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    return _immutable(data, path)


def thaw(value: Any) -> Any:
    """Frozen data back as plain dicts and lists (for JSON text)."""
    return plain(value)


def _with_refs(value: Any) -> Any:
    if isinstance(value, IdentityRef):
        return value.state()
    if isinstance(value, Mapping):
        return {k: _with_refs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_with_refs(v) for v in value]
    return value


def _immutable(data: Any, path: str) -> Any:
    if isinstance(data, dict):
        if is_reference(data):
            try:
                return MappingProxyType(IdentityRef.from_state(data).state())
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        return MappingProxyType({k: _immutable(v, f"{path}.{k}") for k, v in data.items()})
    if isinstance(data, list):
        return tuple(_immutable(v, f"{path}[{i}]") for i, v in enumerate(data))
    return data
