"""The epoch loop both NNModel.train and Trainer.train run (spec §1 layer 5, §4, §5, §6).

Per epoch: the batches through the update owner in accumulation windows, validation,
the control signal, the epoch-clock schedules, the ``on_epoch_end`` callbacks, the
commit (history → LAST → FIRST/Q1–Q3 → BEST → runs/best), then what the callbacks
deferred. The callbacks run before the commit so the committed epoch holds what they
changed; after ``on_train_end`` a successful run writes LAST once more (same epoch,
new generation). A run that fails before its first commit releases its reservation.

The loop is one class, never subclassed. Around it, each concern has its module:
what differs between the entry points is the
:class:`~nnx._engine.update_owner.UpdateOwner` each passes in; the checks and builds
before the reservation are :mod:`nnx._engine.fit_setup`'s; which process persists and
how processes agree is the :class:`~nnx._engine.process_session.ProcessSession`'s (a
single process and DDP are two sessions, so the loop has no rank branch); what follows
each update is :class:`~nnx._engine.update_hooks.UpdateHooks`'; what a commit writes is
:mod:`nnx._engine.epoch_commit`'s (written by a background writer while the next epoch
trains; the loop waits for it only where something reads the committed files), and
the training state it and a resume share is a
:class:`~nnx._engine.loop_state.LoopState`, whose checkpoint schema is
:mod:`nnx._engine.training_state`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from nnx._engine import fit_setup
from nnx._engine.compilation import CompileSession, check_compile_scope, compiled_fit
from nnx._engine.control_signal import epoch_signal, monitor_tracker
from nnx._engine.epoch_commit import EpochCommit, ScoreKeeper
from nnx._engine.evaluation import preflight_eval_step, run_eval_step
from nnx._engine.loop_state import LoopState, primary_slot
from nnx._engine.loop_support import (
    RecordSummary,
    announce_epoch,
    check_history,
    check_provenance,
    dispatch_epoch_end,
    reducible,
    run_deferred,
    warn_unowned,
    with_lookahead,
)
from nnx._engine.nonfinite import NonFiniteRunError, NonFiniteSkips
from nnx._engine.process_session import open_session
from nnx._engine.progress import Progress
from nnx._engine.resume import check_resume, plan_resume
from nnx._engine.steps import EvalStepContext, UpdateWindow
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine
from nnx._engine.update_hooks import UpdateHooks
from nnx._engine.update_owner import UpdateOwner
from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx.metrics import check_metric_inputs, metric_modes
from nnx.transforms.recipe import transform_states

if TYPE_CHECKING:
    from nnx._contracts.trainable import TrainableModel

__all__ = ["EvalFn", "FitLoop"]

EvalFn = Callable[[EvalStepContext], NNEvaluationDataPoint]


class FitLoop:
    """One training run, driven for the kind of run ``owner`` describes; what an owner
    reads of it is :class:`~nnx._engine.update_owner.LoopView`."""

    engine: UpdateEngine | None = None
    # Set when the fit starts (nnx._engine.fit_run), after the reservation:
    hist: Any  # the run's history (the main process's is written)
    committer: EpochCommit | ScoreKeeper  # the epoch transaction of this process
    attempt: Any = None  # the provenance attempt, under provenance=
    agree_stops = False  # some process registered an update listener: agree on stops
    train_net: Any = None  # the wrapper the training forward goes through (DDP), or None

    def __init__(self, owner: UpdateOwner, model: TrainableModel, params: Any, *,
                 objective: Any, eval_fn: EvalFn | None, callbacks: Sequence[Any],
                 salt: str | None, verbose: bool | None, root: str,
                 components: Sequence[Any] = (), history: Any = None,
                 provenance: Any = None, distributed: Any = None, compile: Any = None) -> None:
        fit_setup.check_fit_call(owner, params, eval_fn)
        if compile is not None:  # before a DDP session or anything else exists (§28)
            check_compile_scope(compile, model, custom_step=owner.custom_step,
                                callbacks=callbacks, distributed=distributed)
        # The fit's compiled forward; built and routed only while the fit runs.
        self.compiled: CompileSession | None = compiled_fit(compile, model)
        self.owner, self.model, self.eval_fn = owner, model, eval_fn
        self.session = open_session(distributed, model.device)
        try:  # this process's shard: loaders are runtime-only, so the run id is unchanged
            shard = self.session.shard(params.train_loader, params.seed)
            self.params = params if shard is params.train_loader else (
                params.with_train_loader(shard))
            self.verbose = self.session.verbosity(verbose)
            self._setup(objective, callbacks, salt, root, components, history, provenance)
        except BaseException:
            self.session.close()
            raise

    def _setup(self, objective: Any, callbacks: Sequence[Any], salt: str | None, root: str,
               components: Sequence[Any], history: Any, provenance: Any) -> None:
        """Every check and build, before anything is reserved."""
        model, params, owner = self.model, self.params, self.owner
        self.callbacks = fit_setup.checked_callbacks(callbacks, params, model)
        self.journal = check_history(history, self.callbacks)
        # A journal's full-history callback reads the committed epochs back from disk.
        self.reads_full_history = self.journal is not None and any(
            getattr(cb, "history_access", "window") == "full" for cb in self.callbacks)
        self.provenance = check_provenance(provenance)
        model.task_adapter.check_loss(model.loss_fn)
        self.metrics, self.monitor = params.metrics, params.monitor
        self.transforms = transform_states(model)
        built = owner.build(self)  # optimizers, schedules, precision: may refuse
        self.slots, self.precision, self.scaler = built.slots, built.precision, built.scaler
        self.accumulate = built.accumulate
        # The run's task (an objective's source task, else the model's) serves the
        # metrics its own evaluation step computes (TASK_METRIC_INPUT); validated by
        # the default evaluate(), row by row, nothing does.
        run_task = getattr(owner, "task", None)
        run_task = model.task_runtime.task if run_task is None else run_task
        check_metric_inputs(self.metrics, model.task_adapter,
                            task=None if self.eval_fn is None else run_task)
        # streaming_eval_step's refusals, here rather than at its first call (§21).
        preflight_eval_step(self.eval_fn, params.extra_metrics, self.metrics)
        tracker = monitor_tracker(params, self.metrics, custom_step=owner.custom_step)
        self.run = owner.new_run(self, salt, root)
        if self.compiled is not None:  # beside the run, never in its id
            self.run.metadata["compile"] = self.compiled.record.state()
        if objective is not None:
            fit_setup.check_objective(objective, model, self.slots, self.callbacks)
        self.ctx = fit_setup.callback_context(owner, self, self.session)
        # What the commit writes and a resume restores: the loop reads and writes it here.
        state = self.state = LoopState(
            kind=owner.kind, ctx=self.ctx, slots=self.slots, precision=self.precision,
            scaler=self.scaler, train_loader=params.train_loader, tracker=tracker,
            transforms=self.transforms, compile=self.compiled)
        fit_setup.loop_components(state, owner, self.callbacks, components)
        self.resume = plan_resume(params, self.run.root, owner.schedule_params())
        if self.resume is not None:
            check_resume(self.resume, state, model.net)
            state.start_epoch, state.end_epoch = self.resume.start_epoch, self.resume.end_epoch
        else:
            state.start_epoch, state.end_epoch = 0, params.n_epochs
        self.progress = Progress(state.end_epoch - state.start_epoch, params.train_loader,
                                 verbose=self.verbose)
        self.phases = fit_setup.run_phases(params, self.resume, state.start_epoch)
        self.hooks = UpdateHooks(state, self.callbacks,
                                 step_schedules=built.auto_step_schedulers)
        self.warned_unowned = False  # the unowned-parameter warning is given once per run
        if objective is not None:
            self.engine = UpdateEngine(
                model=model, objective=objective, slots=list(self.slots.values()),
                precision=self.precision, scaler=self.scaler, accumulate=self.accumulate,
                counter=self.ctx, on_commit=self.hooks.engine_committed,
                session=self.session.distributed, extra_metrics=params.extra_metrics)

    # -- what owners read (LoopView) -----------------------------------------------------
    @property
    def primary(self) -> OptimizerSlot:
        """The primary optimizer: the only one, or the sorted-first name (§8.3)."""
        primary = self.__dict__.get("_primary")
        if primary is None:  # slots are fixed once built: look it up once
            primary = self.__dict__["_primary"] = primary_slot(self.slots)
        return primary

    @property
    def distributed(self) -> Any:
        """What the per-batch code sums across processes through (None alone)."""
        return self.session.distributed

    def plateau_rule(self) -> tuple[str, float, str] | None:
        """With a named monitor, ReduceLROnPlateau decides exactly as the monitor does."""
        if self.monitor is None:
            return None
        direction = self.monitor.direction(metric_modes(self.metrics))
        return direction, float(self.monitor.min_delta), "abs"

    def report_update(self, name: str | None) -> None:
        """A step function committed an update of optimizer ``name``."""
        self.hooks.report(name)

    # -- one epoch of batches -------------------------------------------------------------
    def run_batch(self, batch: Any, batch_idx: int, epoch: int,
                  window: UpdateWindow) -> NNEvaluationDataPoint:
        """One microbatch: an objective's through the shared update engine, a step
        function's through the owner."""
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

    def train_epoch(self, epoch: int) -> NNIterationDataPoint:
        """The epoch's batches; returns the last batch's record."""
        params, state, hooks = self.params, self.state, self.hooks
        announce_epoch(params.train_loader, epoch)
        if self.engine is not None or not self.owner.custom_step:
            # The built-in step and an objective's engine train in train mode; an
            # imperative step function owns the mode itself (§11), so adapters injected
            # into an eval() net keep their eval behaviour under one that never calls it.
            self.model.net.train()
        if not self.warned_unowned:  # once per run (§6.5)
            self.warned_unowned = warn_unowned(self.slots.values(), self.model.net)
        self.skips = NonFiniteSkips()
        if self.engine is not None:
            self.engine.begin_epoch(self.skips)  # the engine counts its own windows
        declared = bool(self.metrics) or self.monitor is not None
        self.summary = fit_setup.epoch_summary(self.owner, self, declared=declared,
                                               engine=self.engine)
        summary = self.summary if isinstance(self.summary, RecordSummary) else None
        state.updates_this_epoch = 0
        accumulate, ctx = self.accumulate, self.ctx
        window = UpdateWindow(size=accumulate)
        group = self.primary.optimizer.param_groups[0]  # the LR each record shows
        last: NNIterationDataPoint | None = None
        for batch_idx, (batch, is_last) in enumerate(with_lookahead(params.train_loader)):
            window.closes = is_last or window.position + 1 == accumulate
            hooks.lr_used = None  # set by an update of the primary optimizer in this batch
            edp = self.run_batch(batch, batch_idx, epoch, window)
            if not isinstance(edp, NNEvaluationDataPoint):
                raise TypeError(f"the train step must return an NNEvaluationDataPoint; got "
                                f"{type(edp).__name__}")
            if summary is not None:
                summary.update(edp, batch)
            if window.closes:
                if self.engine is None:  # the default step's NaN guard marks the window
                    self.skips.closed(batch_idx, window.nonfinite)
                window = UpdateWindow(size=accumulate)
            else:
                window.position += 1
            last = NNIterationDataPoint(epoch=epoch, iter_idx=state.iter_idx,
                                        batch_idx=batch_idx, train_edp=edp,
                                        lr=hooks.record_lr(group),
                                        update_count=state.committed_updates)
            state.iter_idx += 1
            self.hist.append(last)
            self.progress.batch(epoch, edp.loss)
            state.epoch_complete = is_last
            if self.agree_stops:  # a mid-epoch stop in any process stops all (§6.1)
                ctx.stop_at_update = self.session.any(ctx.stop_at_update)
            if ctx.stop_at_update:
                break
        if last is None:
            raise ValueError(f"the training loader yielded no batch in epoch {epoch}")
        hooks.check_epoch(epoch)
        return last

    def validate(self, epoch: int) -> NNEvaluationDataPoint | None:
        """The epoch's validation record (None without a validation loader)."""
        loader = self.params.val_loader
        if loader is None:
            return None
        compiled = self.compiled
        if compiled is not None:
            compiled.at("validate", epoch)
        try:
            if self.eval_fn is None:
                return self.model.evaluate(loader, metrics=self.metrics,
                                           extra_metrics=self.params.extra_metrics)
            return run_eval_step(self.eval_fn, EvalStepContext(
                model=self.model, val_loader=loader, extra_metrics=self.params.extra_metrics,
                epoch_idx=epoch, metrics=self.metrics))
        finally:
            if compiled is not None:
                compiled.at("callback", epoch)

    # -- the epochs -------------------------------------------------------------------------
    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        """The epoch transaction (:mod:`nnx._engine.epoch_commit`): staged here, written
        by the commit's writer (in the background unless ``async_commit=False``)."""
        self.session.gather(self.model.net, [slot.optimizer for slot in self.state.slots.values()],
                            self.run.checkpoints_dir)
        self.committer.commit(epoch, idp, improved=improved, value=value)

    def epochs(self) -> None:
        """The planned epochs, until the plan ends or a stop."""
        ctx, state, session = self.ctx, self.state, self.session
        committer = self.committer
        for epoch in range(state.start_epoch, state.end_epoch):
            committer.check()  # a commit in flight that failed stops the fit here
            ctx.epoch = epoch
            for cb in self.callbacks:
                cb.on_epoch_begin(ctx)
            last = self.train_epoch(epoch)
            if ctx.stop_at_update and not state.epoch_complete:
                committer.wait()  # the history forgets the open epoch once the last is in
                self.hist.discard_epoch(epoch)  # a partial epoch is never committed
                state.partial_stop = True
                return
            try:  # an epoch the NaN guard left without any update is refused, uncommitted
                self.skips.end_epoch(epoch, state.updates_this_epoch)
            except NonFiniteRunError:
                committer.wait()
                self.hist.discard_epoch(epoch)
                raise
            val_edp = self.validate(epoch)
            if self.summary is not None:
                session.reduce_state(reducible(self.summary))  # sums and counts
            idp = session.broadcast(dataclasses.replace(  # the main record decides everywhere
                last, val_edp=val_edp,
                train_summary=None if self.summary is None else self.summary.result()))
            value, improved, record = epoch_signal(idp, monitor=self.monitor,
                                                   tracker=state.tracker,
                                                   best_score=state.best_score)
            if record is not None:
                idp = dataclasses.replace(idp, selection=record)
            self.hist.replace_last(idp)
            if self.hooks.step_schedules:
                for slot in self.slots.values():
                    if slot.schedule is not None:
                        slot.schedule.on_epoch_end(value)
            ctx.idp = idp
            self.progress.epoch_done(epoch, idp)
            # The callbacks run before the commit, so LAST holds what they did: a
            # component's state (EarlyStopping's patience), the net, should_stop.
            ctx.deferred = []
            if self.reads_full_history:  # it reads the committed journal back: all of it
                committer.wait()
            dispatch_epoch_end(self.callbacks, ctx, self.hist, self.journal)
            self.commit(epoch, idp, improved=improved, value=value)
            if ctx.deferred:  # what was deferred reads the committed files
                committer.wait()
            run_deferred(ctx)
            # After the main process's commit: no process reads LAST before it.
            ctx.should_stop = session.any(ctx.should_stop)
            ctx.stop_at_update = session.any(ctx.stop_at_update)
            if ctx.should_stop or ctx.stop_at_update:
                return
