"""What the fit loop checks and builds before its first batch (spec §4.4, §6, §14).

Every check here runs before the run directory is reserved, so a refused call leaves
nothing on disk; :func:`reserve_run` is the reservation itself.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nnx._contracts.components import discover_components
from nnx._engine.loop_state import LoopState, MonitorComponent
from nnx._engine.loop_support import (
    EngineSummary,
    RecordSummary,
    as_callbacks,
    phase_epochs,
)
from nnx._engine.schedule import SchedulerClock
from nnx._engine.training_state import UpdateCounters
from nnx._engine.update_owner import UpdateOwner
from nnx._foundation.atomic import atomic_write_text
from nnx._persistence.reservation import admit_run
from nnx.callbacks.base import Callback, CallbackContext

if TYPE_CHECKING:
    from nnx._contracts.trainable import TrainableModel
    from nnx._engine.process_session import ProcessSession
    from nnx._engine.resume import ResumePlan
    from nnx._engine.update_engine import OptimizerSlot
    from nnx._persistence.run import NNRun

__all__ = ["callback_context", "check_fit_call", "checked_callbacks", "epoch_summary",
           "loop_components", "reserve_run", "run_phases"]


def check_fit_call(owner: Any, params: Any, eval_fn: Any) -> None:
    """The loop's own argument checks, before anything is built."""
    if not isinstance(owner, UpdateOwner):
        raise TypeError(f"the fit loop needs an UpdateOwner (kind, custom_step, component, "
                        f"build, new_run, schedule_params, run_batch); got "
                        f"{type(owner).__name__}")
    if params.train_loader is None:
        raise ValueError(f"{type(params).__name__}.train_loader is required to train")
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError("eval_step_fn must be callable")


def checked_callbacks(callbacks: Sequence[Any], params: Any,
                      model: TrainableModel) -> list[Callback]:
    """The run's callbacks, each having looked at the run and the model."""
    checked = as_callbacks(callbacks)
    for callback in checked:
        callback.check_run(params)
        callback.check_model(model)
    return checked


def check_objective(objective: Any, model: TrainableModel,
                    slots: dict[str | None, OptimizerSlot], callbacks: Sequence[Any]) -> None:
    """An objective's own look at the run (optional ``check_run``)."""
    check_run = getattr(objective, "check_run", None)
    if callable(check_run):
        check_run(model, optimizers={n: s.optimizer for n, s in slots.items()},
                  callbacks=tuple(callbacks))


def callback_context(owner: UpdateOwner, loop: Any, session: ProcessSession) -> CallbackContext:
    """The callbacks' context: the owner's own (the Trainer names its optimizers), else
    the primary optimizer and its torch scheduler (read-only, §14.3: the driver that
    steps it on its clock stays the loop's)."""
    own = getattr(owner, "context", None)
    if callable(own):
        context: CallbackContext = own(loop)
    else:
        slot = loop.primary
        context = CallbackContext(model=loop.model, run=loop.run, optimizer=slot.optimizer,
                                  scheduler=None if slot.schedule is None else
                                  slot.schedule.scheduler)
    context.rank, context.world_size = session.rank, session.world_size
    return context


def loop_components(state: LoopState, owner: UpdateOwner, callbacks: Sequence[Any],
                    components: Sequence[Any]) -> None:
    """Every checkpointed component of the run: the callbacks', the owner's, the loop's
    own (update counters, update-clock schedules, the named monitor) and the caller's."""
    own: list[Any] = [UpdateCounters(state)]
    own += [SchedulerClock(slot.schedule, name) for name, slot in state.slots.items()
            if slot.schedule is not None and slot.schedule.clock == "optimizer_update"]
    if state.tracker is not None:
        own.append(MonitorComponent(state.tracker))
    state.components = discover_components([*callbacks, owner.component, *own], components)


def run_phases(params: Any, resume: ResumePlan | None, start_epoch: int) -> dict[str, int]:
    """Phase epochs: the plan's own on a fresh or planned run, this session's otherwise."""
    if not params.save_phase_checkpoints:
        return {}
    if resume is None or getattr(params, "resume_epochs", "additional") == "planned":
        return phase_epochs(params.n_epochs)
    return {tag: start_epoch + e for tag, e in phase_epochs(params.n_epochs).items()}


def epoch_summary(owner: UpdateOwner, loop: Any, *, declared: bool, engine: Any) -> Any:
    """The whole-epoch training summary's accumulator, when a declaration needs one: the
    owner's own (its step feeds it, §6.4), the engine's, or one over the batch records."""
    begin_epoch = getattr(owner, "begin_epoch", None)
    own = begin_epoch(loop) if callable(begin_epoch) else None
    if own is not None:
        return own
    if not declared:
        return None
    return RecordSummary() if engine is None else EngineSummary(engine)


def reserve_run(run: NNRun, params: Any, locks: contextlib.ExitStack) -> bool:
    """Admit the run (lease → admission → best), then write its first files (True)."""
    path = admit_run(run.root, run.id, overwrite=params.overwrite_existing, locks=locks)
    try:
        atomic_write_text(path / ".history-committed-by-last", "")
        run.save_config()
    except BaseException:
        # Nothing of the run exists yet: release the reservation so it can be retried.
        shutil.rmtree(path, ignore_errors=True)
        raise
    return True
