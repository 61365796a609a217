"""The training state a checkpoint carries (spec §4, §14, §14.1): its keys, what a commit
dumps and the restore steps a stateful resume runs, in order.

This is the one place that spells the sidecar's keys. The epoch commit
(``nnx._engine.epoch_commit``) calls :func:`dump` and :func:`position`; a resume
(``nnx._engine.resume``) checks a saved state through the readers here and restores it
with :func:`restore`, whose steps run in this order: weights, optimizers (with their
schedulers), scaler, counters, components, data streams. Each is a function, so a step
can be read, tested and reordered on its own.

The counters (committed updates, microbatches, each optimizer's updates) are stored once:
in the update engine's component (``nnx.update_engine``, §14.1), which the components
step restores. A sidecar written before that (the counters at the top level, in
``loop`` and in each optimizer's state, with or without the component) still restores
through :func:`restore_counters`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from nnx._contracts.components import ComponentSpec, collect_states, restore_components
from nnx._engine.loop_state import LoopState, loader_generators, param_names
from nnx._engine.optimizer_factories import optimizer_factory_state
from nnx._engine.update_engine import OptimizerSlot
from nnx._foundation.seeding import capture_rng_state, restore_rng_state
from nnx._persistence.point_position import COMPLETED_EPOCH, PLANNED_N_EPOCHS, STOPPED

__all__ = ["UPDATE_COUNTERS", "UpdateCounters", "capture_streams", "dump", "optimizer_state",
           "position", "restore", "saved_slots"]

# -- the keys ------------------------------------------------------------------------------
EPOCH = "epoch"
LOOP_KIND = "loop_kind"  # "model" (NNModel.train) or "trainer" (Trainer.train)
COMPONENTS = "components"
LOOP = "loop"  # the plan's epochs and the best score (and, in the old layout, ITER_IDX)
ITER_IDX = "iter_idx"
PLANNED = PLANNED_N_EPOCHS  # the sidecar's loop block spells it as the position does
BEST_SCORE = "best_score"
LOADERS = "loaders"
SCALER = "scaler"
PRECISION = "precision"
POLICY = "policy"  # inside PRECISION: the resolved policy's name
COMMITTED_UPDATES = "committed_updates"  # the counters' component (old layout: top level)
RNG = "rng"
COMPILE = "compile"
OPTIMIZERS = "optimizers"  # a Trainer's slots by name; NNModel.train's one is inlined
# One optimizer's part.
OPTIMIZER_CLASS = "optimizer_class"
OPTIMIZER_FACTORY = "optimizer_factory"
OPTIMIZER = "optimizer"
PARAM_NAMES = "param_names"
SCHEDULE = "schedule"
UPDATES = "updates"  # old layout only: the count now lives in the counters' component
# The update engine's component, the counters' one home.
UPDATE_COUNTERS = "nnx.update_engine"
OPTIMIZER_UPDATES = "optimizer_updates"
# The manifest's logical position (§4.1: completed_epoch, global_step, committed_updates,
# planned_n_epochs): persistence reads it without the sidecar.
# (COMPLETED_EPOCH, PLANNED_N_EPOCHS, STOPPED, OWES are persistence's spellings.)
GLOBAL_STEP = "global_step"


# -- dump ------------------------------------------------------------------------------------
def capture_streams(state: LoopState) -> dict[str, Any]:
    """The random streams a checkpoint hands over: the RNGs and the loaders' generators."""
    generators = loader_generators(state.train_loader)
    return {LOADERS: {seed: gen.get_state() for seed, gen in generators.items()},
            RNG: capture_rng_state()}


def slot_state(slot: OptimizerSlot, net: torch.nn.Module) -> dict[str, Any]:
    """One optimizer's part of the training state: identity, topology, state, schedule."""
    return {
        OPTIMIZER_CLASS: type(slot.optimizer).__name__,
        OPTIMIZER_FACTORY: optimizer_factory_state(slot.config),
        OPTIMIZER: optimizer_state_dict(slot.optimizer, net),
        PARAM_NAMES: param_names(net, slot.optimizer),
        SCHEDULE: None if slot.schedule is None else slot.schedule.state_dict(),
    }


def optimizer_state_dict(optimizer: torch.optim.Optimizer, net: Any) -> dict[str, Any]:
    """The optimizer's state as a checkpoint holds it. A sharded fit's commit reads the
    model through a full-state view (nnx._engine.fsdp.FullStateNet) that also holds
    each optimizer's gathered full state; any other net's optimizer is read directly."""
    gathered = getattr(net, "optimizer_state", None)
    return optimizer.state_dict() if gathered is None else gathered(optimizer)


def dump(state: LoopState, net: torch.nn.Module, epoch: int,
         streams: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sidecar of a checkpoint of ``epoch``: everything a stateful resume restores.
    ``streams``: :func:`capture_streams` as of the commit (captured now when None)."""
    streams = capture_streams(state) if streams is None else streams
    saved = {
        EPOCH: epoch,
        LOOP_KIND: state.kind,
        COMPONENTS: collect_states(state.components),
        # The counters are the update engine's component's (COMPONENTS), stored once.
        LOOP: {PLANNED: state.end_epoch,
               BEST_SCORE: None if math.isinf(state.best_score) else state.best_score},
        LOADERS: streams[LOADERS],
        SCALER: None if state.scaler is None else state.scaler.state_dict(),
        PRECISION: state.precision.state(),
        RNG: streams[RNG],
    }
    if state.compile is not None:  # the record as of this commit (§28)
        saved[COMPILE] = state.compile.record.state()
    if state.kind == "model":
        saved.update(slot_state(state.primary, net))
    else:
        saved[OPTIMIZERS] = {name: slot_state(slot, net) for name, slot in state.slots.items()}
    return saved


def position(state: LoopState, epoch: int) -> dict[str, Any]:
    """The logical position a point of ``epoch`` records in its manifest (§4.1)."""
    found: dict[str, Any] = {COMPLETED_EPOCH: epoch, GLOBAL_STEP: state.iter_idx,
                             COMMITTED_UPDATES: state.committed_updates,
                             PLANNED: state.end_epoch}
    if state.ctx.should_stop:  # a deliberate end before the plan's (an early stop)
        found[STOPPED] = True
    return found


def compile_record(saved: Mapping[str, Any]) -> Any:
    """The compile record a training state carries (§28), or None."""
    return saved.get(COMPILE)


# -- reading a saved state (the resume's checks) --------------------------------------------
def saved_slots(state: LoopState, saved: Mapping[str, Any]
                ) -> dict[str | None, Mapping[str, Any]]:
    """The saved per-optimizer states of ``saved``, keyed like ``state.slots``: an
    NNModel.train state is its one optimizer's, a Trainer's names each one."""
    if state.kind == "model":
        return {None: saved}
    return dict(saved.get(OPTIMIZERS) or {})


def loop_kind(saved: Mapping[str, Any]) -> str:
    """Which loop wrote ``saved``: a state from before the key existed is NNModel.train's."""
    return str(saved.get(LOOP_KIND, "model"))


def planned_epochs(saved: Mapping[str, Any] | None) -> int | None:
    """The plan's epoch count a state records, or None (weights only, or no plan)."""
    loop = None if saved is None else saved.get(LOOP)
    return None if loop is None else loop.get(PLANNED)


def precision_policy(saved: Mapping[str, Any]) -> str | None:
    """The precision policy's name a state was trained under, or None (not recorded)."""
    policy = saved.get(PRECISION, {}).get(POLICY)
    return None if policy is None else str(policy)


def saved_components(saved: Mapping[str, Any] | None) -> Any:
    """The component states ``saved`` carries; None for a sidecar from before them."""
    return None if saved is None else saved.get(COMPONENTS)


def optimizer_state(saved: Mapping[str, Any], slot: OptimizerSlot,
                    net: torch.nn.Module) -> dict[str, Any]:
    """The saved optimizer state, laid out for ``slot``'s optimizer.

    Before every parameter joined the one group of an optimizer built without
    param_groups (§3.1), that group left out the parameters frozen at build time. A
    checkpoint of that layout (its one group's names an ordered part of today's, every
    name it lacks frozen now) is renumbered onto today's group, so such a run still
    resumes exactly; any other layout is returned unchanged for the checks to judge.
    """
    state: dict[str, Any] = saved[OPTIMIZER]
    names = saved.get(PARAM_NAMES)
    now = param_names(net, slot.optimizer)
    if (getattr(slot.config, "param_groups", None) is not None or names is None
            or len(names) != 1 or len(now) != 1 or len(state["param_groups"]) != 1
            or names == now or len(names[0]) != len(state["param_groups"][0]["params"])):
        return state
    position_of = {name: i for i, name in enumerate(now[0])}
    new = [position_of.get(name, -1) for name in names[0]]
    frozen = {n for n, p in net.named_parameters() if not p.requires_grad}
    if (-1 in new or new != sorted(new)
            or not set(now[0]) - set(names[0]) <= frozen):
        return state
    old = state["param_groups"][0]["params"]
    renumber = dict(zip(old, new, strict=True))
    return {"state": {renumber[k]: v for k, v in state["state"].items()},
            "param_groups": [{**state["param_groups"][0], "params": list(range(len(now[0])))}]}


# -- restore: the steps, in order -----------------------------------------------------------
def restore_weights(net: torch.nn.Module, weights: Mapping[str, Any]) -> None:
    """``net``: the model, or a sharded fit's full-state view of it
    (nnx._engine.fsdp.FullStateNet), which loads the full ``weights`` shard by shard."""
    net.load_state_dict(weights)


def restore_optimizers(state: LoopState, saved: Mapping[str, Any], net: torch.nn.Module
                       ) -> None:
    """Each optimizer's state and its scheduler's."""
    slots = saved_slots(state, saved)
    for name, slot in state.slots.items():
        slot_saved = slots[name]
        saved_state = optimizer_state(slot_saved, slot, net)
        sharded = getattr(net, "load_optimizer_state", None)  # the full-state view's
        if sharded is None:
            slot.optimizer.load_state_dict(saved_state)
        else:
            sharded(slot.optimizer, saved_state)
        if slot.schedule is not None and slot_saved.get(SCHEDULE) is not None:
            slot.schedule.load_state_dict(slot_saved[SCHEDULE])


def restore_scaler(state: LoopState, saved: Mapping[str, Any]) -> None:
    if state.scaler is not None and saved.get(SCALER) is not None:
        state.scaler.load_state_dict(saved[SCALER])


def restore_counters(state: LoopState, saved: Mapping[str, Any]) -> None:
    """The loop's best score; and the counters from a sidecar written without the
    counters' component (before it existed, at the top level, in ``loop`` and in each
    optimizer's state). When the component is there, the components step restores
    them: each counter is restored once."""
    loop = saved.get(LOOP, {})
    best = loop.get(BEST_SCORE)
    state.best_score = math.inf if best is None else float(best)
    if UPDATE_COUNTERS in (saved_components(saved) or {}) and UPDATE_COUNTERS in state.components:
        return
    state.committed_updates = int(saved.get(COMMITTED_UPDATES, 0))
    state.iter_idx = int(loop.get(ITER_IDX, 0))
    slots = saved_slots(state, saved)
    for name, slot in state.slots.items():
        slot.updates = int(slots[name].get(UPDATES, 0))


def restore_streams(state: LoopState, saved: Mapping[str, Any]) -> None:
    """Continue the random streams a training state handed over."""
    generators = loader_generators(state.train_loader)
    for seed, gen_state in (saved.get(LOADERS) or {}).items():
        if int(seed) in generators:
            generators[int(seed)].set_state(gen_state)
    restore_rng_state(saved[RNG])


def restore(state: LoopState, net: torch.nn.Module, weights: Mapping[str, Any],
            saved: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """Restore ``weights`` and, when ``saved`` is a training state, everything else, step
    by step; returns the restored and the fresh component names. The caller rolls back
    on failure (``nnx._engine.resume.apply_resume``)."""
    restore_weights(net, weights)
    if saved is None:
        return [], list(state.components)
    restore_optimizers(state, saved, net)
    restore_scaler(state, saved)
    restore_counters(state, saved)
    restored, fresh = restore_components(state.components, saved_components(saved))
    restore_streams(state, saved)
    return restored, fresh


class UpdateCounters:
    """The committed-update and microbatch counters, checkpointed as ``nnx.update_engine``.

    A stateful resume continues them; a weights_only resume starts them at zero.
    """

    def __init__(self, state: LoopState) -> None:
        self.state = state

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(UPDATE_COUNTERS, 1, required=False)

    def component_state(self) -> dict[str, Any]:
        return {COMMITTED_UPDATES: self.state.committed_updates,
                ITER_IDX: self.state.iter_idx,
                OPTIMIZER_UPDATES: {"" if n is None else n: s.updates
                                    for n, s in self.state.slots.items()}}

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.state.committed_updates = int(state[COMMITTED_UPDATES])
        self.state.iter_idx = int(state[ITER_IDX])
        for name, count in (state.get(OPTIMIZER_UPDATES) or {}).items():
            slot = self.state.slots.get(None if name == "" else name)
            if slot is not None:
                slot.updates = int(count)
