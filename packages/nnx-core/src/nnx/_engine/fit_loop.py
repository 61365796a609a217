"""The epoch loop both NNModel.train and Trainer.train run (spec §1 layer 5, §4, §5, §6).

Order of business: every check and every build (optimizers, schedules,
precision, metrics) happens before the run directory is reserved, so a
refused call leaves nothing on disk. Then, per epoch: batches through the
update owner (a step function or the shared update engine) in accumulation
windows, validation, the control signal, the epoch-clock schedules, the
``on_epoch_end`` callbacks, and the commit (history → LAST → FIRST/Q1–Q3 →
BEST → runs/best → what the callbacks deferred). The callbacks run before the
commit so the committed epoch holds what they changed; after ``on_train_end``
a successful run writes LAST once more (same epoch, new generation). A run
that fails before its first commit releases its reservation.

The loop is one class, never subclassed: what differs between the two entry
points (how the optimizers are built, how one batch of a step-function run is
run, which run the configuration addresses) is the
:class:`~nnx._engine.update_owner.UpdateOwner` each passes in; the loop, the
commit and the resume protocol are the same for both. The loop's
training state is a :class:`~nnx._engine.loop_state.LoopState` it owns: the
commit (:mod:`nnx._engine.epoch_commit`) and resume (:mod:`nnx._engine.resume`)
receive it, never the loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from nnx._contracts.components import discover_components
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.compilation import CompileSession, check_compile_scope, compiled_fit
from nnx._engine.control_signal import epoch_signal, monitor_tracker
from nnx._engine.distributed import DistributedSession, MemoryHistory
from nnx._engine.epoch_commit import EpochCommit, keep_best_score
from nnx._engine.evaluation import preflight_eval_step
from nnx._engine.loop_state import LoopState, MonitorComponent, primary_slot
from nnx._engine.loop_support import (
    EngineSummary,
    RecordSummary,
    announce_epoch,
    as_callbacks,
    check_history,
    check_provenance,
    end_callbacks,
    parent_attempt,
    phase_epochs,
    reducible,
    warn_unowned,
    with_lookahead,
)
from nnx._engine.nonfinite import NonFiniteRunError, NonFiniteSkips
from nnx._engine.progress import Progress
from nnx._engine.resume import apply_resume, check_resume, plan_resume
from nnx._engine.schedule import SchedulerClock
from nnx._engine.steps import EvalStepContext, UpdateWindow
from nnx._engine.training_state import UpdateCounters
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine
from nnx._engine.update_owner import UpdateOwner
from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.modes import preserved_state
from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx._foundation.seeding import set_seed
from nnx._persistence.reservation import RunExistsError, RunLeaseError, admit_run
from nnx._persistence.run import NNRun, display_path
from nnx._persistence.run_history import open_history
from nnx._persistence.summary_writer import summarize_commit
from nnx.callbacks.base import CallbackContext
from nnx.metrics import check_metric_inputs, metric_modes
from nnx.provenance import begin_attempt
from nnx.transforms.recipe import transform_states

if TYPE_CHECKING:
    from nnx._contracts.trainable import TrainableModel
    from nnx.objectives import UpdateEvent

__all__ = ["FitLoop", "RunExistsError", "RunLeaseError", "run_fit_loop"]

EvalFn = Callable[[EvalStepContext], NNEvaluationDataPoint]


class FitLoop:
    """One training run, driven for the kind of run ``owner`` describes
    (:class:`~nnx._engine.update_owner.UpdateOwner`)."""

    engine: UpdateEngine | None = None
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    slots: dict[str | None, OptimizerSlot]
    accumulate: int  # the microbatches of one update window
    agree_stops = False  # under DDP: some rank registered an update listener
    ddp_net: Any = None
    auto_step_schedulers = True

    def __init__(self, owner: UpdateOwner, model: TrainableModel, params: Any, *,
                 objective: Any, eval_fn: EvalFn | None, callbacks: Sequence[Any],
                 salt: str | None, verbose: bool | None, root: str,
                 components: Sequence[Any] = (), history: Any = None,
                 provenance: Any = None, distributed: Any = None, compile: Any = None) -> None:
        if not isinstance(owner, UpdateOwner):
            raise TypeError(f"the fit loop needs an UpdateOwner (kind, custom_step, component, "
                            f"build, new_run, schedule_params, run_batch); got "
                            f"{type(owner).__name__}")
        self.owner = owner
        self.kind: str = owner.kind  # "model" (NNModel.train) or "trainer" (Trainer.train)
        # The owner records no declared metric on training batches.
        self.custom_step: bool = owner.custom_step
        if params.train_loader is None:
            raise ValueError(f"{type(params).__name__}.train_loader is required to train")
        if eval_fn is not None and not callable(eval_fn):
            raise TypeError("eval_step_fn must be callable")
        if compile is not None:  # before a DDP session or anything else exists (§28)
            check_compile_scope(compile, model, custom_step=owner.custom_step,
                                callbacks=callbacks, distributed=distributed)
        # The fit's compiled forward; built and routed only while the fit runs.
        self.compiled: CompileSession | None = compiled_fit(compile, model)
        self.dist: DistributedSession | None = None
        if distributed is not None:
            self.dist = DistributedSession(distributed, model.device)
            try:  # this rank's shard; loaders are runtime-only, so the run id is unchanged
                params = params.with_train_loader(self.dist.shard(params.train_loader,
                                                                  params.seed))
            except BaseException:
                self.dist.close()
                raise
            if not self.dist.is_main:
                verbose = False
        try:
            self._setup(model, params, objective=objective, eval_fn=eval_fn,
                        callbacks=callbacks, salt=salt, verbose=verbose, root=root,
                        components=components, history=history, provenance=provenance)
        except BaseException:
            if self.dist is not None:
                self.dist.close()
            raise

    @property
    def is_main(self) -> bool:
        """Whether this process persists the run (always, unless a non-zero DDP rank)."""
        return self.dist is None or self.dist.is_main

    def _setup(self, model: TrainableModel, params: Any, *, objective: Any, eval_fn: EvalFn | None,
               callbacks: Sequence[Any], salt: str | None, verbose: bool | None, root: str,
               components: Sequence[Any], history: Any, provenance: Any) -> None:
        self.model, self.params, self.objective = model, params, objective
        self.eval_fn = eval_fn
        self.callbacks = as_callbacks(callbacks)
        for callback in self.callbacks:
            callback.check_run(params)
            callback.check_model(model)
        self.journal = check_history(history, self.callbacks)
        self.provenance = check_provenance(provenance)
        self.attempt: Any = None
        model.task_adapter.check_loss(model.loss_fn)
        self.metrics = params.metrics
        self.monitor = params.monitor
        self.transforms = transform_states(model)
        self._build()  # optimizers, schedules, precision: may refuse, before any reservation
        self._check_declarations()
        self.run = self.owner.new_run(self, salt, root)
        if self.compiled is not None:  # beside the run, never in its id
            self.run.metadata["compile"] = self.compiled.record.state()
        if objective is not None:
            check_run = getattr(objective, "check_run", None)
            if callable(check_run):
                check_run(model, optimizers={n: s.optimizer for n, s in self.slots.items()},
                          callbacks=tuple(self.callbacks))
        self.ctx = self._context()
        self._distributed_context()
        # What the commit writes and a resume restores: the loop reads and writes it here.
        self.state = LoopState(kind=self.kind, ctx=self.ctx, slots=self.slots,
                               precision=self.precision, scaler=self.scaler,
                               train_loader=params.train_loader, tracker=self.tracker,
                               transforms=self.transforms, compile=self.compiled)
        self.state.components = discover_components(
            [*self.callbacks, self.owner.component, *self._own_components()], components)
        self.resume = plan_resume(params, self.run.root, self.schedule_params())
        if self.resume is not None:
            check_resume(self.resume, self.state, model.net)
        state = self.state
        state.start_epoch = 0 if self.resume is None else self.resume.start_epoch
        state.end_epoch = params.n_epochs if self.resume is None else self.resume.end_epoch
        self.progress = Progress(state.end_epoch - state.start_epoch, params.train_loader,
                                 verbose=verbose)
        self.verbose = verbose
        self.created = False  # this call reserved (created) the run directory
        self.summary: Any = None
        self.phases = self._phases()
        self._warned_unowned = False
        self.lr_used: float | None = None  # the primary's rate at its last update (a batch)
        if objective is not None:
            self.engine = UpdateEngine(model=model, objective=objective,
                                       slots=list(self.slots.values()),
                                       precision=self.precision, scaler=self.scaler,
                                       accumulate=self.accumulate, counter=self.ctx,
                                       on_commit=self._on_engine_commit, session=self.dist,
                                       extra_metrics=params.extra_metrics)

    # -- what the owner provides -----------------------------------------------------
    def _build(self) -> None:
        """The owner builds ``slots``, ``precision``, ``scaler`` and ``accumulate`` and
        refuses what it cannot run, before any reservation."""
        built = self.owner.build(self)
        self.slots, self.precision, self.scaler = built.slots, built.precision, built.scaler
        self.accumulate = built.accumulate
        self.auto_step_schedulers = built.auto_step_schedulers

    def _context(self) -> CallbackContext:
        own = getattr(self.owner, "context", None)  # optional: the Trainer's names optimizers
        if callable(own):
            context: CallbackContext = own(self)
            return context
        slot = self.primary
        # ctx.scheduler is the torch scheduler itself, read-only (§14.3); the driver that
        # steps it on its clock stays the loop's.
        return CallbackContext(model=self.model, run=self.run, optimizer=slot.optimizer,
                               scheduler=None if slot.schedule is None else
                               slot.schedule.scheduler)

    def _distributed_context(self) -> None:
        if self.dist is not None:
            self.ctx.rank, self.ctx.world_size = self.dist.rank, self.dist.world_size

    def run_batch(self, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint:
        """Run one microbatch through the update owner and return its record: an
        objective's through the shared update engine, a step function's through the
        owner."""
        if self.engine is not None:
            return self.engine.microbatch(batch, epoch=epoch, batch_idx=batch_idx,
                                          closes=window.closes)
        compiled = self.compiled
        if compiled is None:
            return self.owner.run_batch(self, batch, batch_idx, epoch, window)
        compiled.at("train", epoch, batch_idx)
        try:
            edp = self.owner.run_batch(self, batch, batch_idx, epoch, window)
        except BaseException as exc:
            compiled.step_failed(exc)
            raise
        finally:
            compiled.at("callback", epoch)
        compiled.step_done()
        return edp

    @property
    def primary(self) -> OptimizerSlot:
        """The primary optimizer: the only one, or the sorted-first name (§8.3)."""
        primary = self.__dict__.get("_primary")
        if primary is None:  # slots are fixed once built: look it up once
            primary = self.__dict__["_primary"] = primary_slot(self.slots)
        return primary

    def schedule_params(self) -> list[Any]:
        """The run's NNSchedulerParams (the resume checks read their budgets)."""
        return list(self.owner.schedule_params())

    # -- declarations -----------------------------------------------------------------
    def _phases(self) -> dict[str, int]:
        """Phase epochs: the plan's own on a fresh or planned run, this session's otherwise."""
        params = self.params
        if not params.save_phase_checkpoints:
            return {}
        if self.resume is None or getattr(params, "resume_epochs", "additional") == "planned":
            return phase_epochs(params.n_epochs)
        start = self.state.start_epoch
        return {tag: start + e for tag, e in phase_epochs(params.n_epochs).items()}

    def _own_components(self) -> list[Any]:
        own: list[Any] = [UpdateCounters(self.state)]
        own += [SchedulerClock(slot.schedule, name) for name, slot in self.slots.items()
                if slot.schedule is not None and slot.schedule.clock == "optimizer_update"]
        return own if self.tracker is None else [*own, MonitorComponent(self.tracker)]

    def _check_declarations(self) -> None:
        check_metric_inputs(self.metrics, self.model.task_adapter)
        # streaming_eval_step's refusals, here rather than at its first call (§21).
        preflight_eval_step(self.eval_fn, self.params.extra_metrics, self.metrics)
        self.tracker = monitor_tracker(self.params, self.metrics, custom_step=self.custom_step)

    def plateau_rule(self) -> tuple[str, float, str] | None:
        """With a named monitor, ReduceLROnPlateau decides exactly as the monitor does."""
        if self.monitor is None:
            return None
        direction = self.monitor.direction(metric_modes(self.metrics))
        return direction, float(self.monitor.min_delta), "abs"

    # -- reservation ------------------------------------------------------------------
    def reserve(self, locks: contextlib.ExitStack) -> None:
        """Rank 0 reserves; every rank learns whether it could (none waits forever)."""
        if self.dist is None:
            self._reserve(locks)
            self.created = True
            return
        failure: BaseException | None = None
        if self.dist.is_main:
            try:
                self._reserve(locks)
                self.created = True
            except BaseException as exc:
                failure = exc
        message = self.dist.broadcast(None if failure is None else repr(failure))
        if failure is not None:
            raise failure
        if message is not None:
            raise RuntimeError(f"rank 0 could not reserve run {self.run.id}: {message}")

    def _reserve(self, locks: contextlib.ExitStack) -> None:
        """Admit the run (lease → admission → best), then write its first files."""
        path = admit_run(self.run.root, self.run.id, overwrite=self.params.overwrite_existing,
                         locks=locks)
        try:
            atomic_write_text(path / ".history-committed-by-last", "")
            self.run.save_config()
        except BaseException:
            # Nothing of the run exists yet: release the reservation so it can be retried.
            shutil.rmtree(path, ignore_errors=True)
            raise

    # -- updates ----------------------------------------------------------------------
    def report_update(self, name: str | None) -> None:
        """A step function committed an update of optimizer ``name``."""
        slot = self.slots[name]
        slot.updates += 1
        self.state.committed_updates += 1
        self.state.updates_this_epoch += 1
        self._after_update([slot])

    def _on_engine_commit(self, events: list[UpdateEvent], stepped: list[OptimizerSlot]) -> None:
        self.state.updates_this_epoch += 1
        for event in events:  # every event of a commit fires before any schedule steps
            for cb in self.callbacks:
                cb.on_optimizer_update(self.ctx, event)
        self._after_update(stepped)

    def _after_update(self, stepped: list[OptimizerSlot]) -> None:
        if self.primary in stepped:
            # The rate this update used, read before its update-clock schedule moves on
            # to the next update's: what the batch's record shows.
            self.lr_used = float(self.primary.optimizer.param_groups[0]["lr"])
        if self.auto_step_schedulers:
            for slot in stepped:
                if slot.schedule is not None:
                    slot.schedule.on_update()
                    if slot is self.primary and slot.schedule.clock == "optimizer_update":
                        for listener in list(self.ctx.clock_listeners):
                            listener(self.ctx)
        for listener in list(self.ctx.update_listeners):
            listener(self.ctx)

    # -- one epoch --------------------------------------------------------------------
    def _epoch_summary(self) -> Any:
        """The whole-epoch training summary's accumulator, when a declaration needs one."""
        begin_epoch = getattr(self.owner, "begin_epoch", None)
        own = begin_epoch(self) if callable(begin_epoch) else None
        if own is not None:  # an accumulator the owner's step feeds itself (§6.4)
            return own
        declared = bool(self.metrics) or self.monitor is not None
        if not declared:
            return None
        if self.engine is not None:
            return EngineSummary(self.engine)
        return RecordSummary()

    def train_epoch(self, epoch: int) -> NNIterationDataPoint:
        params = self.params
        announce_epoch(params.train_loader, epoch)
        if self.engine is not None or not self.custom_step:
            # The built-in step and an objective's engine train in train mode; an
            # imperative train_step_fn / trainer_step_fn owns the mode itself (§11), so
            # adapters injected into an eval() net keep their eval behaviour under one
            # that never calls train().
            self.model.net.train()
        if not self._warned_unowned:  # once per run (§6.5)
            self._warned_unowned = warn_unowned(self.slots.values(), self.model.net)
        self.skips = NonFiniteSkips()
        if self.engine is not None:
            self.engine.begin_epoch(self.skips)  # the engine counts its own windows
        accumulate = self.accumulate
        window = UpdateWindow(size=accumulate)
        self.summary = self._epoch_summary()
        self.state.updates_this_epoch = 0
        return self._batches(epoch, accumulate, window)

    def _batches(self, epoch: int, accumulate: int,
                 window: UpdateWindow) -> NNIterationDataPoint:
        params, state = self.params, self.state
        last: NNIterationDataPoint | None = None
        record_summary = self.summary if isinstance(self.summary, RecordSummary) else None
        group = self.primary.optimizer.param_groups[0]  # the LR each record shows
        for batch_idx, (batch, is_last) in enumerate(with_lookahead(params.train_loader)):
            window.closes = is_last or window.position + 1 == accumulate
            self.lr_used = None  # set by an update of the primary optimizer in this batch
            edp = self.run_batch(batch, batch_idx, epoch, window)
            if not isinstance(edp, NNEvaluationDataPoint):
                raise TypeError(f"the train step must return an NNEvaluationDataPoint; got "
                                f"{type(edp).__name__}")
            if record_summary is not None:
                record_summary.update(edp, batch)
            if window.closes:
                if self.engine is None:  # the default step's NaN guard marks the window
                    self.skips.closed(batch_idx, window.nonfinite)
                window = UpdateWindow(size=accumulate)
            else:
                window.position += 1
            idp = NNIterationDataPoint(epoch=epoch, iter_idx=state.iter_idx, batch_idx=batch_idx,
                                       train_edp=edp, lr=self._record_lr(group),
                                       update_count=state.committed_updates)
            state.iter_idx += 1
            self.hist.append(idp)
            last = idp
            self.progress.batch(epoch, edp.loss)
            state.epoch_complete = is_last
            if self.agree_stops:  # a mid-epoch stop on any rank stops every rank (§6.1)
                assert self.dist is not None
                self.ctx.stop_at_update = self.dist.any(self.ctx.stop_at_update)
            if self.ctx.stop_at_update:
                break
        if last is None:
            raise ValueError(f"the training loader yielded no batch in epoch {epoch}")
        clocked = any(s.schedule is not None and s.schedule.clock == "optimizer_update"
                      for s in self.slots.values())
        if clocked and self.auto_step_schedulers and state.updates_this_epoch == 0:
            warnings.warn(f"epoch {epoch} reported no optimizer update: the update-clock "
                          "schedule did not step (call ctx.report_update() after each "
                          "optimizer.step() in a custom step)", RuntimeWarning, stacklevel=2)
        return last

    def _record_lr(self, group: Mapping[str, Any]) -> float:
        """The LR a batch's record shows: the rate its last update of the primary
        optimizer used, else (no update yet in an open window) the rate the window's
        update will use. On the update clock the schedule has already moved past it."""
        return self.lr_used if self.lr_used is not None else float(group["lr"])

    def validate(self, epoch: int) -> NNEvaluationDataPoint | None:
        loader = self.params.val_loader
        if loader is None:
            return None
        if self.compiled is None:
            return self._validate(loader, epoch)
        self.compiled.at("validate", epoch)
        try:
            return self._validate(loader, epoch)
        finally:
            self.compiled.at("callback", epoch)

    def _validate(self, loader: Any, epoch: int) -> NNEvaluationDataPoint:
        if self.eval_fn is None:
            return self.model.evaluate(loader, metrics=self.metrics,
                                       extra_metrics=self.params.extra_metrics)
        ctx = EvalStepContext(model=self.model, val_loader=loader,
                              extra_metrics=self.params.extra_metrics, epoch_idx=epoch,
                              metrics=self.metrics)
        with preserved_state(self.model.net, mode="eval"), torch.no_grad():
            edp = self.eval_fn(ctx)
        if not isinstance(edp, NNEvaluationDataPoint):
            raise TypeError("eval_step_fn must return an NNEvaluationDataPoint")
        return edp

    # -- commit -----------------------------------------------------------------------
    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        """The epoch transaction (:class:`EpochCommit`); under DDP only rank 0 persists,
        the others keep the score."""
        if self.is_main:
            self.committer.commit(epoch, idp, improved=improved, value=value)
            summarize_commit(self.run, epoch, idp, named_monitor=self.state.tracker is not None,
                             monitor_value=value)
        else:
            keep_best_score(self.state, improved=improved, value=value)

    def _run_deferred(self) -> None:
        """The transaction's last step: what callbacks deferred (ctx.defer), in order."""
        ctx = self.ctx
        queued, ctx.deferred = ctx.deferred, []
        for action in queued:
            action(ctx)

    def _final_last(self) -> None:
        """The final LAST refresh (:meth:`EpochCommit.refresh_last`, rank 0's only); under
        DDP every rank waits for it, so none goes on to read LAST (a resume in the same
        process group) while it is being replaced."""
        failure: BaseException | None = None
        try:
            if self.is_main:
                self.committer.refresh_last()
                if (last := self.state.last_commit) is not None:  # LAST may be a new point
                    summarize_commit(self.run, last.epoch, last.idp, named_monitor=False,
                                     monitor_value=None)
        except BaseException as exc:
            failure = exc
        message = None if self.dist is None else self.dist.broadcast(
            None if failure is None else repr(failure))
        if failure is not None:
            raise failure
        if message is not None:
            raise RuntimeError(f"rank 0 could not write the final LAST of run {self.run.id}: "
                               f"{message}")

    # -- the run ----------------------------------------------------------------------
    def _full_history(self) -> Any:
        try:
            return self.hist.full()
        except Exception as exc:  # the final read-back failed: the window, with a warning
            warnings.warn(f"reading the full history back failed ({exc!r}); full-history "
                          "callbacks get the window", RuntimeWarning, stacklevel=2)
            return self.hist.view

    def _dispatch(self, hook: str) -> None:
        """Call ``hook`` on every callback; full-history callbacks see the whole history."""
        ctx = self.ctx
        full = None
        for cb in self.callbacks:
            if getattr(cb, "history_access", "window") == "full" and self.journal is not None:
                full = self.hist.full(open_epoch=True) if full is None else full
                ctx.idps, window = full, ctx.idps
                try:
                    getattr(cb, hook)(ctx)
                finally:
                    ctx.idps = window
            else:
                getattr(cb, hook)(ctx)

    def execute(self) -> NNRun:
        completed = False
        try:
            with contextlib.ExitStack() as locks:
                self.reserve(locks)
                try:
                    with (contextlib.nullcontext() if self.compiled is None
                          else self.compiled.active(self.model)):
                        run = self._fit()
                except BaseException:
                    self._release()  # still under the lease
                    raise
                completed = True
                return run
        finally:
            if self.dist is not None:
                self._drop_wrapper()
                self.dist.close(completed=completed)

    def _drop_wrapper(self) -> None:
        """Let go of the DDP wrapper before its group is destroyed (DistributedSession.close):
        the loop, the engine and the owner's step context each hold it."""
        self.ddp_net = None
        if self.engine is not None:
            self.engine.train_net = None
        end_fit = getattr(self.owner, "end_fit", None)  # optional: only a caching owner has it
        if callable(end_fit):
            end_fit()

    def _release(self) -> None:
        """A run that failed before its first commit leaves nothing behind: its directory
        (run.yaml, metadata.yaml, provenance, journal, logger files) is removed, so the
        corrected retry is not refused as an existing run (§4.4). Only a directory this
        call created, and only while its lease is held; a run that began a commit keeps
        its directory (a failed first LAST leaves a failed attempt)."""
        if self.created and not self.state.commit_started and self.is_main:
            shutil.rmtree(self.run.path, ignore_errors=True)

    def _begin(self) -> None:
        """After the reset hooks ran: the owner may refuse what they registered."""
        begin = getattr(self.owner, "begin", None)  # optional: only the Trainer refuses
        if callable(begin):
            begin(self)

    def _fit(self) -> NNRun:
        if self.params.seed is not None:
            set_seed(self.params.seed)
        ctx, run = self.ctx, self.run
        if self.is_main:
            self.hist: Any = open_history(run, self.journal)
        else:
            self.hist = MemoryHistory(run)
        ctx.idps = self.hist.view
        if self.dist is not None:
            self.ddp_net = self.dist.wrap(self.model.net)
            if self.engine is not None:  # its contexts carry the wrapper (ctx.train_net)
                self.engine.train_net = self.ddp_net
        if self.provenance is not None and self.is_main:
            self.attempt = begin_attempt(run.path, self.provenance,
                                         parent=parent_attempt(run.root, self.resume))
        self.committer = EpochCommit(self.state, run=run, net=self.model.net, params=self.params,
                                     history=self.hist, attempt=self.attempt, phases=self.phases)
        try:
            for cb in self.callbacks:
                cb.on_train_begin(ctx)
            self._begin()
            if self.dist is not None:  # agree once whether mid-epoch stops need agreeing
                self.agree_stops = self.dist.any(bool(ctx.update_listeners))
            if self.resume is not None:
                apply_resume(self.resume, self.state, self.model.net)
                run.resume_status = self.resume.status
                run.metadata["resume"] = self.resume.status.state()
                if self.is_main:
                    run.save_config()
            self._epochs()
        except BaseException as exc:
            # on_train_end still runs so loggers close their files; ctx.error says why.
            ctx.error = exc
            if self.attempt is not None:
                status = "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed"
                self.attempt.finish(status, exc, suppress_errors=True,
                                    compile=self._compile_state())
            raise
        finally:
            self.progress.close()
            if self.is_main:
                self.committer.release_marker()
            end_callbacks(self.callbacks, ctx, full=self._full_history)
        try:
            self._final_last()
            self._run_deferred()  # what on_train_end deferred sees the final LAST
        except BaseException as exc:
            if self.attempt is not None:
                self.attempt.finish("failed", exc, suppress_errors=True,
                                    compile=self._compile_state())
            raise
        if self.attempt is not None:
            self.attempt.finish("completed", compile=self._compile_state())
        if self.is_main and self.verbose is not False:  # verbose=False prints nothing
            print(f"Run saved to {display_path(run.path)}")
        return run

    def _compile_state(self) -> dict[str, Any] | None:
        """The compile record as of now (attempt.json's, as of the attempt's end)."""
        return None if self.compiled is None else self.compiled.record.state()

    def _epochs(self) -> None:
        ctx = self.ctx
        state = self.state
        for epoch in range(state.start_epoch, state.end_epoch):
            ctx.epoch = epoch
            for cb in self.callbacks:
                cb.on_epoch_begin(ctx)
            last = self.train_epoch(epoch)
            if ctx.stop_at_update and not state.epoch_complete:
                self.hist.discard_epoch(epoch)  # a partial epoch is never committed
                state.partial_stop = True
                return
            try:  # an epoch the NaN guard left without any update is refused, uncommitted
                self.skips.end_epoch(epoch, state.updates_this_epoch)
            except NonFiniteRunError:
                self.hist.discard_epoch(epoch)
                raise
            val_edp = self.validate(epoch)
            if self.dist is not None and self.summary is not None:
                self.dist.reduce_state(reducible(self.summary))  # sums and counts
            idp = dataclasses.replace(
                last, val_edp=val_edp,
                train_summary=None if self.summary is None else self.summary.result())
            if self.dist is not None:  # rank 0's record decides everywhere
                idp = self.dist.broadcast(idp)
            value, improved, record = epoch_signal(idp, monitor=self.monitor, tracker=self.tracker,
                                                   best_score=state.best_score)
            if record is not None:
                idp = dataclasses.replace(idp, selection=record)
            self.hist.replace_last(idp)
            if self.auto_step_schedulers:
                for slot in self.slots.values():
                    if slot.schedule is not None:
                        slot.schedule.on_epoch_end(value)
            ctx.idp = idp
            self.progress.epoch_done(epoch, idp)
            # The callbacks run before the commit, so LAST holds what they did: a
            # component's state (EarlyStopping's patience), the net, should_stop.
            ctx.deferred = []
            self._dispatch("on_epoch_end")
            self.commit(epoch, idp, improved=improved, value=value)
            self._run_deferred()
            if self.dist is not None:  # after rank 0's commit: no rank reads LAST before it
                ctx.should_stop = self.dist.any(ctx.should_stop)
                ctx.stop_at_update = self.dist.any(ctx.stop_at_update)
            if ctx.should_stop or ctx.stop_at_update:
                return


def run_fit_loop(owner: UpdateOwner, model: TrainableModel, params: Any, *,
                 objective: Any = None, eval_step_fn: EvalFn | None = None,
                 callbacks: Sequence[Any] = (), salt: str | None = None,
                 verbose: bool | None = None, root: str = "runs",
                 components: Sequence[Any] = (), history: Any = None, provenance: Any = None,
                 distributed: Any = None, compile: Any = None) -> NNRun:
    """Train ``model`` for the run ``owner`` describes and return the committed run: the
    one entry to the epoch loop (NNModel.train and Trainer.train call it with their own
    owners; an add-on passes its own instead of subclassing the loop). Every refusal of
    the owner's ``build`` and of the loop happens before the run directory is reserved."""
    loop = FitLoop(owner, model, params, objective=objective, eval_fn=eval_step_fn,
                   callbacks=callbacks, salt=salt, verbose=verbose, root=root,
                   components=components, history=history, provenance=provenance,
                   distributed=distributed, compile=compile)
    return loop.execute()
