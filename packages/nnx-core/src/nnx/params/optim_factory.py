"""Registered optimizer factories as configuration (spec §3.1).

:class:`OptimizerFactorySpec` names a factory registered for this process
under ``(id, version)`` and carries its read-only JSON-like config.
:class:`NNOptimFactoryParams` is the optimizer configuration that uses one; it
shares every field but the optimizer's identity with :class:`NNOptimParams`.
Neither ever holds code, so both round-trip through run.yaml, and reloading a
run needs nothing registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from nnx._foundation.config_base import Params, always, empty_mapping, set_field
from nnx._foundation.hashing import canonical_bytes
from nnx._foundation.validation import check_count, check_spec_config, check_spec_id
from nnx.params.optim import (
    SHARED_OPTIM_DECODERS,
    NNOptimParams,
    NNParamGroupSpec,
    check_shared_optim_fields,
)

__all__ = ["NNOptimFactoryParams", "OptimConfig", "OptimizerFactorySpec", "decode_optim"]

_NO_CODE = ("register the callable with register_optimizer_factory(id, version, factory) "
            "and name it here by id and version")


@dataclass(frozen=True, slots=True)
class OptimizerFactorySpec(Params):
    """A registered optimizer factory: ``OptimizerFactorySpec("acme.lion", 1, {...})``.

    ``config`` is JSON-like data handed read-only to the factory (lists arrive
    as tuples, NumPy scalars as plain numbers). A callable anywhere in it is
    refused: bump ``version`` whenever the factory's behaviour changes instead.
    """

    id: str = always()
    version: int = always()
    config: Mapping[str, Any] = always(factory=empty_mapping)

    def __post_init__(self) -> None:
        check_spec_id("OptimizerFactorySpec", self.id, hint=_NO_CODE)
        set_field(self, "version", check_count("OptimizerFactorySpec.version", self.version))
        set_field(self, "config", check_spec_config("OptimizerFactorySpec", self.config))

    @property
    def label(self) -> str:
        """``id@vN``: how runs and errors name this factory."""
        return f"{self.id}@v{self.version}"

    def __hash__(self) -> int:
        return hash(canonical_bytes(self.state()))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Read-only mapping proxies do not pickle; the state rebuilds an equal spec.
        return (OptimizerFactorySpec.from_state, (self.state(),))


def _spec(value: Any) -> Any:
    return value if isinstance(value, OptimizerFactorySpec) else (
        OptimizerFactorySpec.from_state(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class NNOptimFactoryParams(Params):
    """An optimizer built by a registered factory, with NNx's shared optimizer fields.

    ``max_lr``, ``weight_decay``, ``grad_clip_norm``, ``accumulate_grad_batches``
    and ``param_groups`` mean exactly what they mean on :class:`NNOptimParams`;
    the factory receives the resolved groups. There is no builder.
    """

    factory: OptimizerFactorySpec = always()
    max_lr: float = always()
    weight_decay: float = always(0.0)
    grad_clip_norm: float | None = None
    accumulate_grad_batches: int = 1
    param_groups: tuple[NNParamGroupSpec, ...] | None = None

    _DECODERS: ClassVar[Mapping[str, Any]] = {**SHARED_OPTIM_DECODERS, "factory": _spec}

    def __post_init__(self) -> None:
        if not isinstance(self.factory, OptimizerFactorySpec):
            hint = f"; {_NO_CODE}" if callable(self.factory) else ""
            raise ValueError(
                f"NNOptimFactoryParams.factory must be an OptimizerFactorySpec; "
                f"got {self.factory!r}{hint}"
            )
        check_shared_optim_fields(self)


#: What ``NNTrainParams.optim`` and each ``NNTrainerParams.optims`` value may be.
OptimConfig: TypeAlias = NNOptimParams | NNOptimFactoryParams


def decode_optim(value: Any) -> OptimConfig:
    """An optimizer configuration from state data: a ``factory`` entry marks a registered one."""
    if isinstance(value, (NNOptimParams, NNOptimFactoryParams)):
        return value
    if isinstance(value, Mapping) and "factory" in value:
        return NNOptimFactoryParams.from_state(value)
    return NNOptimParams.from_state(value)
