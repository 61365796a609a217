"""NNSchedulerParams: the learning-rate schedule, its knobs and its clock (spec §2.4, §2.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, set_field
from nnx._foundation.validation import (
    NON_NEGATIVE,
    OPEN_UNIT,
    POSITIVE,
    check_choice,
    check_count,
    check_enum,
    check_optional_count,
    check_optional_real,
    check_real,
)
from nnx.enums.schedulers import Schedulers

if TYPE_CHECKING:
    from nnx.params.scheduler_builder import NNSchedulerParamsBuilder

__all__ = ["CLOCKS", "NNSchedulerParams"]

#: What one scheduler step counts: a completed epoch, or a committed optimizer update.
CLOCKS = ("epoch", "optimizer_update")


@dataclass(frozen=True, slots=True, kw_only=True)
class NNSchedulerParams(Params):
    """A schedule. ``kind=None`` is ReduceLROnPlateau (the default).

    The plateau knobs (``min_lr``, ``factor``, ``patience``, ``cooldown``,
    ``threshold``) are always recorded; ``factor`` is StepLR's gamma too. The
    budgets (``step_size``, ``T_max``, ``total_steps``, ``warmup_steps``) count
    epochs on the ``"epoch"`` clock and committed updates on
    ``"optimizer_update"``; ``None`` means the planned horizon (for
    ``warmup_steps``: a tenth of it, at least one step, resolved where the
    schedule is built; §14.2).
    """

    kind: Schedulers | None = None
    min_lr: float = always(0.0)
    factor: float = always(0.1)
    patience: int = always(10)
    cooldown: int = always(0)
    threshold: float = always(1e-4)
    step_size: int | None = None
    T_max: int | None = None
    total_steps: int | None = None
    warmup_steps: int | None = None
    max_lr: float | None = None
    clock: str = "epoch"

    _DECODERS: ClassVar[Mapping[str, Any]] = {"kind": enum_decoder(Schedulers)}

    @classmethod
    def builder(cls) -> NNSchedulerParamsBuilder:
        from nnx.params.scheduler_builder import NNSchedulerParamsBuilder

        return NNSchedulerParamsBuilder()

    @property
    def resolved_kind(self) -> Schedulers:
        return Schedulers.REDUCE_LR_ON_PLATEAU if self.kind is None else self.kind

    def __post_init__(self) -> None:
        n = "NNSchedulerParams."
        if self.kind is not None:
            set_field(self, "kind", check_enum(f"{n}kind", self.kind, Schedulers))
        if self.kind is Schedulers.REDUCE_LR_ON_PLATEAU:
            # One spelling for the plateau default, so it hashes like kind=None.
            set_field(self, "kind", None)
        plateau = self.kind is None
        set_field(self, "min_lr", check_real(n + "min_lr", self.min_lr, NON_NEGATIVE))
        set_field(self, "threshold", check_real(n + "threshold", self.threshold, NON_NEGATIVE))
        factor_domain = OPEN_UNIT if plateau else POSITIVE
        set_field(self, "factor", check_real(n + "factor", self.factor, factor_domain))
        set_field(self, "patience", check_count(n + "patience", self.patience, minimum=0))
        set_field(self, "cooldown", check_count(n + "cooldown", self.cooldown, minimum=0))
        for budget in ("step_size", "T_max", "total_steps", "warmup_steps"):
            set_field(self, budget, check_optional_count(
                n + budget, getattr(self, budget), none_means="the planned horizon"))
        set_field(self, "max_lr", check_optional_real(
            n + "max_lr", self.max_lr, POSITIVE, none_means="the optimizer's rate"))
        check_choice(n + "clock", self.clock, CLOCKS)
        if plateau and self.clock != "epoch":
            raise ValueError(
                f"{n}clock: a plateau scheduler reads a monitored metric at the epoch boundary "
                "and cannot run on the 'optimizer_update' clock"
            )
        if self.kind is Schedulers.STEP and self.step_size is None:
            raise ValueError(f"{n}step_size is required for Schedulers.STEP")
        if (
            self.warmup_steps is not None
            and self.total_steps is not None
            and self.warmup_steps > self.total_steps
        ):
            raise ValueError(
                f"{n}warmup_steps ({self.warmup_steps}) must not exceed total_steps "
                f"({self.total_steps})"
            )
