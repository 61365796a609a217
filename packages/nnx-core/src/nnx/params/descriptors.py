"""Model descriptors: what ``NNModelParams.net`` records when it is not a Nets member (§3.2).

A :class:`ModelSpec` names a model factory registered for this process under
``(id, version)`` with its JSON-like config and init seed; a
:class:`RuntimeModule` describes an instance the caller built (its class name
and topology fingerprint). Neither holds code: both round-trip through
run.yaml and checkpoints as plain mappings tagged by ``kind``, and reading
them back needs nothing registered.

They are configuration (what params record), so they live here, below
:mod:`nnx.models`, which resolves, builds and fingerprints them and is their
public path (``nnx.models.ModelSpec``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

from nnx._foundation.config_base import set_field
from nnx._foundation.hashing import canonical_bytes, plain
from nnx._foundation.validation import check_count, check_seed, check_spec_config, check_spec_id

__all__ = ["ModelDescriptor", "ModelSpec", "RuntimeModule", "describe", "descriptor_from_state"]

_NO_CODE = ("register the callable with register_model_factory(id, version, factory) and name "
            "it here by id and version")
_FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")
_FACTORY = re.compile(r"^(?P<id>[^@\s]+)@v(?P<version>[1-9][0-9]*)$")


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A registered model factory: ``ModelSpec("acme.encoder", 1, {"width": 64}, seed=0)``.

    ``config`` is JSON-like data handed read-only to ``factory(config)`` (lists
    arrive as tuples). The factory runs with Python's ``random``, NumPy and
    torch seeded from ``seed`` (an integer in ``[0, 2**32 - 1]``), so one spec
    always initializes the same weights. A callable anywhere is refused: bump
    ``version`` whenever the factory builds something else instead.
    """

    id: str
    version: int
    config: Mapping[str, Any] = field(default_factory=_empty)
    seed: int = 0

    kind: ClassVar[str] = "registered"

    def __post_init__(self) -> None:
        check_spec_id("ModelSpec", self.id, hint=_NO_CODE)
        set_field(self, "version", check_count("ModelSpec.version", self.version))
        set_field(self, "config", check_spec_config("ModelSpec", self.config, hint=_NO_CODE))
        set_field(self, "seed", check_seed("ModelSpec.seed", self.seed))

    @property
    def label(self) -> str:
        """``id@vN``: how runs and errors name this factory."""
        return f"{self.id}@v{self.version}"

    @property
    def name(self) -> str:
        """The short name run listings show in the net column (as for a Nets member)."""
        return self.label

    def state(self) -> dict[str, Any]:
        """``{"kind": "registered", "factory": "id@vN", "config": {...}, "seed": n}``."""
        return {"kind": self.kind, "factory": self.label, "config": plain(self.config),
                "seed": self.seed}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ModelSpec:
        _check_keys(state, cls.kind, required={"factory"}, optional={"config", "seed"})
        found = _FACTORY.match(state["factory"]) if isinstance(state["factory"], str) else None
        if found is None:
            raise ValueError(f"a registered model descriptor's factory must read 'id@vN'; got "
                             f"{state['factory']!r}")
        return cls(found["id"], int(found["version"]), state.get("config", {}),
                   seed=state.get("seed", 0))

    def __hash__(self) -> int:
        return hash(canonical_bytes(self.state()))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Read-only mapping proxies do not pickle; the state rebuilds an equal spec.
        return (ModelSpec.from_state, (self.state(),))


@dataclass(frozen=True, slots=True)
class RuntimeModule:
    """An ``nn.Module`` instance the caller built, described by its topology.

    ``module`` is the class's qualified name (``"pkg.Class"``); ``fingerprint``
    is :func:`nnx.models.topology_fingerprint` of the instance. Nothing can
    rebuild it from artifacts, so ``reconstructible`` is always False.
    :class:`~nnx._surface.model.NNModel` fills it in for ``NNModel(module=...)``.
    """

    module: str
    fingerprint: str
    reconstructible: bool = False

    kind: ClassVar[str] = "runtime"

    def __post_init__(self) -> None:
        if not isinstance(self.module, str) or not self.module.strip():
            raise ValueError(f"RuntimeModule.module must be a class's qualified name; got "
                             f"{self.module!r}")
        if not isinstance(self.fingerprint, str) or not _FINGERPRINT.match(self.fingerprint):
            raise ValueError(f"RuntimeModule.fingerprint must be a SHA-256 hex digest; got "
                             f"{self.fingerprint!r}")
        if self.reconstructible is not False:
            raise ValueError("RuntimeModule.reconstructible is always False: no factory can "
                             "rebuild a runtime module (register one and use a ModelSpec)")

    @property
    def label(self) -> str:
        return self.module

    @property
    def name(self) -> str:
        """The short name run listings show in the net column: the class name."""
        return self.module.rpartition(".")[2]

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind, "module": self.module, "fingerprint": self.fingerprint,
                "reconstructible": False}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RuntimeModule:
        _check_keys(state, cls.kind, required={"module", "fingerprint"},
                    optional={"reconstructible"})
        return cls(state["module"], state["fingerprint"], state.get("reconstructible", False))


#: What ``NNModelParams.net`` holds besides a ``Nets`` member.
ModelDescriptor: TypeAlias = ModelSpec | RuntimeModule

_KINDS: dict[str, type[ModelSpec] | type[RuntimeModule]] = {
    ModelSpec.kind: ModelSpec, RuntimeModule.kind: RuntimeModule}


def _check_keys(state: Mapping[str, Any], kind: str, *, required: set[str],
                optional: set[str]) -> None:
    if not isinstance(state, Mapping) or state.get("kind") != kind:
        raise ValueError(f"not a {kind} model descriptor: {state!r}")
    keys = set(state) - {"kind"}
    missing, unknown = sorted(required - keys), sorted(keys - required - optional)
    if missing or unknown:
        raise ValueError(f"a {kind} model descriptor needs {sorted(required)} (optional "
                         f"{sorted(optional)}); missing {missing}, unknown {unknown}")


def descriptor_from_state(state: Mapping[str, Any]) -> ModelDescriptor:
    """The descriptor a ``{"kind": ...}`` mapping records; builds and resolves nothing."""
    kind = state.get("kind") if isinstance(state, Mapping) else None
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"a model descriptor's kind must be one of {sorted(_KINDS)}; got "
                         f"{kind!r}")
    return cls.from_state(state)


def describe(descriptor: ModelDescriptor) -> str:
    """One line for ``str(run)``: ``acme.encoder@v1 config={...} seed=0`` or
    ``pkg.Class (runtime, reconstructible=False)``."""
    if isinstance(descriptor, ModelSpec):
        config = json.dumps(plain(descriptor.config), sort_keys=True)
        return f"{descriptor.label} config={config} seed={descriptor.seed}"
    if isinstance(descriptor, RuntimeModule):
        return f"{descriptor.module} (runtime, reconstructible=False)"
    raise TypeError(f"describe needs a ModelSpec or RuntimeModule; got "
                    f"{type(descriptor).__name__}")
