"""Sample ids, group / class keys and the seeded order (spec §13.3).

A plan's ids are ``str`` or ``int`` (one type per plan) or, for a positional
plan, row positions. The seeded order of a key is the SHA-256 of the canonical
JSON of ``[seed, key]``: it depends on nothing but the seed and the key, so it
is the same in every process and library version, and no RNG is read.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx._foundation.validation import check_count

__all__ = ["ID_KINDS", "MAX_SEED", "Key", "SplitError", "as_keys", "as_list", "check_seed",
           "checked", "id_kind", "normalize_ids", "order_digest", "seeded_order", "sort_ids"]

#: How a plan names its samples: by string id, by integer id, or by row position.
ID_KINDS = ("str", "int", "position")
#: Seeds are unsigned 64-bit integers (what seed=None draws from the OS).
MAX_SEED = 2**64 - 1

T = TypeVar("T")
Key = str | int


class SplitError(ValueError):
    """A split plan or its replay is refused; raised before any tensor or loader exists."""


def checked(call: Callable[[], T]) -> T:
    """Run a shared validator, its ValueError raised again as a :class:`SplitError`."""
    try:
        return call()
    except SplitError:
        raise
    except ValueError as exc:
        raise SplitError(str(exc)) from None


def _key(value: Any, what: str, index: int) -> Key:
    """One id / group key as a plain ``str`` or ``int`` (NumPy integers included)."""
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise SplitError(f"{what}[{index}] must be a str or an int; got {value!r} "
                     f"({type(value).__name__})")


def as_list(values: Any, what: str) -> list[Any]:
    if isinstance(values, (str, bytes)) or values is None:
        raise SplitError(f"{what} must be a sequence (a list, array or Series); got {values!r}")
    if isinstance(values, np.ndarray) and values.dtype.kind == "M":
        return list(values)  # tolist() would turn datetime64[ns] into bare integers
    tolist = getattr(values, "tolist", None)  # Series / ndarray: Python scalars, in order
    try:
        return list(tolist()) if callable(tolist) else list(values)
    except TypeError:
        raise SplitError(f"{what} must be a sequence; got {type(values).__name__}") from None


def as_keys(values: Any, what: str) -> list[Key]:
    """A sequence of group keys as plain ``str`` / ``int`` values."""
    return [_key(v, what, i) for i, v in enumerate(as_list(values, what))]


def normalize_ids(ids: Any, what: str = "ids") -> tuple[list[Key], str]:
    """The ids as plain values and their kind; one type, no duplicates."""
    keys = as_keys(ids, what)
    kinds = {type(k) for k in keys}
    if len(kinds) > 1:
        raise SplitError(f"{what} mix str and int ids; a plan uses one id type")
    seen: set[Key] = set()
    for i, k in enumerate(keys):
        if k in seen:
            raise SplitError(f"{what}[{i}] repeats the id {k!r}; sample ids must be unique")
        seen.add(k)
    kind = "str" if kinds == {str} else "int"
    return keys, kind


def id_kind(keys: Iterable[Key]) -> str | None:
    """``"str"`` / ``"int"`` for a non-empty collection of one type, else None."""
    kinds = {type(k) for k in keys}
    if kinds == {str}:
        return "str"
    if kinds == {int}:
        return "int"
    return None


def check_seed(seed: Any) -> int:
    return checked(lambda: check_count("plan_split.seed", seed, minimum=0, maximum=MAX_SEED))


def order_digest(seed: int, key: Any) -> str:
    """The seeded rank of ``key``: SHA-256 of the canonical ``[seed, key]``."""
    return sha256_hex(canonical_bytes([seed, key]))


def seeded_order(keys: Sequence[T], seed: int) -> list[T]:
    """``keys`` ranked by their seeded digest (ties, impossible in practice, by value)."""
    return sorted(keys, key=lambda k: (order_digest(seed, k), canonical_bytes(k)))


def sort_ids(keys: Iterable[Key]) -> list[Key]:
    """Ids sorted as stored: numbers numerically, strings by code point."""
    return sorted(keys)  # type: ignore[type-var,unused-ignore]
