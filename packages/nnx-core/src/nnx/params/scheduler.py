"""NNSchedulerParams: the learning-rate schedule, its knobs and its clock (spec §2.4, §2.5).

:class:`NNSchedulerParamsBuilder` is its variant-gated builder: each variant resets
the other knobs to the dataclass defaults and writes its own; ``reduce_on_plateau``
leaves ``kind`` None. The clock survives a variant change, and ``.clock(...)`` may
come before or after the variant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, require_exact, set_field
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

__all__ = ["CLOCKS", "NNSchedulerParams", "NNSchedulerParamsBuilder"]

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


_COMMON = ("min_lr", "factor", "patience", "cooldown", "threshold")
_FIELDS = tuple(f.name for f in dataclasses.fields(NNSchedulerParams))


class NNSchedulerParamsBuilder:
    """Fluent, branchable construction of :class:`NNSchedulerParams` (spec §2.4)."""

    def __init__(self) -> None:
        self._fields: dict[str, Any] = {}
        self._clock: str | None = None

    def _variant(self, kind: Schedulers | None, knobs: dict[str, Any], common: dict[str, Any]
                 ) -> NNSchedulerParamsBuilder:
        unknown = sorted(set(common) - set(_COMMON))
        if unknown:
            raise TypeError(
                f"unexpected scheduler knob(s) {', '.join(unknown)}; the shared knobs are "
                f"{', '.join(_COMMON)}"
            )
        self._fields = {"kind": kind, **common, **{k: v for k, v in knobs.items() if v is not None}}
        return self

    def reduce_on_plateau(self, **common: Any) -> NNSchedulerParamsBuilder:
        """ReduceLROnPlateau with min_lr / factor / patience / cooldown / threshold."""
        return self._variant(None, {}, common)

    def step(self, *, step_size: int, **common: Any) -> NNSchedulerParamsBuilder:
        """StepLR: multiply the rate by ``factor`` every ``step_size`` steps."""
        return self._variant(Schedulers.STEP, {"step_size": step_size}, common)

    def cosine_annealing(self, *, T_max: int | None = None, **common: Any
                         ) -> NNSchedulerParamsBuilder:
        """Cosine decay to ``min_lr`` over ``T_max`` steps (default: the planned horizon)."""
        return self._variant(Schedulers.COSINE_ANNEALING, {"T_max": T_max}, common)

    def one_cycle(self, *, max_lr: float | None = None, total_steps: int | None = None,
                  **common: Any) -> NNSchedulerParamsBuilder:
        """OneCycleLR peaking at ``max_lr`` over ``total_steps``."""
        knobs = {"max_lr": max_lr, "total_steps": total_steps}
        return self._variant(Schedulers.ONE_CYCLE, knobs, common)

    def linear_warmup_decay(self, *, warmup_steps: int | None = None,
                            total_steps: int | None = None,
                            **common: Any) -> NNSchedulerParamsBuilder:
        """Linear warm-up over ``warmup_steps``, then linear decay to ``min_lr``.

        ``warmup_steps=None`` warms up over a tenth of the horizon, at least one step
        (see :func:`nnx.enums.schedulers.default_warmup_steps`)."""
        knobs = {"warmup_steps": warmup_steps, "total_steps": total_steps}
        return self._variant(Schedulers.LINEAR_WARMUP_DECAY, knobs, common)

    def clock(self, clock: str) -> NNSchedulerParamsBuilder:
        """What one step counts: ``"epoch"`` (default) or ``"optimizer_update"``."""
        self._clock = clock
        return self

    def copy(self) -> NNSchedulerParamsBuilder:
        twin = NNSchedulerParamsBuilder()
        twin._fields = dict(self._fields)
        twin._clock = self._clock
        return twin

    @classmethod
    def from_params(cls, params: NNSchedulerParams) -> NNSchedulerParamsBuilder:
        """A builder pre-loaded so that ``from_params(p).build() == p``."""
        require_exact("NNSchedulerParamsBuilder", NNSchedulerParams, params)
        builder = cls()
        builder._fields = {f: getattr(params, f) for f in _FIELDS if f != "clock"}
        builder._clock = params.clock
        return builder

    def build(self) -> NNSchedulerParams:
        fields = dict(self._fields)
        if self._clock is not None:
            fields["clock"] = self._clock
        return NNSchedulerParams(**fields)
