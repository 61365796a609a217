"""NNTrainParams: one model, one optimizer, one schedule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import always
from nnx._foundation.validation import check_choice
from nnx.params.loop import LOOP_DECODERS, LoopParams
from nnx.params.optim import NNOptimParams
from nnx.params.optim_factory import NNOptimFactoryParams, OptimConfig, decode_optim
from nnx.params.scheduler import NNSchedulerParams

__all__ = ["RESUME_EPOCHS", "NNTrainParams"]

#: What n_epochs means on a resume (§14.3): more epochs, or the plan's total.
RESUME_EPOCHS = ("additional", "planned")


def _scheduler(value: Any) -> NNSchedulerParams | None:
    return None if value is None else NNSchedulerParams.from_state(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class NNTrainParams(LoopParams):
    """What ``NNModel.train`` runs: epochs, loaders, optimizer, schedule, seed.

    ``scheduler`` defaults to ReduceLROnPlateau with torch's knobs; pass
    ``None`` to train without a schedule.
    """

    optim: OptimConfig = always(factory=NNOptimParams)
    scheduler: NNSchedulerParams | None = always(NNSchedulerParams())
    resume_epochs: str = "additional"

    _DECODERS: ClassVar[Mapping[str, Any]] = {
        **LOOP_DECODERS,
        "optim": decode_optim,
        "scheduler": _scheduler,
    }

    def __post_init__(self) -> None:
        self._validate_loop()
        check_choice("NNTrainParams.resume_epochs", self.resume_epochs, RESUME_EPOCHS)
        if not isinstance(self.optim, (NNOptimParams, NNOptimFactoryParams)):
            raise ValueError(f"NNTrainParams.optim must be an NNOptimParams or "
                             f"NNOptimFactoryParams; got {self.optim!r}")
        if self.scheduler is not None and not isinstance(self.scheduler, NNSchedulerParams):
            raise ValueError(
                f"NNTrainParams.scheduler must be an NNSchedulerParams or None; "
                f"got {self.scheduler!r}"
            )
