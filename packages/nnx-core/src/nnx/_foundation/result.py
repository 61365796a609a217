"""Errors as values (spec §27): ``Ok`` / ``Err``, an opt-in alternative to raising.

Every NNx API keeps raising; these types are for callers who would rather
branch on a value. Two frozen classes instead of one class with a flag, so
``isinstance(result, Ok)`` and ``match`` narrow ``Result[T, E]`` with a plain
type checker on Python 3.10 (no plugin, no extra package).

Nothing is caught on the caller's behalf: a callback's exception, a
``KeyboardInterrupt`` or a cancellation propagates unchanged. Which exceptions
become an ``Err`` is decided by the boundary wrappers alone, each converting
exactly the exceptions it declares into a :class:`BoundaryError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, NoReturn, TypeAlias, TypeVar

__all__ = ["BoundaryError", "Err", "Ok", "Result", "UnwrapError"]

T = TypeVar("T")
E = TypeVar("E")
U = TypeVar("U")
F = TypeVar("F")

_NO_TRUTH = ("a Result has no truth value (Ok(0), Ok(None) and Ok(False) are successes); "
             "test isinstance(result, Ok), match on it, or read result.is_ok")


def _flattened(method: str, produced: object) -> Result[Any, Any]:
    # bind / recover flatten exactly one Result; anything else is the callback's bug.
    if not isinstance(produced, (Ok, Err)):
        raise TypeError(f"the callback passed to {method}() must return Ok(...) or Err(...), "
                        f"got {type(produced).__name__}")
    return produced


class UnwrapError(Exception):
    """``Err(error).unwrap()``: carries the typed ``error``; chained to it when it is an
    exception, and to a :class:`BoundaryError`'s ``cause``."""

    def __init__(self, error: object) -> None:
        super().__init__(f"unwrap() on Err({error!r})")
        self.error = error


@dataclass(frozen=True, slots=True)
class Ok(Generic[T]):
    """A success holding ``value`` (any value, ``None`` / ``0`` / ``False`` included)."""

    value: T

    @property
    def is_ok(self) -> Literal[True]:
        return True

    @property
    def is_err(self) -> Literal[False]:
        return False

    def __bool__(self) -> NoReturn:
        raise TypeError(_NO_TRUTH)

    def map(self, fn: Callable[[T], U]) -> Ok[U]:
        return Ok(fn(self.value))

    def map_error(self, fn: Callable[[Any], object]) -> Ok[T]:
        return self

    def bind(self, fn: Callable[[T], Result[U, F]]) -> Result[U, F]:
        return _flattened("bind", fn(self.value))

    def recover(self, fn: Callable[[Any], object]) -> Ok[T]:
        return self

    def unwrap(self) -> T:
        return self.value


@dataclass(frozen=True, slots=True)
class Err(Generic[E]):
    """A failure holding the typed ``error``."""

    error: E

    @property
    def is_ok(self) -> Literal[False]:
        return False

    @property
    def is_err(self) -> Literal[True]:
        return True

    def __bool__(self) -> NoReturn:
        raise TypeError(_NO_TRUTH)

    def map(self, fn: Callable[[Any], object]) -> Err[E]:
        return self

    def map_error(self, fn: Callable[[E], F]) -> Err[F]:
        return Err(fn(self.error))

    def bind(self, fn: Callable[[Any], object]) -> Err[E]:
        return self

    def recover(self, fn: Callable[[E], Result[U, F]]) -> Result[U, F]:
        return _flattened("recover", fn(self.error))

    def unwrap(self) -> NoReturn:
        # The traceback shows what went wrong: the exception, or a BoundaryError's cause.
        error: object = self.error
        cause: BaseException | None = None
        if isinstance(error, BaseException):
            cause = error
        elif isinstance(error, BoundaryError):
            cause = error.cause
        raise UnwrapError(error) from cause


#: ``Result[T, E]`` is ``Ok[T] | Err[E]`` (a generic alias: ``Result[int, str]``).
Result: TypeAlias = Ok[T] | Err[E]


@dataclass(frozen=True)
class BoundaryError:
    """Why a boundary wrapper returned ``Err``: a stable ``code`` (``"artifact_missing"``),
    ``where`` (the wrapper), read-only ``context`` and the converted exception ``cause``."""

    code: str
    where: str
    context: Mapping[str, Any] = field(default_factory=dict)
    cause: BaseException | None = None

    def __post_init__(self) -> None:
        for name in ("code", "where"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TypeError(f"BoundaryError.{name} must be a non-empty str, got {value!r}")
        if not isinstance(self.context, Mapping):
            raise TypeError(f"BoundaryError.context must be a mapping, "
                            f"got {type(self.context).__name__}")
        if self.cause is not None and not isinstance(self.cause, BaseException):
            raise TypeError(f"BoundaryError.cause must be an exception or None, "
                            f"got {type(self.cause).__name__}")
        # A copy behind a read-only view: the caller's later edits never reach the error.
        object.__setattr__(self, "context", MappingProxyType(dict(self.context)))

    def __str__(self) -> str:
        detail = f": {self.cause}" if self.cause is not None else ""
        return f"{self.code} in {self.where}{detail}"
