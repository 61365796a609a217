"""The params contract shared by every configuration class (spec §2.1–§2.2).

A params class is a frozen, kw-only, slotted dataclass that inherits
:class:`Params`. Its ``state()`` is the plain data that run.yaml stores and
the run id hashes:

* runtime-only fields (loaders, metric callables, resume modes) never enter it;
* a field marked :func:`always` is always written (the class's essentials);
* every other field is written only when it differs from its default, so a
  field added later never shifts an existing run id.

``from_state(obj.state()).state() == obj.state()`` holds for every class.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from nnx._foundation.hashing import plain
from nnx._foundation.validation import enum_spelling

__all__ = [
    "Params",
    "always",
    "empty_mapping",
    "encode",
    "enum_decoder",
    "frozen_mapping",
    "require_exact",
    "runtime",
    "set_field",
]

_RUNTIME = "nnx.runtime"
_ALWAYS = "nnx.always"

P = TypeVar("P", bound="Params")


def runtime(default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A field that is configuration for this process only: never in ``state()``."""
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={_RUNTIME: True})
    return dataclasses.field(default=default, metadata={_RUNTIME: True})


def always(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None) -> Any:
    """A field that ``state()`` writes even at its default."""
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={_ALWAYS: True})
    return dataclasses.field(default=default, metadata={_ALWAYS: True})


def empty_mapping() -> Mapping[str, Any]:
    """Default factory for a read-only mapping field."""
    return MappingProxyType({})


def frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only snapshot of ``value`` (one level deep), keeping insertion order."""
    return MappingProxyType(dict(value or {}))


def encode(value: Any) -> Any:
    """Turn a field value into state data: params → state, enums → names, tuples → lists."""
    if isinstance(value, Params):
        return value.state()
    if isinstance(value, enum.Enum) or getattr(type(value), "_nnx_enum_like", False):
        return value.name
    state_of = getattr(value, "state", None)
    if callable(state_of) and not isinstance(value, type):
        return state_of()
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: encode(value[k]) for k in sorted(value)}
    return plain(value)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _same(a: Any, b: Any) -> bool:
    # A bool never equals a number here (True is not 1 for configuration).
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


#: Hooks renamed to public names (issue 25): old name → new. A subclass that still
#: overrides the old name keeps working for one release (it becomes the new hook, with a
#: DeprecationWarning), and the base classes keep the old names as aliases, so an old
#: override's explicit ``NNParams._validate(self)`` still reaches the base hook.
RENAMED_HOOKS: Mapping[str, str] = MappingProxyType(
    {"_validate": "validate", "_omit_from_state": "omit_from_state"})


class Params:
    """Mixin giving a params dataclass its ``state()`` / ``from_state()`` pair.

    Hooks a subclass may override (docs/extending.md): :meth:`omit_from_state`, and on
    :class:`~nnx.params.net.NNParams` ``validate``; :meth:`field_name` spells a field for
    error messages.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for old, new in RENAMED_HOOKS.items():
            if old in cls.__dict__ and new not in cls.__dict__:
                warnings.warn(f"{cls.__qualname__}.{old} is deprecated and will be removed in "
                              f"the next release: override {new} instead",
                              DeprecationWarning, stacklevel=2)
                setattr(cls, new, cls.__dict__[old])

    #: Per-field decoders turning state data back into field values.
    _DECODERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def state(self) -> dict[str, Any]:
        """The config-only plain-data view: what run.yaml stores and the run id hashes."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.metadata.get(_RUNTIME):
                continue
            value = getattr(self, f.name)
            if not f.metadata.get(_ALWAYS) and _same(value, _default_of(f)):
                continue
            if self.omit_from_state(f.name, value):
                continue
            out[f.name] = encode(value)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and ``copy.deepcopy`` support, runtime fields (loaders) included.

        Read-only mapping fields are ``MappingProxyType``, which neither pickles nor
        deep-copies; they travel as plain dicts and are made read-only again on arrival.
        The fields are set as they are, without re-running ``__post_init__``: they were
        validated when this object was built. A subclass's own ``__reduce__`` wins.
        """
        values = {f.name: _portable(getattr(self, f.name))
                  for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return (_rebuild_params, (type(self), values))

    def omit_from_state(self, name: str, value: Any) -> bool:
        """Hook: True leaves field ``name`` (at ``value``) out of ``state()``.

        For values that repeat or derive from another field: omitted, they are rebuilt
        as the default, so they never enter the run id.
        """
        return False

    #: Deprecated alias (one release): override :meth:`omit_from_state`.
    _omit_from_state = omit_from_state

    def field_name(self, field: str) -> str:
        """``Class.field``: how a refusal names one of this object's fields."""
        return f"{type(self).__name__}.{field}"

    @classmethod
    def state_fields(cls) -> frozenset[str]:
        """Names that may appear in ``state()``."""
        return frozenset(
            f.name
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if not f.metadata.get(_RUNTIME)
        )

    @classmethod
    def from_state(cls: type[P], state: Mapping[str, Any]) -> P:
        """Rebuild from ``state()`` data, validating exactly like the constructor."""
        if not isinstance(state, Mapping):
            raise TypeError(
                f"{cls.__name__}.from_state needs a mapping; got {type(state).__name__}"
            )
        unknown = sorted(set(state) - cls.state_fields())
        if unknown:
            raise ValueError(
                f"{cls.__name__}.from_state: unknown field(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(sorted(cls.state_fields()))}"
            )
        kwargs = {k: cls._DECODERS.get(k, _identity)(v) for k, v in state.items()}
        return cls(**kwargs)


def _identity(value: Any) -> Any:
    return value


class _ProxiedDict(dict):  # type: ignore[type-arg]
    """A read-only mapping field in transit (see :meth:`Params.__reduce__`)."""


def _portable(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return _ProxiedDict({k: _portable(v) for k, v in value.items()})
    return value


def _restored(value: Any) -> Any:
    if isinstance(value, _ProxiedDict):
        return MappingProxyType({k: _restored(v) for k, v in value.items()})
    return value


def _rebuild_params(cls: type[P], values: Mapping[str, Any]) -> P:
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, _restored(value))
    return obj


def enum_decoder(enum_cls: type[enum.Enum]) -> Callable[[Any], Any]:
    """Decoder for an enum field stored by member name (read with the constructor's
    spelling rule, :func:`nnx._foundation.validation.enum_spelling`)."""

    def decode(name: Any) -> Any:
        member = enum_spelling(name, enum_cls)
        if member is None:
            members = ", ".join(enum_cls.__members__)
            raise ValueError(
                f"{enum_cls.__name__} has no member {name!r}; choose one of {members}"
            )
        return member

    return decode


def require_exact(owner: str, expected: type, value: Any) -> None:
    """Builders' ``from_params`` take exactly their own params class, not a subclass."""
    if type(value) is not expected:
        raise TypeError(
            f"{owner}.from_params takes an {expected.__name__}; got {type(value).__name__}"
        )


def set_field(obj: Any, name: str, value: Any) -> None:
    """Normalize a field of a frozen dataclass from its ``__post_init__``."""
    object.__setattr__(obj, name, value)
