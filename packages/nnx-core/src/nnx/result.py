"""Errors as values (spec §27): ``Ok``, ``Err``, ``Result``, ``UnwrapError``, ``BoundaryError``.

The public face of :mod:`nnx._foundation.result`; the code lives there (docs/architecture.md).
"""

from nnx._foundation.result import BoundaryError as BoundaryError
from nnx._foundation.result import Err as Err
from nnx._foundation.result import Ok as Ok
from nnx._foundation.result import Result as Result
from nnx._foundation.result import UnwrapError as UnwrapError

__all__ = ["BoundaryError", "Err", "Ok", "Result", "UnwrapError"]
