"""NNTrainerParams: named optimizers and schedulers for the multi-optimizer Trainer (§8)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from nnx._foundation.config_base import always, empty_mapping, frozen_mapping, set_field
from nnx.params.loop import LOOP_DECODERS, LoopParams
from nnx.params.optim import NNOptimParams
from nnx.params.optim_factory import NNOptimFactoryParams, OptimConfig, decode_optim
from nnx.params.scheduler import NNSchedulerParams

if TYPE_CHECKING:
    from nnx.params.trainer_builder import NNTrainerParamsBuilder

__all__ = ["NNTrainerParams"]


def _named(decode_one: Any) -> Any:
    def decode(value: Mapping[str, Any]) -> dict[str, Any]:
        return {k: decode_one(v) for k, v in value.items()}

    return decode


@dataclass(frozen=True, slots=True, kw_only=True)
class NNTrainerParams(LoopParams):
    """The Trainer's configuration.

    ``optims`` and ``schedulers`` are read-only snapshots taken at
    construction: later changes to the dicts passed in (or to a builder) never
    reach a built value. Insertion order is kept for optimizer construction;
    ``state()`` writes sorted keys. Every scheduled name must be an optimizer.
    """

    optims: Mapping[str, OptimConfig] = always(factory=empty_mapping)
    schedulers: Mapping[str, NNSchedulerParams] = field(default_factory=empty_mapping)
    auto_step_schedulers: bool = True

    _DECODERS: ClassVar[Mapping[str, Any]] = {
        **LOOP_DECODERS,
        "optims": _named(decode_optim),
        "schedulers": _named(NNSchedulerParams.from_state),
    }

    @classmethod
    def builder(cls) -> NNTrainerParamsBuilder:
        from nnx.params.trainer_builder import NNTrainerParamsBuilder

        return NNTrainerParamsBuilder()

    def __post_init__(self) -> None:
        self._validate_loop()
        n = "NNTrainerParams."
        kinds: tuple[tuple[str, tuple[type, ...]], ...] = (
            ("optims", (NNOptimParams, NNOptimFactoryParams)),
            ("schedulers", (NNSchedulerParams,)))
        for attr, kind in kinds:
            what = " or ".join(k.__name__ for k in kind)
            value = getattr(self, attr)
            if not isinstance(value, Mapping):
                raise ValueError(f"{n}{attr} must be a mapping of name -> {what}")
            for name, item in value.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"{n}{attr}: names must be non-empty strings; got {name!r}")
                if not isinstance(item, kind):
                    raise ValueError(f"{n}{attr}[{name!r}] must be a {what}; got {item!r}")
            set_field(self, attr, frozen_mapping(value))
        if not self.optims:
            raise ValueError(f"{n}optims must name at least one optimizer")
        orphans = [name for name in self.schedulers if name not in self.optims]
        if orphans:
            one = len(orphans) == 1
            known = ", ".join(map(repr, self.optims))
            raise ValueError(
                f"{n}schedulers: {'scheduler' if one else 'schedulers'} "
                f"{', '.join(map(repr, orphans))} {'names' if one else 'name'} no optimizer; "
                f"the {'optimizer is' if len(self.optims) == 1 else 'optimizers are'} {known}. "
                f"Key each scheduler by its optimizer's name, or add the optimizer with "
                f".optimizer(name, ...)"
            )
        if not isinstance(self.auto_step_schedulers, bool):
            raise ValueError(f"{n}auto_step_schedulers must be a bool")

