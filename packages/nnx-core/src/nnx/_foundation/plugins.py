"""How add-on distributions join nnx: entry-point registries and install hints.

Add-ons never ship ``nnx/__init__.py``; they add ``nnx/<sub>`` directories to
the namespace and announce what they provide through entry-point groups:

``nnx.exports``             top-level names (``from nnx import X``)
``nnx.nets``                ``Nets`` members implemented outside core
``nnx.model_factories``     registered model factories, named ``id@vN``
``nnx.optimizer_factories`` registered optimizer factories, named ``id@vN``
``nnx.metrics``             registered metrics, named ``id@vN``
``nnx.transforms``          topology-transform recipes, named ``id@vN``

Groups are read lazily on the first miss and cached; loading one entry never
imports another. Explicit ``register`` calls win over entry points, and
``unregister`` removes a name from this process whichever way it came.
"""

from __future__ import annotations

import dis
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nnx._foundation.catalog import GROUP_KINDS, distribution_for, distribution_for_subpackage

if TYPE_CHECKING:
    from importlib import metadata

__all__ = [
    "EntryPointRegistry",
    "MissingDistributionAttributeError",
    "MissingDistributionError",
    "MissingSubpackageError",
    "VersionedRegistry",
    "missing",
    "registry",
    "require_distribution",
    "versioned_registry",
]


def _hint(what: str, distribution: str) -> str:
    return (f"{what} is provided by the {distribution} distribution, which is not installed; "
            f"install it with: pip install {distribution}")


class MissingDistributionError(ImportError):
    """A name belongs to an nnx distribution that is not installed (the import form:
    ``from nnx import X``, ``Nets["X"]``, :func:`require_distribution`, reading a
    configuration that names it). Attribute access raises its twin
    :class:`MissingDistributionAttributeError` instead, so ``hasattr`` is False."""

    def __init__(self, what: str, distribution: str) -> None:
        super().__init__(_hint(what, distribution))
        self.what, self.distribution = what, distribution

    def attribute_error(self) -> MissingDistributionAttributeError:
        """The same hint as an AttributeError (for ``nnx.X`` and ``Nets.X``)."""
        return MissingDistributionAttributeError(self.what, self.distribution)


class MissingDistributionAttributeError(AttributeError):
    """The attribute-access form of :class:`MissingDistributionError` (``nnx.X``,
    ``Nets.X``): the same message, ``what`` and ``distribution``, as an AttributeError,
    because ``hasattr`` and ``getattr(obj, name, default)`` only absorb AttributeError.
    One class cannot be both: ImportError and AttributeError have conflicting C layouts."""

    def __init__(self, what: str, distribution: str) -> None:
        super().__init__(_hint(what, distribution))
        self.what, self.distribution = what, distribution


class MissingSubpackageError(MissingDistributionError, ModuleNotFoundError):
    """``import nnx.<sub>`` (or ``from nnx.<sub> import ...``) for a subpackage of an nnx
    distribution that is not installed: a ModuleNotFoundError, as any absent module is,
    with ``name`` set to the subpackage and the one install hint as its message."""

    def __init__(self, module: str, distribution: str) -> None:
        super().__init__(module, distribution)
        self.name = module


def missing_subpackage(module: str) -> MissingSubpackageError | None:
    """The install-hint error for ``import nnx.<sub>`` when no installed distribution
    provides it, or None when nnx does not know the name (a typo stays a plain miss)."""
    dist = distribution_for_subpackage(module)
    return None if dist is None else MissingSubpackageError(module, dist)


_IMPORT_FROM = dis.opmap["IMPORT_FROM"]


def for_module_access(err: MissingDistributionError, depth: int = 2) -> Exception:
    """What a module ``__getattr__`` raises for a missing add-on name: ``err`` itself
    when the frame ``depth`` levels up is executing ``from module import name``, else its
    attribute form.

    ``from m import X`` reports an AttributeError from the module's ``__getattr__`` as a
    bare "cannot import name" and drops the hint, so that statement gets the ImportError;
    every other access (``m.X``, ``hasattr``, ``getattr(m, X, default)``) gets the
    AttributeError. The statement is recognised by its opcode, which CPython keeps in
    the frame (``f_lasti``, a byte offset); anywhere that cannot be read, the
    AttributeError form is the answer, and hasattr stays right.
    """
    try:
        frame = sys._getframe(depth)
        importing = frame.f_lasti >= 0 and frame.f_code.co_code[frame.f_lasti] == _IMPORT_FROM
    except (AttributeError, ValueError, IndexError):
        importing = False
    return err if importing else err.attribute_error()


def missing(kind: str, name: str, what: str) -> MissingDistributionError | None:
    """The install-hint error for a catalogued name, or None if nnx does not know it."""
    dist = distribution_for(kind, name)
    return None if dist is None else MissingDistributionError(what, dist)


def require_distribution(distribution: str, module: str, *,
                         needed_by: str | None = None) -> ModuleType:
    """``module`` imported, or :class:`MissingDistributionError` naming ``pip install
    distribution``: the one way an add-on reaches another it does not require.

    Only the module's own absence (or a parent package's) is the install hint; an
    ImportError from inside an installed module (its own missing dependency) propagates
    unchanged, so a broken install is never reported as an absent one.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise
        what = module if needed_by is None else f"{module} (needed by {needed_by})"
        raise MissingDistributionError(what, distribution) from exc


class EntryPointRegistry:
    """Name → object, from explicit registrations or one entry-point group."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._explicit: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}
        self._points: dict[str, list[metadata.EntryPoint]] | None = None
        # Entry-point names unregistered in this process: hidden until registered again.
        self._hidden: set[str] = set()

    def register(self, name: str, obj: Any) -> None:
        """Register ``obj`` under ``name`` for this process; wins over entry points."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.group}: a registry name must be a non-empty string")
        self._explicit[name] = obj
        self._hidden.discard(name)

    def unregister(self, name: str) -> None:
        """Forget ``name`` for this process, registered explicitly or by an entry point
        (which stays hidden until ``name`` is registered again); KeyError if unknown."""
        if name not in self.names():
            raise KeyError(f"{self.group}: {name!r} is not registered")
        self._explicit.pop(name, None)
        self._loaded.pop(name, None)
        if name in self._entry_points():
            self._hidden.add(name)

    def _entry_points(self) -> dict[str, list[metadata.EntryPoint]]:
        if self._points is None:
            # lazy: importlib.metadata costs a CLI command that never looks a plugin up
            from importlib import metadata

            found: dict[str, list[metadata.EntryPoint]] = {}
            for ep in metadata.entry_points(group=self.group):
                found.setdefault(ep.name, []).append(ep)
            self._points = found
        return self._points

    def get(self, name: str) -> Any | None:
        """The object registered as ``name``, loading its entry point on first use."""
        if name in self._explicit:
            return self._explicit[name]
        if name in self._hidden:
            return None
        if name in self._loaded:
            return self._loaded[name]
        points = self._entry_points().get(name)
        if not points:
            return None
        if len({ep.value for ep in points}) > 1:
            owners = ", ".join(sorted(_owner(ep) for ep in points))
            raise RuntimeError(
                f"entry point {name!r} in group {self.group!r} is registered by more than "
                f"one distribution ({owners}); uninstall all but one"
            )
        obj = points[0].load()
        self._loaded[name] = obj
        return obj

    def names(self) -> set[str]:
        return set(self._explicit) | (set(self._entry_points()) - self._hidden)

    def explicit(self) -> dict[str, Any]:
        """Name → object of what a ``register`` call (not an entry point) put here."""
        return dict(self._explicit)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.names()))

    def refresh(self) -> None:
        """Forget what entry points said (after installing a distribution at runtime)."""
        self._points = None
        self._loaded.clear()


def _owner(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or ep.value


_VERSIONED = re.compile(r"^(?P<id>[^@\s]+)@v(?P<version>[1-9][0-9]*)$")


class VersionedRegistry:
    """``(id, version)`` → object; entry points are named ``id@vN``."""

    def __init__(self, group: str) -> None:
        self._names = EntryPointRegistry(group)
        self.group = group

    @staticmethod
    def key(id: str, version: int) -> str:
        if not isinstance(id, str) or not id or "@" in id or id != id.strip():
            raise ValueError(f"a registered id must be a non-empty string without '@'; got {id!r}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"a registered version must be an integer >= 1; got {version!r}")
        return f"{id}@v{version}"

    @staticmethod
    def split(name: str) -> tuple[str, int] | None:
        """``(id, version)`` of an ``id@vN`` entry name, or None when it is not one."""
        m = _VERSIONED.match(name)
        return None if m is None else (m["id"], int(m["version"]))

    def register(self, id: str, version: int, obj: Any) -> None:
        self._names.register(self.key(id, version), obj)

    def get(self, id: str, version: int) -> Any | None:
        return self._names.get(self.key(id, version))

    def unregister(self, id: str, version: int, *, what: str) -> None:
        """Forget ``(id, version)``; KeyError naming it (and the registered versions of
        ``id``) when nothing is registered there. ``what``: "metric", "model factory"."""
        key = self.key(id, version)
        if key not in self._names.names():
            raise KeyError(f"{what} {key} is not registered in this process "
                           f"({self._known(id)})")
        self._names.unregister(key)

    def registered(self) -> list[tuple[str, int]]:
        """Every ``(id, version)`` registered in this process, sorted; loads nothing."""
        found = (_VERSIONED.match(name) for name in self._names.names())
        return sorted((m["id"], int(m["version"])) for m in found if m)

    def require(self, id: str, version: int, *, what: str, register: str,
                error: type[Exception], accepts: Callable[[Any], bool] = callable,
                expected: str = "a callable") -> Any:
        """The object registered as ``(id, version)``, or ``error`` naming the registered
        versions and how to register (``what``: "model factory"; ``register``: the call).

        An entry that ``accepts`` refuses (an entry point naming the wrong object)
        raises ``error`` too, saying it must be ``expected``.
        """
        found = self.get(id, version)
        if found is None:
            dist = distribution_for(GROUP_KINDS.get(self.group, ""), self.key(id, version))
            if dist is not None:  # an nnx add-on provides it: say what to install
                raise error(f"{what} {id}@v{version} is provided by the {dist} distribution, "
                            f"which is not installed; install it with: pip install {dist} "
                            f"(or register it with {register})")
            raise error(f"{what} {id}@v{version} is not registered in this process "
                        f"({self._known(id)}); register it with {register}")
        if not accepts(found):
            raise error(f"{what} {id}@v{version} resolved to {type(found).__name__}, not "
                        f"{expected}; an {self.group} entry point must name {expected}")
        return found

    def _known(self, id: str) -> str:
        versions = self.versions(id)
        return (f"registered versions of {id!r}: {', '.join(f'v{v}' for v in versions)}"
                if versions else f"no version of {id!r} is registered")

    def versions(self, id: str) -> list[int]:
        """Every version registered for ``id``, for error messages."""
        out = []
        for name in self._names.names():
            m = _VERSIONED.match(name)
            if m and m["id"] == id:
                out.append(int(m["version"]))
        return sorted(out)

    def explicit(self) -> dict[str, Any]:
        """``id@vN`` → object of what a ``register`` call (not an entry point) put here."""
        return self._names.explicit()

    def refresh(self) -> None:
        self._names.refresh()


_REGISTRIES: dict[str, EntryPointRegistry] = {}
_VERSIONED_REGISTRIES: dict[str, VersionedRegistry] = {}


def registry(group: str) -> EntryPointRegistry:
    """The process-wide registry of a plain-named group (``nnx.exports``, ``nnx.nets``)."""
    if group not in _REGISTRIES:
        _REGISTRIES[group] = EntryPointRegistry(group)
    return _REGISTRIES[group]


def versioned_registry(group: str) -> VersionedRegistry:
    """The process-wide registry of an ``id@vN`` group (factories, metrics, transforms)."""
    if group not in _VERSIONED_REGISTRIES:
        _VERSIONED_REGISTRIES[group] = VersionedRegistry(group)
    return _VERSIONED_REGISTRIES[group]
