"""The one validator for configuration values (spec §2.3).

Every params class, core or add-on, checks its numbers through these helpers
so that the same input is refused with the same message everywhere:

* reals must be finite ``numbers.Real`` values (booleans, strings, NaN and
  ±inf refused) and then lie in their domain;
* counts must be ``numbers.Integral`` values (booleans, floats, strings
  refused) and are normalized to a plain ``int``, so ``np.int64(2)``
  serializes and hashes exactly like ``2``;
* enum-valued fields take the member or one of its string spellings (its
  name or value, any case, and the few aliases the field names), normalized
  to the member, so ``device="cpu"`` serializes and hashes exactly like
  ``Devices.CPU``.

Each error is a ``ValueError`` naming the field and its accepted domain, and
it is raised from ``__post_init__`` before anything else exists.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from nnx._foundation.hashing import frozen_plain

E = TypeVar("E", bound=Enum)

__all__ = [
    "MAX_SEED",
    "NON_NEGATIVE",
    "OPEN_UNIT",
    "POSITIVE",
    "PROBABILITY",
    "UNIT_HALF_OPEN",
    "Domain",
    "check_batch_sizes",
    "check_choice",
    "check_count",
    "check_counts",
    "check_enum",
    "check_optional_count",
    "check_optional_real",
    "check_optional_str",
    "check_real",
    "check_run_id",
    "check_seed",
    "check_spec_config",
    "check_spec_id",
    "enum_spelling",
    "enum_spellings",
]


@dataclass(frozen=True, slots=True)
class Domain:
    """An interval of accepted reals, with its human-readable spelling."""

    low: float = -math.inf
    high: float = math.inf
    low_inclusive: bool = True
    high_inclusive: bool = True

    def __contains__(self, value: float) -> bool:
        above = value >= self.low if self.low_inclusive else value > self.low
        below = value <= self.high if self.high_inclusive else value < self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"{'>=' if self.low_inclusive else '>'} {_num(self.low)}"
        if self.low == -math.inf:
            return f"{'<=' if self.high_inclusive else '<'} {_num(self.high)}"
        left = "[" if self.low_inclusive else "("
        right = "]" if self.high_inclusive else ")"
        return f"in {left}{_num(self.low)}, {_num(self.high)}{right}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


NON_NEGATIVE = Domain(low=0.0)
POSITIVE = Domain(low=0.0, low_inclusive=False)
PROBABILITY = Domain(low=0.0, high=1.0)
UNIT_HALF_OPEN = Domain(low=0.0, high=1.0, high_inclusive=False)
OPEN_UNIT = Domain(low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_real(field: str, value: Any, domain: Domain = Domain()) -> float | int:
    """Return ``value`` as a plain Python number if it is a finite real in ``domain``.

    Plain ``int`` and ``float`` values are returned unchanged (``1`` stays ``1``,
    so configurations keep the spelling the user wrote); other reals such as
    NumPy scalars become the matching plain type.
    """
    if not _is_real(value) or isinstance(value, (str, bytes)):
        raise ValueError(
            f"{field} must be a finite real number {domain}; got {value!r} "
            f"({type(value).__name__})"
        )
    plain: float | int = int(value) if isinstance(value, numbers.Integral) else float(value)
    if not math.isfinite(plain):
        raise ValueError(f"{field} must be a finite real number {domain}; got {value!r}")
    if plain not in domain:
        raise ValueError(f"{field} must be {domain}; got {value!r}")
    return plain


def check_optional_real(
    field: str, value: Any, domain: Domain = Domain(), *, none_means: str = "unset"
) -> float | int | None:
    """Like :func:`check_real`, with ``None`` accepted as the documented sentinel."""
    if value is None:
        return None
    try:
        return check_real(field, value, domain)
    except ValueError as exc:
        raise ValueError(f"{exc} (None means {none_means})") from None


def check_count(field: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as a plain ``int`` if it is an integer count in range.

    Any ``numbers.Integral`` is accepted (NumPy integers included); booleans,
    floats (``2.0`` is not rounded), numeric strings, NaN and ±inf are refused.
    """
    span = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{field} must be an integer {span}; got {value!r} ({type(value).__name__})"
        )
    plain = int(value)
    if plain < minimum or (maximum is not None and plain > maximum):
        raise ValueError(f"{field} must be an integer {span}; got {plain}")
    return plain


#: The largest seed every stream accepts (NumPy's legacy seeding is 32-bit): a
#: larger one would fail half-way through seeding, after the others were set.
MAX_SEED = 2**32 - 1


def check_seed(field: str, value: Any) -> int:
    """A seed: a non-boolean integer in [0, 2**32 - 1], normalized to a plain ``int``."""
    return check_count(field, value, minimum=0, maximum=MAX_SEED)


def check_run_id(field: str, value: Any, *, what: str = "run id") -> str:
    """A run id (or a checkpoint tag, ``what="checkpoint tag"``) names one entry directly
    under its directory: a non-empty string without a path separator or NUL, and not
    ``.`` or ``..``, so joining it to the runs root can never reach outside."""
    if not isinstance(value, str) or not value or value in (".", "..") or any(
            sep in value for sep in ("/", "\\", "\0")):
        raise ValueError(f"{field} is not a {what}: {value!r} (a {what} is one plain name, "
                         "without '/' or '\\', and not '.' or '..')")
    return value


def check_optional_count(
    field: str, value: Any, *, minimum: int = 1, none_means: str = "unset"
) -> int | None:
    """Like :func:`check_count`, with ``None`` accepted as the variant sentinel."""
    if value is None:
        return None
    try:
        return check_count(field, value, minimum=minimum)
    except ValueError as exc:
        raise ValueError(f"{exc} (None means {none_means})") from None


def check_counts(field: str, values: Any, *, minimum: int = 1) -> tuple[int, ...]:
    """Validate a sequence of counts entry by entry into an immutable tuple."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{field} must be a sequence of integers >= {minimum}; got {values!r}")
    return tuple(
        check_count(f"{field}[{i}]", v, minimum=minimum) for i, v in enumerate(values)
    )


def check_choice(field: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of the allowed strings."""
    allowed = tuple(choices)
    if not isinstance(value, str) or value not in allowed:
        names = ", ".join(repr(c) for c in allowed)
        raise ValueError(f"{field} must be one of {names}; got {value!r}")
    return value


def enum_spelling(value: Any, enum_cls: type[E],
                  aliases: Mapping[str, E] | None = None) -> E | None:
    """The member ``value`` is or spells (name or value in any case, or an alias);
    None when it spells none. Booleans and other non-strings spell nothing."""
    if isinstance(value, enum_cls):
        return value
    if not isinstance(value, str):
        return None
    key = value.lower()
    for member in enum_cls:
        if key in (member.name.lower(), str(member.value).lower()):
            return member
    return None if aliases is None else aliases.get(key)


def enum_spellings(enum_cls: type[Enum], aliases: Mapping[str, Any] | None = None) -> str:
    """The accepted string spellings, for an error message: each member's value (its
    lowercase name for every NNx enum), then the aliases."""
    names = [str(m.value).lower() for m in enum_cls]
    names += [a for a in (aliases or {}) if a not in names]
    return ", ".join(repr(n) for n in names)


def check_enum(field: str, value: Any, enum_cls: type[E],
               aliases: Mapping[str, E] | None = None) -> E:
    """Return the member of ``enum_cls`` that ``value`` is or spells (see
    :func:`enum_spelling`), so a string and the member give the same state and run id;
    refuse anything else naming ``field`` and the accepted spellings."""
    member = enum_spelling(value, enum_cls, aliases)
    if member is None:
        raise ValueError(f"{field} must be a {enum_cls.__name__} member or one of its "
                         f"spellings (any case): {enum_spellings(enum_cls, aliases)}; "
                         f"got {value!r}")
    return member


def check_optional_str(field: str, value: Any, *, allow_empty: bool = False) -> str | None:
    """Return ``value`` if it is ``None`` or a (non-empty) string."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string or None; got {type(value).__name__}")
    if not allow_empty and not value:
        raise ValueError(f"{field} must be a non-empty string or None; got ''")
    return value


def check_batch_sizes(field: str, values: Any) -> tuple[int | None, ...]:
    """Validate per-split batch sizes: counts >= 1, ``None`` meaning the full split.

    Zero never means "full split" or "no split"; ``None`` is the only sentinel.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(
            f"{field} must be a sequence of batch sizes (integers >= 1, or None for the "
            f"full split); got {values!r}"
        )
    return tuple(
        None
        if v is None
        else check_count(f"{field}[{i}]", v, minimum=1)
        for i, v in enumerate(values)
    )


def check_spec_id(owner: str, value: Any, *, hint: str = "", field: str = "id") -> str:
    """A registry id: a non-empty string without '@' or surrounding whitespace.

    ``owner`` is the spec class name (``"ModelSpec"``) and ``field`` the attribute
    holding the id (``"op"`` for a transform recipe); ``hint`` is appended when
    the value is a callable (code passed where a registered id belongs).
    """
    if not isinstance(value, str) or not value or "@" in value or value != value.strip():
        extra = f" ({hint})" if hint and callable(value) else ""
        raise ValueError(f"{owner}.{field} must be a non-empty string without '@' or surrounding "
                         f"whitespace; got {value!r}{extra}")
    return value


def check_spec_config(owner: str, value: Any, *, hint: str = "") -> Any:
    """A spec's config: JSON-like data, returned read-only; code is refused by path."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{owner}.config must be a mapping of JSON-like values; "
                         f"got {type(value).__name__}")
    try:
        return frozen_plain(value, f"{owner}.config")
    except TypeError as exc:  # a callable, an object, a non-string key …
        suffix = f" ({hint})" if hint else ""
        raise ValueError(f"{exc}; a {owner} never holds code{suffix}") from None
