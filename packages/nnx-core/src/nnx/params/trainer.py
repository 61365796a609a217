"""NNTrainerParams: named optimizers and schedulers for the multi-optimizer Trainer (§8).

:class:`NNTrainerParamsBuilder` is the composite builder behind it (§2.4, §8): setters
mutate and return the same builder; ``.optimizer(name, ...)`` and ``.scheduler(name,
...)`` overwrite in place. Every ``build()`` takes its own read-only snapshot, and
validates that every scheduled name has an optimizer.
"""

from __future__ import annotations

import copy as _copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nnx._foundation.config_base import (
    always,
    empty_mapping,
    frozen_mapping,
    require_exact,
    set_field,
)
from nnx._foundation.validation import check_run_id
from nnx.params.loop import LOOP_DECODERS, LoopParams
from nnx.params.metric import MetricSpec
from nnx.params.monitor import MonitorSpec
from nnx.params.optim import NNOptimParams
from nnx.params.optim_factory import NNOptimFactoryParams, OptimConfig, decode_optim
from nnx.params.scheduler import NNSchedulerParams

__all__ = ["NNTrainerParams", "NNTrainerParamsBuilder"]


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


# Fields carried as plain values (the containers are handled separately).
_SCALARS = tuple(
    f.name
    for f in dataclasses.fields(NNTrainerParams)
    if f.name not in ("optims", "schedulers", "extra_metrics")
)


class NNTrainerParamsBuilder:
    """Fluent, branchable construction of :class:`NNTrainerParams`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._optims: dict[str, OptimConfig] = {}
        self._schedulers: dict[str, NNSchedulerParams] = {}
        self._extra_metrics: dict[str, Callable[..., Any]] = {}

    def _set(self, field: str, value: Any) -> NNTrainerParamsBuilder:
        self._values[field] = value
        return self

    def n_epochs(self, n: int) -> NNTrainerParamsBuilder:
        return self._set("n_epochs", n)

    def train_loader(self, loader: Any) -> NNTrainerParamsBuilder:
        return self._set("train_loader", loader)

    def val_loader(self, loader: Any) -> NNTrainerParamsBuilder:
        return self._set("val_loader", loader)

    def seed(self, seed: int | None) -> NNTrainerParamsBuilder:
        return self._set("seed", seed)

    def data_id(self, data_id: str | None) -> NNTrainerParamsBuilder:
        """Name the data: sibling branches over different data get distinct run ids."""
        return self._set("data_id", data_id)

    def overwrite_existing(self, overwrite: bool = True) -> NNTrainerParamsBuilder:
        return self._set("overwrite_existing", overwrite)

    def save_phase_checkpoints(self, save: bool) -> NNTrainerParamsBuilder:
        return self._set("save_phase_checkpoints", save)

    def auto_step_schedulers(self, auto: bool) -> NNTrainerParamsBuilder:
        """False hands all scheduler timing to the step function (§8.2)."""
        return self._set("auto_step_schedulers", auto)

    def resume_from(
        self, run_id: str, checkpoint: str = "last", mode: str = "auto"
    ) -> NNTrainerParamsBuilder:
        """Warm-resume from ``run_id``'s ``checkpoint`` (§8.4); both must be plain names."""
        check_run_id("NNTrainerParamsBuilder.resume_from run_id", run_id)
        check_run_id("NNTrainerParamsBuilder.resume_from checkpoint", checkpoint,
                     what="checkpoint tag")
        self._values.update(
            resume_from_run_id=run_id, resume_from_checkpoint=checkpoint, resume_mode=mode
        )
        return self

    def optimizer(self, name: str, params: OptimConfig) -> NNTrainerParamsBuilder:
        """Register (or replace) the optimizer ``name`` (built-in or registered factory)."""
        self._optims[name] = params
        return self

    def scheduler(self, name: str, params: NNSchedulerParams) -> NNTrainerParamsBuilder:
        """Register (or replace) the schedule of optimizer ``name``."""
        self._schedulers[name] = params
        return self

    def extra_metrics(self, metrics: Mapping[str, Callable[..., Any]]) -> NNTrainerParamsBuilder:
        """Replace the ``callable(y_true, y_pred)`` metrics (the mapping is copied)."""
        self._extra_metrics = dict(metrics)
        return self

    def metrics(self, specs: Iterable[MetricSpec]) -> NNTrainerParamsBuilder:
        """Replace the declared validation metrics (§6.4); ``build()`` checks them as
        ``NNTrainerParams(metrics=...)`` does. The sequence is copied."""
        # A list or tuple is snapshotted; anything else reaches build() as given,
        # so the refusal is exactly NNTrainerParams' (naming the field).
        return self._set("metrics", tuple(specs) if isinstance(specs, (list, tuple)) else specs)

    def monitor(self, spec: MonitorSpec | None) -> NNTrainerParamsBuilder:
        """The named monitor BEST and plateau scheduling follow (§6.4), or None.

        Checked at ``build()`` against the metrics declared by then, so the two
        setters may come in either order."""
        return self._set("monitor", spec)

    def copy(self) -> NNTrainerParamsBuilder:
        """An independent branch; loaders and params values are shared by identity."""
        twin = _copy.copy(self)
        twin._values = dict(self._values)
        twin._optims = dict(self._optims)
        twin._schedulers = dict(self._schedulers)
        twin._extra_metrics = dict(self._extra_metrics)
        return twin

    @classmethod
    def from_params(cls, params: NNTrainerParams) -> NNTrainerParamsBuilder:
        """A builder pre-loaded so that ``from_params(p).build() == p``."""
        require_exact("NNTrainerParamsBuilder", NNTrainerParams, params)
        builder = cls()
        builder._values = {name: getattr(params, name) for name in _SCALARS}
        builder._optims = dict(params.optims)
        builder._schedulers = dict(params.schedulers)
        builder._extra_metrics = dict(params.extra_metrics)
        return builder

    def build(self) -> NNTrainerParams:
        return NNTrainerParams(
            **self._values,
            optims=self._optims,
            schedulers=self._schedulers,
            extra_metrics=self._extra_metrics,
        )
