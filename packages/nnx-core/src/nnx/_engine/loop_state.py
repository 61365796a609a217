"""The loop's mutable training state (spec §4, §14): what the epoch commit writes and
what a resume restores.

``FitLoop`` owns one :class:`LoopState`; the commit (``nnx._engine.epoch_commit``)
and resume (``nnx._engine.resume``) receive it instead of the loop, so neither
reaches into the loop's attributes; what a checkpoint holds of it, and how it is
restored, is ``nnx._engine.training_state``'s. Positions and counters live here; the
optimizer slots, the FP16 scaler, the precision and the components are the
objects the loop built, referenced, not copied. The public counters and stop
flags (``committed_updates``, ``should_stop``, ``stop_at_update``) stay on the
callbacks' context, which callbacks and the update engine write: the state
refers to that one copy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from nnx._contracts.components import ComponentSpec
from nnx._contracts.monitors import MonitorTracker
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.update_engine import OptimizerSlot
from nnx._foundation.records import NNIterationDataPoint
from nnx.callbacks.base import CallbackContext

__all__ = ["LastCommit", "LoopState", "MonitorComponent", "loader_generators", "param_names",
           "primary_slot"]


def primary_slot(slots: Mapping[str | None, OptimizerSlot]) -> OptimizerSlot:
    """The primary optimizer: the only one, or the sorted-first name (§8.3)."""
    return slots[min(slots, key=lambda n: "" if n is None else n)]


def param_names(net: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[list[str]]:
    """The optimizer's ordered named-parameter topology, one list per param group."""
    names = {id(p): n for n, p in net.named_parameters()}
    return [[names.get(id(p), "?") for p in g["params"]] for g in optimizer.param_groups]


def loader_generators(loader: Any) -> dict[int, torch.Generator]:
    """The torch Generators a loader draws from, keyed by their stable seed."""
    found = {}
    for owner in (loader, getattr(loader, "sampler", None),
                  getattr(getattr(loader, "batch_sampler", None), "sampler", None)):
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator):
            found[gen.initial_seed()] = gen
    return found


@dataclass(frozen=True)
class LastCommit:
    """The epoch LAST last committed, kept for the final LAST refresh: its record, its
    random streams and, on the run's last epoch, a fingerprint of what LAST holds."""

    epoch: int
    idp: NNIterationDataPoint
    streams: dict[str, Any]
    fingerprint: Any


@dataclass(eq=False)
class LoopState:
    """What one training run has done so far and what it trains with."""

    kind: str  # "model" (NNModel.train) or "trainer" (Trainer.train): who may resume it
    ctx: CallbackContext
    slots: dict[str | None, OptimizerSlot]
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    train_loader: Any  # its generators are part of the random streams
    tracker: MonitorTracker | None = None  # the named monitor's best value, when declared
    transforms: tuple[dict[str, Any], ...] = ()
    compile: Any = None  # the fit's CompileSession under train(compile=...), else None
    components: dict[str, tuple[ComponentSpec, Any]] = field(default_factory=dict)
    start_epoch: int = 0
    end_epoch: int = 0  # exclusive: the plan's last epoch + 1
    iter_idx: int = 0  # microbatches trained over the run's whole lineage
    best_score: float = math.inf  # the unnamed signal's best (no monitor declared)
    updates_this_epoch: int = 0
    epoch_complete: bool = False  # the loader ran out: the epoch may commit
    partial_stop: bool = False  # stopped inside an epoch: no final LAST refresh
    commit_started: bool = False  # a commit of this run began: its directory stays
    last_commit: LastCommit | None = None

    @property
    def committed_updates(self) -> int:
        return self.ctx.committed_updates

    @committed_updates.setter
    def committed_updates(self, value: int) -> None:
        self.ctx.committed_updates = value

    @property
    def primary(self) -> OptimizerSlot:
        return primary_slot(self.slots)


class MonitorComponent:
    """The named monitor's best value, checkpointed as ``nnx.monitor`` (§6.4)."""

    def __init__(self, tracker: MonitorTracker) -> None:
        self.tracker = tracker

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("nnx.monitor", 1, required=True)

    def component_state(self) -> dict[str, Any]:
        state: dict[str, Any] = self.tracker.state_dict()
        return state

    def check_component_state(self, state: dict[str, Any], *, version: int) -> list[str]:
        mine = self.tracker.state_dict()
        return [f"monitor {key}: saved {state.get(key)!r}, now {mine[key]!r}"
                for key in ("metric", "split", "direction") if state.get(key) != mine[key]]

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.tracker.load_state_dict(state)
