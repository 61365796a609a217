"""Resuming a run from a checkpoint (spec §14, §14.2, §14.3).

``plan_resume`` reads and checks everything before the new run is reserved:
the source checkpoint, the mode (``auto`` / ``stateful`` / ``weights_only``),
the epochs to train (``resume_epochs="additional"`` or ``"planned"``), the
schedule's shared horizon, and whether the saved optimizer, precision,
schedule and components fit this run. ``apply_resume`` then restores them
after the reset hooks ran, through the restore steps of ``nnx._engine.training_state``
(the one module that spells the training state's keys); if anything fails, the model
and every RNG stream are put back before the error propagates.

One seam reads a source that is not on disk: :func:`resume_from_memory` makes a
:class:`MemoryResumeSource` (a checkpoint and its training state already in
memory, e.g. a run bundle's, spec §22) the source of any resume, within the
block, whose ``resume_from_run_id`` / ``resume_from_checkpoint`` name it. That
resume reads, verifies, settles and locks nothing under the runs root, and its
provenance parent is the source's own record.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nnx._contracts.components import ComponentRestoreError, check_components
from nnx._engine import training_state
from nnx._engine.loop_state import LoopState, param_names
from nnx._engine.optimizer_factories import optimizer_factory_state
from nnx._engine.update_engine import OptimizerSlot
from nnx._foundation.seeding import capture_rng_state, restore_rng_state
from nnx._persistence.checkpoint import NNCheckpoint, checkpoint_path
from nnx._persistence.point_manifest import ResumePointError
from nnx._persistence.point_verify import verify_point
from nnx._persistence.resume_status import ResumeStatus
from nnx.enums.schedulers import Schedulers

__all__ = ["MemoryResumeSource", "ResumePlan", "ResumeStatus", "apply_resume", "check_resume",
           "plan_resume", "resume_from_memory"]


@dataclass
class ResumePlan:
    checkpoint: NNCheckpoint
    training_state: dict[str, Any] | None
    mode: str  # "stateful" or "weights_only"
    start_epoch: int
    end_epoch: int  # exclusive
    status: ResumeStatus
    #: The provenance parent when the source is not a run on disk (a memory source).
    parent: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MemoryResumeSource:
    """A resume source held in memory: the run and checkpoint tag a resume names, the
    checkpoint (weights, configuration, transforms) and its training state (None for
    weights only), and the provenance parent the resumed attempt links."""

    run_id: str
    tag: str
    checkpoint: NNCheckpoint
    training_state: dict[str, Any] | None
    parent: Mapping[str, Any] = field(default_factory=dict)


_MEMORY: contextvars.ContextVar[MemoryResumeSource | None] = contextvars.ContextVar(
    "nnx_memory_resume_source", default=None)


@contextlib.contextmanager
def resume_from_memory(source: MemoryResumeSource) -> Iterator[None]:
    """Within the block, a resume naming ``source.run_id`` / ``source.tag`` reads
    ``source`` instead of the runs root."""
    token = _MEMORY.set(source)
    try:
        yield
    finally:
        _MEMORY.reset(token)


_BOUNDED = (Schedulers.ONE_CYCLE, Schedulers.LINEAR_WARMUP_DECAY)


def _check_horizon(params: Any, schedule: Any) -> None:
    """A stateful resume of a bounded schedule needs one explicit, shared horizon."""
    if params.resume_mode == "weights_only":
        return
    if schedule.resolved_kind in _BOUNDED and schedule.total_steps is None:
        raise ValueError(
            f"resuming a {schedule.resolved_kind.name} schedule needs an explicit total_steps "
            "covering the original and the resumed epochs (or resume_mode='weights_only')")
    if (schedule.resolved_kind is Schedulers.LINEAR_WARMUP_DECAY and schedule.clock == "epoch"
            and schedule.warmup_steps is None and params.resume_epochs != "planned"):
        raise ValueError("resuming an epoch-clock warm-up schedule needs an explicit "
                         "warmup_steps unless resume_epochs='planned'")


def plan_resume(params: Any, root: Path, schedules: Sequence[Any]) -> ResumePlan | None:
    """Read and check the resume request; None when the run starts fresh. ``schedules``
    are the run's NNSchedulerParams (their budgets must be resumable)."""
    # A Trainer always resumes "additional" (§14.3): it has no resume_epochs.
    planned = getattr(params, "resume_epochs", "additional") == "planned"
    if params.resume_from_run_id is None:
        if planned:
            raise ValueError("resume_epochs='planned' needs a resume (resume_from_run_id)")
        return None
    for schedule in schedules:
        _check_horizon(params, schedule)
    source, tag = params.resume_from_run_id, params.resume_from_checkpoint or "last"
    memory = _MEMORY.get()
    if memory is not None and (memory.run_id, memory.tag) == (source, tag):
        return _plan(params, memory.checkpoint, memory.training_state, source, tag, planned,
                     parent=dict(memory.parent))
    # On first use: a fit that starts fresh reads no source run (issue 38).
    from nnx._persistence.resume_source import check_resume_source, require_source_run

    # "best": the run runs/best names now, by name. A source that does not exist is
    # refused before the clean-up below takes its lease (no lock file of it is left).
    run = require_source_run(root, source)
    # The source's history must hold what its LAST commits (nnx._persistence.resume_source):
    # a damaged source is refused before anything, the clean-up included, touches it.
    check_resume_source(root, run)
    settle_source(root, run)
    path = checkpoint_path(run, tag, root=root)  # a ModelCheckpoint .safetensors tag too
    if not path.is_file():
        raise FileNotFoundError(f"cannot resume: run {source} has no {tag!r} checkpoint "
                                f"({path.as_posix()})")
    # Torn, mixed or corrupted points are refused before anything is read; root=: no
    # symbolic link below the runs root is followed.
    verify_point(path, root=root)

    checkpoint = NNCheckpoint.from_file(path)
    return _plan(params, checkpoint, checkpoint.training_state(), source, tag, planned)


def _plan(params: Any, checkpoint: NNCheckpoint, state: dict[str, Any] | None, source: str,
          tag: str, planned: bool, *, parent: Mapping[str, Any] | None = None) -> ResumePlan:
    """The mode and epochs of a resume from ``checkpoint`` (read from disk or memory)."""
    mode = params.resume_mode
    if mode == "stateful" and state is None:
        raise ValueError(f"resume_mode='stateful' needs training state, but {tag!r} of run "
                         f"{source} holds weights only")
    if mode == "auto":
        mode = "stateful" if state is not None else "weights_only"
        if state is None:
            warnings.warn(f"checkpoint {tag!r} of run {source} holds weights only: the "
                          "optimizer, schedule, scaler and RNG start fresh", RuntimeWarning,
                          stacklevel=4)
    if mode == "weights_only":
        state = None
    start = checkpoint.epoch + 1
    if planned:
        saved_plan = training_state.planned_epochs(state)
        if state is None:
            raise ValueError("resume_epochs='planned' needs a stateful resume")
        if saved_plan is None:
            raise ValueError("resume_epochs='planned': the checkpoint records no plan")
        if saved_plan != params.n_epochs:
            raise ValueError(f"resume_epochs='planned': the source planned "
                             f"{saved_plan} epochs, this run {params.n_epochs}")
        if start >= params.n_epochs:
            raise ValueError(f"resume_epochs='planned': the source already finished its plan of "
                             f"{params.n_epochs} epochs")
    end = params.n_epochs if planned else start + params.n_epochs
    status = ResumeStatus(mode=mode, source_run=source, source_checkpoint=tag,
                          source_epoch=checkpoint.epoch, source_generation=checkpoint.generation,
                          source_checkpoint_id=checkpoint.checkpoint_id)
    return ResumePlan(checkpoint, state, mode, start, end, status, parent=parent)


def settle_source(root: Path, source: str) -> None:
    """Finish the source's epoch commit a crash cut short before anything of it is read:
    the points its LAST owes (BEST, FIRST / Qk of that epoch) and their runs/best
    hand-over (:mod:`nnx._persistence.owed_points`), then remove the temps its killed
    writers stranded (:mod:`nnx._persistence.leftovers`). Both are what the source's own
    uninterrupted run would have left: no data of the resume's. A source trained by a
    live process, or whose LAST does not verify (refused right after, by name), is left
    as it is."""
    # On first use: a fit that starts fresh settles no source run (issue 38).
    from nnx._persistence.leftovers import remove_leftovers
    from nnx._persistence.owed_points import OwedPointsBusy, settle_owed

    try:
        written = settle_owed(root, source)
        remove_leftovers(root, source)  # what its killed writers stranded (None: it is live)
    except (OwedPointsBusy, ResumePointError, ValueError, OSError):
        return  # the checks below report a source that cannot be read
    if written:
        warnings.warn(f"run {source}: its last epoch's commit was cut short; wrote the "
                      f"{', '.join(written)} point(s) it owed from its LAST", RuntimeWarning,
                      stacklevel=4)


def check_resume(plan: ResumePlan, state: LoopState, net: torch.nn.Module) -> None:
    """Refuse a checkpoint that does not fit this run (``state``, training ``net``),
    before anything is reserved."""
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    shapes_saved = {k: tuple(v.shape) for k, v in plan.checkpoint.state_dict.items()}
    if expected != shapes_saved:
        missing = sorted(set(expected) - set(shapes_saved))[:5]
        extra = sorted(set(shapes_saved) - set(expected))[:5]
        shapes = sorted(k for k in set(expected) & set(shapes_saved)
                        if expected[k] != shapes_saved[k])[:5]
        raise ValueError(f"the checkpoint's weights do not fit this net (missing {missing}, "
                         f"unexpected {extra}, other shapes {shapes})")
    saved_transforms = [dict(t) for t in plan.checkpoint.transforms]
    if saved_transforms != [dict(t) for t in state.transforms]:
        raise ValueError(f"the checkpoint was trained with the transform recipes "
                         f"{saved_transforms}, this model has materialized "
                         f"{list(state.transforms)}: materialize the same recipes before "
                         "resuming")
    saved = plan.training_state
    if saved is None:
        return
    _check_loop_kind(saved, state.kind)
    problems = []
    saved_slots = training_state.saved_slots(state, saved)
    if set(saved_slots) != set(state.slots):
        problems.append(f"optimizer names: saved {sorted(map(str, saved_slots))}, now "
                        f"{sorted(map(str, state.slots))}")
    for name, slot in state.slots.items():
        if name in saved_slots:
            problems += _slot_problems(saved_slots[name], slot, net,
                                       plan.end_epoch - plan.start_epoch)
    saved_precision = training_state.precision_policy(saved)
    if saved_precision is not None and saved_precision != state.precision.policy.name:
        problems.append(f"precision: saved {saved_precision}, now {state.precision.policy.name} "
                        "(a weights_only resume may switch)")
    saved_components = training_state.saved_components(saved)
    problems += check_components(state.components, saved_components)
    clocked = [slot for slot in state.slots.values()
               if slot.schedule is not None and slot.schedule.clock == "optimizer_update"]
    if clocked and saved_components is None:
        problems.append("the checkpoint carries no component state, so its scheduler position "
                        "counts epochs: an optimizer_update-clock schedule cannot continue it "
                        "(resume_mode='weights_only' starts the schedule fresh)")
    if problems:
        raise ComponentRestoreError(problems)
    _warn_worker_streams(state.train_loader)


def _warn_worker_streams(loader: Any) -> None:
    """An exact resume restores the in-process streams only (§4.2): worker-local RNG
    state is outside what a checkpoint holds, so say so for a loader that has workers."""
    if not isinstance(loader, torch.utils.data.DataLoader):
        return  # a list of batches or another source runs in process
    workers = getattr(loader, "num_workers", 0)  # read safely: absent means none
    if isinstance(workers, int) and not isinstance(workers, bool) and workers > 0:
        warnings.warn(f"this stateful resume reads a DataLoader with num_workers={workers}: "
                      "worker-local random state is not checkpointed, so the run may not "
                      "continue bit for bit (exact continuation needs num_workers=0)",
                      RuntimeWarning, stacklevel=4)


def _check_loop_kind(state: Mapping[str, Any], kind: str) -> None:
    """A checkpoint resumes statefully only through the loop that wrote it (§8.4)."""
    saved = training_state.loop_kind(state)
    if saved == kind:
        return
    writer, reader = ("Trainer.train", "NNModel.train") if saved == "trainer" else (
        "NNModel.train", "Trainer.train")
    raise ValueError(f"this checkpoint was written by {writer} and resumes statefully only "
                     f"through {writer}, not {reader}; pass resume_mode='weights_only' to "
                     "warm-start from its weights alone")


def _slot_problems(saved: Mapping[str, Any], slot: OptimizerSlot, net: torch.nn.Module,
                   epochs: int) -> list[str]:
    label = "optimizer" if slot.name is None else f"optimizer {slot.name!r}"
    names_key = training_state.PARAM_NAMES
    problems = []
    optimizer_class = saved.get(training_state.OPTIMIZER_CLASS)
    if optimizer_class is not None and optimizer_class != type(slot.optimizer).__name__:
        problems.append(f"{label}: saved {optimizer_class}, now {type(slot.optimizer).__name__}")
    factory = optimizer_factory_state(slot.config)
    saved_factory = saved.get(training_state.OPTIMIZER_FACTORY)
    if saved_factory != factory:  # built-in ↔ factory, or id/version/config
        problems.append(f"{label} factory: saved {_factory(saved_factory)}, "
                        f"now {_factory(factory)}")
    laid_out = training_state.optimizer_state(saved, slot, net)
    groups = laid_out["param_groups"]
    if [len(g["params"]) for g in groups] != [len(g["params"]) for g in
                                              slot.optimizer.param_groups]:
        problems.append(f"{label}: the parameter groups differ in number or size")
    elif (saved.get(names_key) is not None and laid_out is saved[training_state.OPTIMIZER]
          and saved[names_key] != param_names(net, slot.optimizer)):
        problems.append(f"{label}: the ordered named-parameter topology differs")
    problems += _schedule_problems(saved.get(training_state.SCHEDULE), slot.schedule, label,
                                   epochs)
    return problems


def _factory(identity: Mapping[str, Any] | None) -> str:
    if identity is None:
        return "a built-in optimizer"
    return f"{identity.get('id')}@v{identity.get('version')} config {identity.get('config')!r}"


def _schedule_problems(saved: Mapping[str, Any] | None, schedule: Any,
                       label: str, epochs: int) -> list[str]:
    if (saved is None) != (schedule is None):
        # Say which side has one, so the fix (add or drop the scheduler) is plain.
        if saved is None:
            return [f"{label} schedule: the checkpoint has no schedule and this run has one "
                    f"({schedule.kind.name}); resume without a scheduler, or pass "
                    "resume_mode='weights_only' to start the schedule fresh"]
        kind = saved.get("kind")
        return [f"{label} schedule: the checkpoint has a schedule"
                f"{'' if kind is None else f' ({kind})'} and this run has none; resume with "
                "the same scheduler, or pass resume_mode='weights_only'"]
    if saved is None or schedule is None:
        return []
    problems = []
    if saved.get("kind") not in (None, schedule.kind.name):
        problems.append(f"{label} schedule: saved {saved.get('kind')}, now {schedule.kind.name}")
    if saved.get("clock") != schedule.clock:
        problems.append(f"{label} schedule clock: saved {saved.get('clock')}, now {schedule.clock}")
    if schedule.is_plateau:
        now = schedule.scheduler
        before = saved["scheduler"]
        for key in ("mode", "threshold_mode", "threshold"):
            if before.get(key) != getattr(now, key):
                problems.append(f"{label} plateau {key}: saved {before.get(key)!r}, now "
                                f"{getattr(now, key)!r} (resume with the original monitor and "
                                "threshold, or resume_mode='weights_only')")
    elif schedule.clock != "epoch" and saved.get("horizon") != schedule.horizon:
        pass  # an update clock's budget is its nnx.scheduler_clock component's to check
    elif schedule.kind in _BOUNDED and saved.get("horizon") != schedule.horizon:
        problems.append(f"{label} schedule total_steps: saved {saved.get('horizon')}, now "
                        f"{schedule.horizon}")
    elif schedule.explicit_budget and saved.get("horizon") != schedule.horizon:
        # Loading the saved state would silently keep the old period (a cosine's T_max,
        # a step schedule's step_size): a mismatched budget is refused (§2.5).
        budget = "T_max" if schedule.kind is Schedulers.COSINE_ANNEALING else "step_size"
        problems.append(f"{label} schedule {budget}: saved {saved.get('horizon')}, now "
                        f"{schedule.horizon} (a stateful resume keeps the checkpoint's "
                        f"period: omit {budget} or set it to {saved.get('horizon')}, or "
                        "resume_mode='weights_only')")
    elif schedule.kind in _BOUNDED:
        # The resumed epochs must fit the one horizon (§2.5, §8.4): refuse now rather than
        # stop mid-run. Unknowable when a custom step owns an update clock's updates.
        unit = 1 if schedule.clock == "epoch" else schedule.updates_per_epoch
        taken = saved.get("steps")
        if unit is not None and taken is not None and taken + epochs * unit > schedule.horizon:
            problems.append(f"{label} schedule total_steps ({schedule.horizon}) does not cover "
                            f"the resumed run: {taken} {schedule.clock} step(s) taken + "
                            f"{epochs * unit} planned = {taken + epochs * unit}")
    return problems


def apply_resume(plan: ResumePlan, state: LoopState, net: torch.nn.Module,
                 view: Any = None) -> None:
    """Restore ``net``'s weights and, when stateful, everything else ``state`` holds
    (:func:`training_state.restore`); roll the weights and every RNG stream back on
    failure. ``view``: what the checkpoint's full state is loaded through (the session's
    :meth:`~nnx._engine.process_session.ProcessSession.persisted`; ``net`` itself unless
    the net is sharded)."""
    model_before = {k: v.detach().clone() for k, v in net.state_dict().items()}
    rng_before = capture_rng_state()
    try:
        restored, fresh = training_state.restore(state, net if view is None else view,
                                                 plan.checkpoint.state_dict,
                                                 plan.training_state)
    except BaseException:
        net.load_state_dict(model_before)
        restore_rng_state(rng_before)
        raise
    if plan.training_state is not None:
        plan.status.restored_components = restored
    plan.status.fresh_components = fresh
