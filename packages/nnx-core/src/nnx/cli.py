"""The ``nnx`` command line.

The public face of :mod:`nnx._surface.cli`; the code lives there (docs/architecture.md).
"""

from nnx._surface.cli import (
    main as main,
)

__all__ = [
    "main",
]
