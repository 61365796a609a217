"""NNSchedulerParamsBuilder: variant-gated construction of NNSchedulerParams (spec §2.4).

Each variant resets the other knobs to the dataclass defaults and writes its
own; ``reduce_on_plateau`` leaves ``kind`` None. The clock survives a variant
change, and ``.clock(...)`` may come before or after the variant.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nnx._foundation.config_base import require_exact
from nnx.enums.schedulers import Schedulers
from nnx.params.scheduler import NNSchedulerParams

__all__ = ["NNSchedulerParamsBuilder"]

_COMMON = ("min_lr", "factor", "patience", "cooldown", "threshold")
_FIELDS = tuple(f.name for f in dataclasses.fields(NNSchedulerParams))


class NNSchedulerParamsBuilder:
    """Fluent, branchable construction of :class:`NNSchedulerParams`."""

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
