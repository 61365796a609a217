"""What one epoch's commit writes, taken from the live training state at the epoch's end.

The training thread builds a :class:`StagedCommit` before the next epoch changes
anything: CPU copies of the weights and of the training state (optimizers, schedules,
scaler, components, random streams), each point's position, the epoch's records (the
history step), and the decisions the loop made (BEST or not, runs/best or not). The
writer (:mod:`nnx._engine.commit_writer`) then writes exactly that, whenever it runs:
nothing it writes is read from the live model again.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from nnx._foundation.records import NNIterationDataPoint
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.optimizer_shards import StagedShards

__all__ = ["HistoryStep", "StagedCommit", "StagedPoint", "staged_copy"]


class HistoryStep(Protocol):
    """The history's part of one commit (``nnx._persistence.run_history``): ``write`` it
    (before LAST), or ``undo`` it when LAST fails."""

    def write(self) -> None: ...
    def undo(self) -> None: ...


@dataclass
class StagedPoint:
    """One resume point of the commit: its checkpoint (weights copied) and position."""

    tag: str
    checkpoint: NNCheckpoint
    position: dict[str, Any]


@dataclass
class StagedCommit:
    """Everything the commit of ``epoch`` writes, in the order it writes it."""

    epoch: int
    idp: NNIterationDataPoint
    history: HistoryStep
    last: StagedPoint
    training_state: dict[str, Any]  # LAST's sidecar; the other points share it
    #: A sharded fit's optimizer state, which the training state marks (LAST's; shared).
    optimizer_shards: StagedShards | None = None
    #: The points written after LAST (FIRST / Qk on their epochs, then BEST).
    after_last: list[StagedPoint] = field(default_factory=list)
    #: runs/best: the score to promote BEST with (None: this commit promotes nothing).
    promote: float | None = None
    #: Whether runs/.best-pending/<id> must be dropped before LAST (a BEST is owed).
    mark_pending: bool = False
    named_monitor: bool = False
    monitor_value: float | None = None


def staged_copy(value: Any) -> Any:
    """A copy of ``value`` that nothing the training does later can change: every tensor
    copied to CPU memory (tensors sharing storage on the CPU keep sharing it, so the
    serialized bytes are those of the live state), every container rebuilt (a dict,
    list or tuple as such; any other object through ``copy.deepcopy``)."""
    return _copy(value, {})


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu":
            return copy.deepcopy(value.detach(), memo)
        return value.detach().to("cpu")
    if type(value) is dict:
        return {key: _copy(item, memo) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item, memo) for item in value]
    if type(value) is tuple:
        return tuple(_copy(item, memo) for item in value)
    if isinstance(value, (str, int, float, bool, type(None), bytes)):
        return value
    return copy.deepcopy(value, memo)
