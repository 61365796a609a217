"""Nets: ``Nets.FEED_FWD(params=NNParams(...))`` → ``FeedFwdNN``.

Core members are built in. Members implemented by add-ons (``TRANSFORMER`` in
nnx-lm, ``GRAPH_CONV`` in nnx-graph, …) resolve on first access through the
``nnx.nets`` entry-point group, whose entries point at a
:class:`NetRegistration`. One whose distribution is absent names what to install:
``Nets["X"]`` raises :class:`~nnx._foundation.plugins.MissingDistributionError` (an
ImportError), ``Nets.X`` its twin
:class:`~nnx._foundation.plugins.MissingDistributionAttributeError` (an
AttributeError, so ``hasattr(Nets, "X")`` is False), with the same message.

``Nets`` behaves like an enum (``Nets["FEED_FWD"]``, iteration, ``.name``,
identity comparison, pickling by name) but can grow members at runtime, which
``enum.Enum`` cannot.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from torch import nn

from nnx._foundation.plugins import MissingDistributionError, missing, registry

__all__ = ["NetRegistration", "Nets"]

NETS_GROUP = "nnx.nets"


@dataclass(frozen=True)
class NetRegistration:
    """What a ``Nets`` member is: how to build it, and its params class.

    ``compilable``: ``model.train(compile=CompileSpec(...))`` covers the net (spec §28:
    the built-in non-graph nets). The core nets are; an add-on's net declares it here,
    so core names no add-on. Leave it False for a net whose forward takes more than
    the batch's inputs (a graph net's edge index) or that the default step cannot run.
    """

    build: Callable[[Any], nn.Module]
    params_class: type
    compilable: bool = False


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class _NetsMeta(type):
    _members: dict[str, Nets]
    _core: tuple[str, ...]

    def __getattr__(cls, name: str) -> Nets:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return cls._resolve(name)
        except MissingDistributionError as exc:  # hasattr(Nets, name) is then False
            raise exc.attribute_error() from None

    def __getitem__(cls, name: str) -> Nets:
        if not isinstance(name, str):
            raise KeyError(name)
        try:
            return cls._resolve(name)
        except AttributeError:
            raise KeyError(name) from None

    def __iter__(cls) -> Iterator[Nets]:
        """Core members, then every member an installed add-on registers."""
        names = list(cls._core) + sorted(set(registry(NETS_GROUP).names()) - set(cls._core))
        for name in names:
            yield cls._resolve(name)

    def __contains__(cls, item: object) -> bool:
        return isinstance(item, Nets)

    def _resolve(cls, name: str) -> Nets:
        member = cls._members.get(name)
        if member is not None:
            return member
        reg = registry(NETS_GROUP).get(name)
        if reg is None:
            err = missing("net", name, f"Nets.{name}")
            if err is not None:
                raise err
            known = ", ".join(m.name for m in cls)
            raise AttributeError(f"Nets has no member {name!r}; available: {known}")
        if not isinstance(reg, NetRegistration):
            raise TypeError(
                f"the {NETS_GROUP} entry point {name!r} must point at a NetRegistration; "
                f"got {type(reg).__name__}"
            )
        member = Nets(name, registration=reg)
        cls._members[name] = member
        return member


class Nets(metaclass=_NetsMeta):
    """The kinds of network NNx builds from a params value."""

    _nnx_enum_like: ClassVar[bool] = True
    _members: ClassVar[dict[str, Nets]] = {}
    _core: ClassVar[tuple[str, ...]] = ()

    FEED_FWD: ClassVar[Nets]
    CONV: ClassVar[Nets]
    VIT: ClassVar[Nets]
    MOE: ClassVar[Nets]

    __slots__ = ("_paths", "_registration", "name")

    def __init__(
        self,
        name: str,
        *,
        registration: NetRegistration | None = None,
        paths: tuple[str, str] | None = None,
    ) -> None:
        self.name = name
        self._registration = registration
        self._paths = paths

    @property
    def value(self) -> str:
        return self.name.lower()

    @property
    def registration(self) -> NetRegistration:
        if self._registration is None:
            assert self._paths is not None
            build, params = self._paths
            self._registration = NetRegistration(build=_load(build), params_class=_load(params),
                                                 compilable=True)  # every core net (§28)
        return self._registration

    @property
    def params_class(self) -> type:
        """The params class this net is configured with (NNParams or a subclass)."""
        if self._registration is None and self._paths is not None:
            # A core net's params class alone: reading a run.yaml builds no net, and the
            # net modules load torch (``nnx runs show`` runs without it).
            params: type = _load(self._paths[1])
            return params
        return self.registration.params_class

    def __call__(self, params: Any) -> nn.Module:
        """Build the network from its params value."""
        expected = self.params_class
        # Exact class: a ConvNN's params are NNParams too, but would build a wrong FeedFwdNN.
        if type(params) is not expected:
            raise TypeError(
                f"Nets.{self.name} is configured with {expected.__name__}; "
                f"got {type(params).__name__}"
            )
        return self.registration.build(params)

    def __repr__(self) -> str:
        return f"<Nets.{self.name}>"

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_member, (self.name,))


def _member(name: str) -> Nets:
    return Nets[name]


def _core(name: str, build: str, params: str) -> None:
    member = Nets(name, paths=(build, params))
    Nets._members[name] = member
    setattr(Nets, name, member)
    Nets._core = (*Nets._core, name)


_core("FEED_FWD", "nnx.nets.feedforward:FeedFwdNN", "nnx.params.net:NNParams")
_core("CONV", "nnx.nets.conv:ConvNN", "nnx.params.conv:NNConvParams")
_core("VIT", "nnx.nets.vit:ViTNN", "nnx.params.vit:NNViTParams")
_core("MOE", "nnx.nets.moe:MoEFeedFwdNN", "nnx.params.moe:NNMoEParams")
