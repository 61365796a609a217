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

Subclasses say how the optimizers are built and how one batch is run; the
loop, the commit and the resume protocol are the same for both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from nnx._engine.components import ComponentSpec, collect_states, discover_components
from nnx._engine.loop_support import (
    RecordSummary,
    as_callbacks,
    check_history,
    check_provenance,
    end_callbacks,
    phase_epochs,
    transform_states,
    with_lookahead,
)
from nnx._engine.nonfinite import NonFiniteRunError, NonFiniteSkips
from nnx._engine.optimizer_factories import optimizer_factory_state
from nnx._engine.progress import Progress
from nnx._engine.resume import apply_resume, check_resume, loader_generators, plan_resume
from nnx._engine.steps import EvalStepContext, UpdateWindow
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine
from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.locking import LockBusyError, file_lock
from nnx._foundation.records import (
    NNEvaluationDataPoint,
    NNIterationDataPoint,
    first_finite,
    signal_walk,
)
from nnx._persistence.best import discard_retired, promote_best, retire_run
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.run import NNRun, display_path
from nnx._persistence.run_history import open_history
from nnx.callbacks.base import CallbackContext

if TYPE_CHECKING:
    from nnx._engine.distributed import DistributedSession
    from nnx._engine.precision import ResolvedPrecision
    from nnx._surface.model import NNModel
    from nnx.objectives import UpdateEvent

__all__ = ["FitLoop", "RunExistsError", "RunLeaseError"]

EvalFn = Callable[[EvalStepContext], NNEvaluationDataPoint]


class RunExistsError(FileExistsError):
    """The configuration's run directory already exists and overwriting was not asked for."""


class RunLeaseError(RuntimeError):
    """Another process holds this run's lease: it is training the same run id now."""


class FitLoop(ABC):
    """One training run. Subclasses set ``kind`` and implement :meth:`_build` and
    :meth:`run_batch`."""

    kind = "model"  # "model" (NNModel.train) or "trainer" (Trainer.train)
    engine: UpdateEngine | None = None
    precision: ResolvedPrecision
    scaler: torch.amp.GradScaler | None
    slots: dict[str | None, OptimizerSlot]
    accumulate: int  # the microbatches of one update window
    custom_step = False  # the update owner records no declared metric on training batches
    agree_stops = False  # under DDP: some rank registered an update listener
    ddp_net: Any = None
    auto_step_schedulers = True

    def __init__(self, model: NNModel, params: Any, *, objective: Any, eval_fn: EvalFn | None,
                 callbacks: Sequence[Any], salt: str | None, verbose: bool | None, root: str,
                 components: Sequence[Any] = (), history: Any = None,
                 provenance: Any = None, distributed: Any = None) -> None:
        if params.train_loader is None:
            raise ValueError(f"{type(params).__name__}.train_loader is required to train")
        if eval_fn is not None and not callable(eval_fn):
            raise TypeError("eval_step_fn must be callable")
        self.dist: DistributedSession | None = None
        if distributed is not None:
            from nnx._engine.distributed import DistributedSession

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

    def _setup(self, model: NNModel, params: Any, *, objective: Any, eval_fn: EvalFn | None,
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
        self.run = self._new_run(salt, root)
        if objective is not None:
            check_run = getattr(objective, "check_run", None)
            if callable(check_run):
                check_run(model, optimizers={n: s.optimizer for n, s in self.slots.items()},
                          callbacks=tuple(self.callbacks))
        self.components = discover_components(
            [*self.callbacks, self._update_owner(), *self._own_components()], components)
        self.resume = plan_resume(params, self.run.root, self)
        if self.resume is not None:
            check_resume(self.resume, self)
        self.start_epoch = 0 if self.resume is None else self.resume.start_epoch
        self.end_epoch = params.n_epochs if self.resume is None else self.resume.end_epoch
        self.progress = Progress(self.end_epoch - self.start_epoch, params.train_loader,
                                 verbose=verbose)
        self.verbose = verbose
        self.ctx = self._context()
        self._distributed_context()
        self.iter_idx = 0
        self.epoch_complete = False
        self.created = False  # this call reserved (created) the run directory
        self.commit_started = False  # a commit of this run began: its directory stays
        self.last_commit: tuple[int, NNIterationDataPoint, dict[str, Any], Any] | None = None
        self.partial_stop = False  # stopped inside an epoch: no final LAST refresh
        self.summary: Any = None
        self.best_score = math.inf
        # LAST as the current commit saved it, with its training state (BEST shares it).
        self._saved_last: tuple[NNCheckpoint, dict[str, Any]] | None = None
        self.phases = self._phases()
        self._warned_unowned = False
        if objective is not None:
            self.engine = UpdateEngine(model=model, objective=objective,
                                       slots=list(self.slots.values()),
                                       precision=self.precision, scaler=self.scaler,
                                       accumulate=self.accumulate, counter=self.ctx,
                                       on_commit=self._on_engine_commit, session=self.dist)

    # -- what subclasses provide ------------------------------------------------------
    @abstractmethod
    def _build(self) -> None:
        """Build ``slots``, ``precision``, ``scaler`` and ``accumulate``; refuse here."""

    @abstractmethod
    def _new_run(self, salt: str | None, root: str) -> NNRun:
        """The run this configuration addresses (not reserved yet)."""

    def _update_owner(self) -> Any:
        """The step function or objective (discovered as a component when it is one)."""
        return self.objective

    def _context(self) -> CallbackContext:
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
        """Run one microbatch through the update owner and return its record."""
        assert self.engine is not None
        return self.engine.microbatch(batch, epoch=epoch, batch_idx=batch_idx,
                                      closes=window.closes)

    @property
    def primary(self) -> OptimizerSlot:
        """The primary optimizer: the only one, or the sorted-first name (§8.3)."""
        primary = self.__dict__.get("_primary")
        if primary is None:  # slots are fixed once built: look it up once
            primary = self.slots[min(self.slots, key=lambda n: "" if n is None else n)]
            self.__dict__["_primary"] = primary
        return primary

    @staticmethod
    def _checkpoint_score(idp: NNIterationDataPoint) -> float:
        """The score a BEST checkpoint of ``idp`` has (NNCheckpoint.score)."""
        found = first_finite(idp)
        return math.inf if found is None else found[1]

    @abstractmethod
    def schedule_params(self) -> list[Any]:
        """The run's NNSchedulerParams (the resume checks read their budgets)."""

    # -- declarations -----------------------------------------------------------------
    def _phases(self) -> dict[str, int]:
        """Phase epochs: the plan's own on a fresh or planned run, this session's otherwise."""
        params = self.params
        if not params.save_phase_checkpoints:
            return {}
        if self.resume is None or getattr(params, "resume_epochs", "additional") == "planned":
            return phase_epochs(params.n_epochs)
        return {tag: self.start_epoch + e for tag, e in phase_epochs(params.n_epochs).items()}

    def _own_components(self) -> list[Any]:
        from nnx._engine.schedule import SchedulerClock

        own: list[Any] = [_UpdateCounters(self)]
        own += [SchedulerClock(slot.schedule, name) for name, slot in self.slots.items()
                if slot.schedule is not None and slot.schedule.clock == "optimizer_update"]
        return own if self.tracker is None else [*own, _MonitorComponent(self.tracker)]

    def _check_declarations(self) -> None:
        from nnx._engine.monitors import MonitorTracker
        from nnx.metrics import check_metric_inputs, metric_modes

        check_metric_inputs(self.metrics, self.model.task_adapter)
        self.tracker = None
        spec = self.monitor
        if spec is None:
            return
        if spec.split == "val" and self.params.val_loader is None:
            raise ValueError(f"a validation-split MonitorSpec needs "
                             f"{type(self.params).__name__}.val_loader")
        if spec.split == "train" and spec.metric not in ("loss", "error") and self.custom_step:
            raise ValueError(f"MonitorSpec(metric={spec.metric!r}, split='train') needs the "
                             "default training step: a custom step or an objective records "
                             "no declared metric on training batches")
        self.direction = spec.direction(metric_modes(self.metrics))
        self.tracker = MonitorTracker(spec, self.direction)

    def plateau_rule(self) -> tuple[str, float, str] | None:
        """With a named monitor, ReduceLROnPlateau decides exactly as the monitor does."""
        if self.monitor is None:
            return None
        from nnx.metrics import metric_modes

        direction = self.monitor.direction(metric_modes(self.metrics))
        return direction, float(self.monitor.min_delta), "abs"

    def _signal(self, idp: NNIterationDataPoint) -> tuple[float | None, bool, Any]:
        """(control value, improved?, monitor record) for the epoch's last record."""
        if self.tracker is None:
            found, rejected = signal_walk(idp)
            if rejected:  # NaN / ±inf is never a baseline: one warning per epoch (§6.2)
                names = ", ".join(f"{name}={value}" for name, value in rejected)
                used = "no finite value is available" if found is None else (
                    f"using {found[0]}={found[1]}")
                warnings.warn(f"epoch {idp.epoch}: rejected non-finite control value(s) "
                              f"{names}; {used}", RuntimeWarning, stacklevel=3)
            score = math.inf if found is None else found[1]
            return (None if found is None else found[1]), score < self.best_score, None
        assert self.monitor is not None
        edp = idp.val_edp if self.monitor.split == "val" else idp.train_summary
        record = self.tracker.decide(self.monitor.read(edp))
        return record.value, record.improved, record

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
        """Take the run's lease for the whole fit, then admit it (lease → admission → best)."""
        root, path = self.run.root, self.run.path
        root.mkdir(parents=True, exist_ok=True)
        try:
            locks.enter_context(file_lock(root / ".leases" / f"{self.run.id}.lock",
                                          blocking=False))
        except LockBusyError:
            raise RunLeaseError(f"run {self.run.id} is being trained by another process; "
                                "wait for it, or train another configuration") from None
        retired = None
        with file_lock(root / ".admission.lock"):
            if path.exists():
                if not self.params.overwrite_existing:
                    raise RunExistsError(
                        f"run {self.run.id} already exists at {display_path(path)}; pass a "
                        "salt=... for a separate record of the same configuration, or "
                        "overwrite_existing=True to replace it")
                # Overwrite: hand runs/best on and rename the old run aside in one
                # .best.lock section, so no election can advertise it (§4.1).
                retired = retire_run(root, self.run.id)
            path.mkdir()
            (path / "checkpoints").mkdir()
        if retired is not None:
            discard_retired(retired)  # outside the locks: the old artifacts may be large
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
        self.ctx.committed_updates += 1
        self.updates_this_epoch += 1
        self._after_update([slot])

    def _on_engine_commit(self, events: list[UpdateEvent], stepped: list[OptimizerSlot]) -> None:
        self.updates_this_epoch += 1
        for event in events:  # every event of a commit fires before any schedule steps
            for cb in self.callbacks:
                cb.on_optimizer_update(self.ctx, event)
        self._after_update(stepped)

    def _after_update(self, stepped: list[OptimizerSlot]) -> None:
        if self.auto_step_schedulers:
            for slot in stepped:
                if slot.schedule is not None:
                    slot.schedule.on_update()
                    if slot is self.primary and slot.schedule.clock == "optimizer_update":
                        for listener in list(self.ctx.clock_listeners):
                            listener(self.ctx)
        for listener in list(self.ctx.update_listeners):
            listener(self.ctx)

    def _warn_unowned(self) -> None:
        """Warn once per run about a parameter that trains but no optimizer owns (§6.5)."""
        if self._warned_unowned:
            return
        owned = {id(p) for slot in self.slots.values() for p in slot.params()}
        names = [n for n, p in self.model.net.named_parameters()
                 if p.requires_grad and id(p) not in owned]
        if names:
            self._warned_unowned = True
            shown = ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
            warnings.warn(f"{len(names)} parameter(s) require gradients but no optimizer owns "
                          f"them, so they never train: {shown} (an optimizer built with "
                          "param_groups leaves out parameters frozen at build time)",
                          RuntimeWarning, stacklevel=4)

    # -- one epoch --------------------------------------------------------------------
    def _epoch_summary(self) -> Any:
        """The whole-epoch training summary's accumulator, when a declaration needs one."""
        declared = bool(self.metrics) or self.monitor is not None
        if not declared:
            return None
        if self.engine is not None:
            return _EngineSummary(self.engine)
        return RecordSummary()

    def train_epoch(self, epoch: int) -> NNIterationDataPoint:
        params = self.params
        _announce_epoch(params.train_loader, epoch)
        self.model.net.train()
        self._warn_unowned()
        self.skips = NonFiniteSkips()
        if self.engine is not None:
            self.engine.begin_epoch(self.skips)  # the engine counts its own windows
        accumulate = self.accumulate
        window = UpdateWindow(size=accumulate)
        self.summary = self._epoch_summary()
        self.updates_this_epoch = 0
        if self.dist is not None:
            self.model._train_forward = self.ddp_net
        try:
            return self._batches(epoch, accumulate, window)
        finally:
            self.model._train_forward = None

    def _batches(self, epoch: int, accumulate: int,
                 window: UpdateWindow) -> NNIterationDataPoint:
        params = self.params
        last: NNIterationDataPoint | None = None
        record_summary = self.summary if isinstance(self.summary, RecordSummary) else None
        group = self.primary.optimizer.param_groups[0]  # the LR each record shows
        for batch_idx, (batch, is_last) in enumerate(with_lookahead(params.train_loader)):
            window.closes = is_last or window.position + 1 == accumulate
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
            idp = NNIterationDataPoint(epoch=epoch, iter_idx=self.iter_idx, batch_idx=batch_idx,
                                       train_edp=edp, lr=float(group["lr"]),
                                       update_count=self.ctx.committed_updates)
            self.iter_idx += 1
            self.hist.append(idp)
            last = idp
            self.progress.batch(epoch, edp.loss)
            self.epoch_complete = is_last
            if self.agree_stops:  # a mid-epoch stop on any rank stops every rank (§6.1)
                assert self.dist is not None
                self.ctx.stop_at_update = self.dist.any(self.ctx.stop_at_update)
            if self.ctx.stop_at_update:
                break
        if last is None:
            raise ValueError(f"the training loader yielded no batch in epoch {epoch}")
        clocked = any(s.schedule is not None and s.schedule.clock == "optimizer_update"
                      for s in self.slots.values())
        if clocked and self.auto_step_schedulers and self.updates_this_epoch == 0:
            warnings.warn(f"epoch {epoch} reported no optimizer update: the update-clock "
                          "schedule did not step (call ctx.report_update() after each "
                          "optimizer.step() in a custom step)", RuntimeWarning, stacklevel=2)
        return last

    def validate(self, epoch: int) -> NNEvaluationDataPoint | None:
        loader = self.params.val_loader
        if loader is None:
            return None
        if self.eval_fn is None:
            return self.model.evaluate(loader, metrics=self.metrics,
                                       extra_metrics=self.params.extra_metrics)
        from nnx._foundation.modes import preserved_state

        ctx = EvalStepContext(model=self.model, val_loader=loader,
                              extra_metrics=self.params.extra_metrics, epoch_idx=epoch,
                              metrics=self.metrics)
        with preserved_state(self.model.net, mode="eval"), torch.no_grad():
            edp = self.eval_fn(ctx)
        if not isinstance(edp, NNEvaluationDataPoint):
            raise TypeError("eval_step_fn must return an NNEvaluationDataPoint")
        return edp

    # -- commit -----------------------------------------------------------------------
    def _checkpoint(self, tag: str, epoch: int, idp: NNIterationDataPoint,
                    monitor_value: float | None = None,
                    streams: dict[str, Any] | None = None, as_last: bool = False) -> int | None:
        """Save ``tag``; ``as_last``: in the commit that just saved LAST, whose training
        state this is, so the two points share its sidecar instead of a second copy."""
        run = self.run
        checkpoint = NNCheckpoint(
            tag=tag, epoch=epoch, run_id=run.id, state_dict=self.model.net.state_dict(),
            model=run.model_params.state(),
            net=None if run.net_params is None else run.net_params.state(),
            train=self.params.state(), idp=idp, named_monitor=self.tracker is not None,
            monitor_value=monitor_value, transforms=self.transforms)
        like = self._saved_last if as_last else None
        state = like[1] if like is not None else self._training_state(epoch, streams)
        position = {"completed_epoch": epoch, "global_step": self.iter_idx,
                    "committed_updates": self.ctx.committed_updates,
                    "planned_n_epochs": self.end_epoch}
        if self.ctx.should_stop:  # a deliberate end before the plan's (an early stop)
            position["stopped"] = True
        checkpoint.save(run.checkpoints_dir / f"{tag}.pt", training_state=state,
                        position=position, like=None if like is None else like[0])
        if tag == "last":
            self._saved_last = (checkpoint, state)
        return checkpoint.generation

    def slot_state(self, slot: OptimizerSlot) -> dict[str, Any]:
        """One optimizer's part of the training state: identity, topology, state, schedule."""
        names = {id(p): n for n, p in self.model.net.named_parameters()}
        return {
            "optimizer_class": type(slot.optimizer).__name__,
            "optimizer_factory": optimizer_factory_state(slot.config),
            "optimizer": slot.optimizer.state_dict(),
            "param_names": [[names.get(id(p), "?") for p in g["params"]]
                            for g in slot.optimizer.param_groups],
            "schedule": None if slot.schedule is None else slot.schedule.state_dict(),
            "updates": slot.updates,
        }

    def _streams(self) -> dict[str, Any]:
        """The random streams a checkpoint restores: RNGs and the loaders' generators."""
        from nnx._foundation.seeding import capture_rng_state

        generators = loader_generators(self.params.train_loader)
        return {"loaders": {seed: gen.get_state() for seed, gen in generators.items()},
                "rng": capture_rng_state()}

    def _training_state(self, epoch: int, streams: dict[str, Any] | None = None
                        ) -> dict[str, Any]:
        streams = self._streams() if streams is None else streams
        state = {
            "epoch": epoch,
            "loop_kind": self.kind,
            "components": collect_states(self.components),
            "loop": {"iter_idx": self.iter_idx, "planned_n_epochs": self.end_epoch,
                     "best_score": None if math.isinf(self.best_score) else self.best_score},
            "loaders": streams["loaders"],
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "precision": self.precision.state(),
            "committed_updates": self.ctx.committed_updates,
            "rng": streams["rng"],
        }
        if self.kind == "model":
            state.update(self.slot_state(self.primary))
        else:
            state["optimizers"] = {name: self.slot_state(slot)
                                   for name, slot in self.slots.items()}
        return state

    def saved_slots(self, state: Mapping[str, Any]) -> dict[str | None, Mapping[str, Any]]:
        """The saved per-optimizer states, keyed like :attr:`slots`."""
        if self.kind == "model":
            return {None: state}
        return dict(state.get("optimizers") or {})

    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        run = self.run
        if not self.is_main:  # under DDP only rank 0 persists; the others keep the score
            if improved and self.tracker is None and value is not None:
                self.best_score = min(value, self.best_score)
            return
        self.commit_started = True  # from here on the run directory is kept (§4.4)
        first_best = not (run.checkpoints_dir / "best.pt").exists()
        if self.tracker is None and (improved or first_best) and value is not None:
            # Before LAST, whose training state carries it: a resume from LAST then
            # judges the next epoch against this one, as the uninterrupted run does.
            self.best_score = min(value, self.best_score)
        self.hist.commit(epoch, idp)
        streams = self._streams()
        try:
            generation = self._checkpoint("last", epoch, idp, streams=streams)
        except BaseException:
            self.hist.rollback(epoch)  # LAST failed: history rolls back to the last epoch
            raise
        # Fingerprinted on the run's last epoch only (cheap, but not free): the final
        # LAST refresh compares against it; without one it always rewrites.
        final = epoch == self.end_epoch - 1 or self.ctx.should_stop or self.ctx.stop_at_update
        self.last_commit = (epoch, idp, streams, self._state_fingerprint() if final else None)
        if self.attempt is not None:
            self.attempt.committed("last", epoch, generation)
        for tag, phase_epoch in self.phases.items():
            if phase_epoch == epoch:
                self._checkpoint(tag, epoch, idp, as_last=True)
        if self.tracker is not None:  # a named monitor decides BEST; never elected to runs/best
            if improved:
                self._checkpoint("best", epoch, idp, monitor_value=value, as_last=True)
            return
        if improved or first_best:
            checkpoint_score = self._checkpoint_score(idp)
            self._checkpoint("best", epoch, idp, as_last=True)
            with file_lock(run.root / ".best.lock"):
                promote_best(run.root, run.id, checkpoint_score)

    def _state_fingerprint(self) -> Any:
        """What LAST's weights and training state are, without copying a tensor: each
        tensor by its storage, shape and in-place version counter, every other value as
        it is. Any in-place write, replaced tensor or changed component state differs."""
        slots = {str(n): (s.optimizer.state_dict(),
                          None if s.schedule is None else s.schedule.state_dict())
                 for n, s in self.slots.items()}
        return _fingerprint((self.model.net.state_dict(), slots, collect_states(self.components),
                             None if self.scaler is None else self.scaler.state_dict()))

    def _run_deferred(self) -> None:
        """The transaction's last step: what callbacks deferred (ctx.defer), in order."""
        ctx = self.ctx
        queued, ctx.deferred = ctx.deferred, []
        for action in queued:
            action(ctx)

    def _final_last(self) -> None:
        """The final LAST refresh; under DDP every rank waits for rank 0's, so none goes on
        to read LAST (a resume in the same process group) while it is being replaced."""
        failure: BaseException | None = None
        try:
            self._refresh_last()
        except BaseException as exc:
            failure = exc
        message = None if self.dist is None else self.dist.broadcast(
            None if failure is None else repr(failure))
        if failure is not None:
            raise failure
        if message is not None:
            raise RuntimeError(f"rank 0 could not write the final LAST of run {self.run.id}: "
                               f"{message}")

    def _refresh_last(self) -> None:
        """After on_train_end: LAST again, same epoch, new generation, so it carries what
        on_train_end changed (§8.4). Its random streams stay the epoch's own, so a resume
        continues exactly as the uninterrupted run would have. Skipped on other DDP ranks,
        before a first commit and after a mid-epoch stop (live weights are never
        relabelled as a committed epoch's, §6.1)."""
        if not self.is_main or self.last_commit is None or self.partial_stop:
            return
        epoch, idp, streams, fingerprint = self.last_commit
        if fingerprint is not None and self._state_fingerprint() == fingerprint:
            return  # on_train_end changed nothing LAST holds: it already is the final LAST
        generation = self._checkpoint("last", epoch, idp, streams=streams)
        if self.attempt is not None:
            self.attempt.committed("last", epoch, generation)

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

    def _parent_attempt(self) -> dict[str, Any] | None:
        if self.resume is None:
            return None
        from nnx.provenance import read_provenance

        source = self.run.root / str(self.resume.status.source_run)
        prov = read_provenance(source) if source.is_dir() else None
        return {"run_id": self.resume.status.source_run,
                "attempt_id": None if prov is None or prov.attempt is None
                else prov.attempt.attempt_id,
                "checkpoint": self.resume.status.source_checkpoint,
                "generation": self.resume.checkpoint.generation}

    def execute(self) -> NNRun:
        completed = False
        try:
            with contextlib.ExitStack() as locks:
                self.reserve(locks)
                try:
                    run = self._fit()
                except BaseException:
                    self._release()  # still under the lease
                    raise
                completed = True
                return run
        finally:
            if self.dist is not None:
                self.dist.close(completed=completed)

    def _release(self) -> None:
        """A run that failed before its first commit leaves nothing behind: its directory
        (run.yaml, metadata.yaml, provenance, journal, logger files) is removed, so the
        corrected retry is not refused as an existing run (§4.4). Only a directory this
        call created, and only while its lease is held; a run that began a commit keeps
        its directory (a failed first LAST leaves a failed attempt)."""
        if self.created and not self.commit_started and self.is_main:
            shutil.rmtree(self.run.path, ignore_errors=True)

    def _begin(self) -> None:  # noqa: B027 - optional: only the Trainer refuses here
        """After the reset hooks ran: a subclass may refuse what they registered."""

    def _fit(self) -> NNRun:
        if self.params.seed is not None:
            from nnx._foundation.seeding import set_seed

            set_seed(self.params.seed)
        ctx, run = self.ctx, self.run
        if self.is_main:
            self.hist: Any = open_history(run, self.journal)
        else:
            from nnx._engine.distributed import MemoryHistory

            self.hist = MemoryHistory(run)
        ctx.idps = self.hist.view
        if self.dist is not None:
            self.ddp_net = self.dist.wrap(self.model.net)
        if self.provenance is not None and self.is_main:
            from nnx.provenance import begin_attempt

            self.attempt = begin_attempt(run.path, self.provenance, parent=self._parent_attempt())
        try:
            for cb in self.callbacks:
                cb.on_train_begin(ctx)
            self._begin()
            if self.dist is not None:  # agree once whether mid-epoch stops need agreeing
                self.agree_stops = self.dist.any(bool(ctx.update_listeners))
            if self.resume is not None:
                apply_resume(self.resume, self)
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
                self.attempt.finish(status, exc, suppress_errors=True)
            raise
        finally:
            self.progress.close()
            end_callbacks(self.callbacks, ctx, full=self._full_history)
        try:
            self._final_last()
            self._run_deferred()  # what on_train_end deferred sees the final LAST
        except BaseException as exc:
            if self.attempt is not None:
                self.attempt.finish("failed", exc, suppress_errors=True)
            raise
        if self.attempt is not None:
            self.attempt.finish("completed")
        if self.is_main and self.verbose is not False:  # verbose=False prints nothing
            print(f"Run saved to {display_path(run.path)}")
        return run

    def _epochs(self) -> None:
        ctx = self.ctx
        for epoch in range(self.start_epoch, self.end_epoch):
            ctx.epoch = epoch
            for cb in self.callbacks:
                cb.on_epoch_begin(ctx)
            last = self.train_epoch(epoch)
            if ctx.stop_at_update and not self.epoch_complete:
                self.hist.discard_epoch(epoch)  # a partial epoch is never committed
                self.partial_stop = True
                return
            try:  # an epoch the NaN guard left without any update is refused, uncommitted
                self.skips.end_epoch(epoch, self.updates_this_epoch)
            except NonFiniteRunError:
                self.hist.discard_epoch(epoch)
                raise
            val_edp = self.validate(epoch)
            if self.dist is not None and self.summary is not None:
                self.dist.reduce_state(_reducible(self.summary))  # sums and counts
            idp = dataclasses.replace(
                last, val_edp=val_edp,
                train_summary=None if self.summary is None else self.summary.result())
            if self.dist is not None:  # rank 0's record decides everywhere
                idp = self.dist.broadcast(idp)
            value, improved, record = self._signal(idp)
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


def _fingerprint(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", value.data_ptr(), tuple(value.shape), str(value.dtype), value._version)
    if isinstance(value, Mapping):
        return tuple((repr(k), _fingerprint(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_fingerprint(v) for v in value)
    return repr(value)


def _announce_epoch(loader: Any, epoch: int) -> None:
    """Tell the loader, or else its sampler (a DistributedSampler), the epoch's index."""
    for owner in (loader, getattr(loader, "sampler", None)):
        set_epoch = getattr(owner, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
            return


def _reducible(summary: Any) -> Any:
    """The part of an epoch summary that holds its sums and counts."""
    return summary.engine.epoch_terms if isinstance(summary, _EngineSummary) else summary


class _EngineSummary:
    """An objective run's whole-epoch training summary: the engine's epoch loss (§6.5)."""

    def __init__(self, engine: UpdateEngine) -> None:
        self.engine = engine

    def result(self) -> NNEvaluationDataPoint:
        return NNEvaluationDataPoint(loss=self.engine.epoch_loss())


class _UpdateCounters:
    """The committed-update and microbatch counters, checkpointed as ``nnx._engine.update_engine``.

    A stateful resume continues them; a weights_only resume starts them at zero.
    """

    def __init__(self, loop: FitLoop) -> None:
        self.loop = loop

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("nnx.update_engine", 1, required=False)

    def component_state(self) -> dict[str, Any]:
        return {"committed_updates": self.loop.ctx.committed_updates,
                "iter_idx": self.loop.iter_idx,
                "optimizer_updates": {"" if n is None else n: s.updates
                                      for n, s in self.loop.slots.items()}}

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.loop.ctx.committed_updates = int(state["committed_updates"])
        self.loop.iter_idx = int(state["iter_idx"])
        for name, count in (state.get("optimizer_updates") or {}).items():
            slot = self.loop.slots.get(None if name == "" else name)
            if slot is not None:
                slot.updates = int(count)


class _MonitorComponent:
    """The named monitor's best value, checkpointed as ``nnx.monitor`` (§6.4)."""

    def __init__(self, tracker: Any) -> None:
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
