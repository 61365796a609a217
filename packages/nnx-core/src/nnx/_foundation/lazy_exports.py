"""A package whose public names are imported on first use (issue 38: a fit imports what
it uses).

A package's ``__init__`` keeps one table, ``_EXPORTS`` (name -> the module it is read
from), and calls :func:`lazy_package`; ``from nnx.provenance import compare`` then imports
``nnx.provenance.compare`` only when the name is first read, and the value is cached on
the package. The package lists the same names under ``if TYPE_CHECKING:`` for type
checkers (a test ties that block to the table).

A name may be its own submodule's name (``nnx.provenance.compare``, the function, in the
module of the same name). Importing the submodule binds it on the package under that
name; the package keeps the exported object there instead, as the eager ``__init__``
it replaces did.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import Any

__all__ = ["LazyPackage", "lazy_package"]


class LazyPackage(types.ModuleType):
    """A package module resolving the names of its ``_EXPORTS`` table when first read."""

    def _exports(self) -> Mapping[str, str]:
        table: Mapping[str, str] = self.__dict__.get("_EXPORTS", {})
        return table

    def __getattr__(self, name: str) -> Any:
        module = self._exports().get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        super().__setattr__(name, value)  # cache: later reads skip __getattr__
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system binds a loaded submodule on its package; where the package
        # exports an object of that name from it, the object keeps the name.
        if (isinstance(value, types.ModuleType) and self._exports().get(name) == value.__name__
                and value.__name__ == f"{self.__name__}.{name}" and hasattr(value, name)):
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self._exports()))


def lazy_package(name: str) -> None:
    """Make the package ``name`` (its ``__init__`` running, ``_EXPORTS`` defined) resolve
    its exported names on first use."""
    module = sys.modules[name]
    if not isinstance(module, LazyPackage):
        module.__class__ = LazyPackage
