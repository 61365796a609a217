"""The supervised training loop behind ``NNModel.train`` (spec §1 layer 5, §4, §5, §6).

Order of business: every check and every build (optimizer, schedule,
precision, metrics) happens before the run directory is reserved, so a
refused call leaves nothing on disk. Then, per epoch: batches through the
step function in accumulation windows, validation, the control signal,
the epoch-clock schedule, the commit (history → LAST → FIRST/Q1–Q3 → BEST →
runs/best), and the callbacks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from nnx._atomic import atomic_write_text
from nnx._locking import LockBusyError, file_lock
from nnx.best import current_best, elect_best
from nnx.callbacks.base import Callback, CallbackContext
from nnx.checkpoint import NNCheckpoint
from nnx.components import ComponentSpec, collect_states, discover_components
from nnx.optimizer_factories import optimizer_factory_state
from nnx.optimizers import build_optimizer
from nnx.params.train import NNTrainParams
from nnx.precision import resolve_precision
from nnx.progress import Progress
from nnx.records import NNEvaluationDataPoint, NNIterationDataPoint, signal_walk
from nnx.resume import apply_resume, check_resume, loader_generators, plan_resume
from nnx.run import NNRun, display_path
from nnx.run_history import open_history
from nnx.schedule import ScheduleDriver, planned_updates_per_epoch
from nnx.steps import EvalStepContext, TrainStepContext, UpdateWindow, default_train_step

if TYPE_CHECKING:
    from nnx.model import NNModel

__all__ = ["RunExistsError", "RunLeaseError", "phase_epochs", "train_model"]

StepFn = Callable[[TrainStepContext], NNEvaluationDataPoint]
EvalFn = Callable[[EvalStepContext], NNEvaluationDataPoint]


class RunExistsError(FileExistsError):
    """The configuration's run directory already exists and overwriting was not asked for."""


class RunLeaseError(RuntimeError):
    """Another process holds this run's lease: it is training the same run id now."""


def phase_epochs(n_epochs: int) -> dict[str, int]:
    """FIRST at epoch 0 and Q1–Q3 on the epoch that completes k/4 of the run (rounded
    down: epoch ``k * n_epochs // 4 - 1``); a quartile that lands on FIRST, LAST or an
    earlier quartile is not written, so all three need n_epochs >= 8 (spec §4)."""
    phases = {"first": 0}
    taken = {0, n_epochs - 1}
    for k in (1, 2, 3):
        epoch = k * n_epochs // 4 - 1
        if epoch >= 0 and epoch not in taken:
            phases[f"q{k}"] = epoch
            taken.add(epoch)
    return phases


class _FunctionCallback(Callback):
    """A plain function callback receives the full history at each epoch's end."""

    def __init__(self, fn: Callable[[Sequence[NNIterationDataPoint]], Any]) -> None:
        self.fn = fn

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        self.fn(ctx.idps)


def _callbacks(items: Iterable[Any]) -> list[Callback]:
    out: list[Callback] = []
    for i, cb in enumerate(items):
        if isinstance(cb, Callback):
            out.append(cb)
        elif callable(cb):
            out.append(_FunctionCallback(cb))
        else:
            raise TypeError(f"callbacks[{i}] must be a Callback or a callable; "
                            f"got {type(cb).__name__}")
    return out


def _with_lookahead(loader: Iterable[Any]) -> Iterator[tuple[Any, bool]]:
    """(batch, is_last) pairs, so a window can close at the epoch's end without len()."""
    iterator = iter(loader)
    try:
        current = next(iterator)
    except StopIteration:
        return
    for following in iterator:
        yield current, False
        current = following
    yield current, True


def _batch_size(batch: Any) -> int:
    """The sample count of a batch: the leading size of its first tensor (1 if none)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for item in batch:
            if isinstance(item, torch.Tensor) and item.ndim:
                return int(item.shape[0])
    return 1


class _RecordSummary:
    """The whole-epoch training summary of a custom step's records: loss and error each
    averaged over the records that carry them, weighted by the record's count or else
    the batch's sample count (spec §6.4)."""

    def __init__(self) -> None:
        self.sums = {"loss": [0.0, 0.0], "error": [0.0, 0.0]}

    def update(self, edp: NNEvaluationDataPoint, batch: Any) -> None:
        weight = float(edp.count if edp.count is not None else _batch_size(batch))
        if weight <= 0:
            return
        for name, acc in self.sums.items():
            value = getattr(edp, name)
            if value is not None:
                acc[0] += weight * value
                acc[1] += weight

    def result(self) -> NNEvaluationDataPoint:
        def mean(name: str) -> float | None:
            total, weight = self.sums[name]
            return total / weight if weight else None

        return NNEvaluationDataPoint(loss=mean("loss"), error=mean("error"))


class _Loop:
    def __init__(self, model: NNModel, params: NNTrainParams, *, step_fn: StepFn | None,
                 eval_fn: EvalFn | None, callbacks: Sequence[Any], salt: str | None,
                 verbose: bool | None, root: str, components: Sequence[Any] = (),
                 history: Any = None, provenance: Any = None) -> None:
        if not isinstance(params, NNTrainParams):
            raise TypeError(f"NNModel.train needs an NNTrainParams; got {type(params).__name__}")
        if params.train_loader is None:
            raise ValueError("NNTrainParams.train_loader is required to train")
        for name, fn in (("train_step_fn", step_fn), ("eval_step_fn", eval_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable")
        self.model, self.params = model, params
        self.step_fn: StepFn = step_fn or default_train_step
        self.custom_step = step_fn is not None and step_fn is not default_train_step
        self.eval_fn = eval_fn
        self.callbacks = _callbacks(callbacks)
        for callback in self.callbacks:
            callback.check_run(params)
        self.journal = _check_history(history, self.callbacks)
        self.provenance = _check_provenance(provenance)
        self.attempt: Any = None
        model.task_adapter.check_loss(model.loss_fn)
        self.metrics = params.metrics
        self.monitor = params.monitor
        self._check_declarations()
        self.run = NNRun(model_params=model.params, net_params=model.net_params,
                         train_params=params, salt=salt, root=root)
        # Builds that can fail happen before the run is reserved.
        self.optimizer = build_optimizer(model.net, params.optim)
        self.precision = resolve_precision(model.params, model.device)
        self.scaler = self.precision.make_scaler()
        self.schedule = None
        if params.scheduler is not None:
            per_epoch = None if self.custom_step else planned_updates_per_epoch(
                params.train_loader, params.optim.accumulate_grad_batches)
            self.schedule = ScheduleDriver(params.scheduler, self.optimizer, params.n_epochs,
                                           updates_per_epoch=per_epoch,
                                           plateau_rule=self._plateau_rule())
        self.components = discover_components(
            [*self.callbacks, self.step_fn, *self._own_components()], components)
        self.resume = plan_resume(params, self.run.root)
        if self.resume is not None:
            check_resume(self.resume, self)
        self.start_epoch = 0 if self.resume is None else self.resume.start_epoch
        self.end_epoch = params.n_epochs if self.resume is None else self.resume.end_epoch
        self.progress = Progress(self.end_epoch - self.start_epoch, params.train_loader,
                                 verbose=verbose)
        self.ctx = CallbackContext(model=model, run=self.run, optimizer=self.optimizer,
                                   scheduler=self.schedule)
        self.iter_idx = 0
        self.epoch_complete = False
        self.summary: Any = None
        self.best_score = math.inf
        self.phases = self._phases()

    def _phases(self) -> dict[str, int]:
        """Phase epochs: the plan's own on a fresh or planned run, this session's otherwise."""
        params = self.params
        if not params.save_phase_checkpoints:
            return {}
        if self.resume is None or params.resume_epochs == "planned":
            return phase_epochs(params.n_epochs)
        return {tag: self.start_epoch + e for tag, e in phase_epochs(params.n_epochs).items()}

    def _own_components(self) -> list[Any]:
        own: list[Any] = [_UpdateCounters(self)]
        return own if self.tracker is None else [*own, _MonitorComponent(self.tracker)]

    def _check_declarations(self) -> None:
        from nnx.metrics import check_metric_inputs, metric_modes
        from nnx.monitors import MonitorTracker

        check_metric_inputs(self.metrics, self.model.task_adapter)
        self.tracker = None
        spec = self.monitor
        if spec is None:
            return
        if spec.split == "val" and self.params.val_loader is None:
            raise ValueError("a validation-split MonitorSpec needs NNTrainParams.val_loader")
        if spec.split == "train" and spec.metric not in ("loss", "error") and self.custom_step:
            raise ValueError(f"MonitorSpec(metric={spec.metric!r}, split='train') needs the "
                             "default training step: a custom step records no declared metric")
        self.direction = spec.direction(metric_modes(self.metrics))
        self.tracker = MonitorTracker(spec, self.direction)

    def _plateau_rule(self) -> tuple[str, float, str] | None:
        """With a named monitor, ReduceLROnPlateau decides exactly as the monitor does."""
        if self.monitor is None:
            return None
        return self.direction, float(self.monitor.min_delta), "abs"

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
        """Take the run's lease for the whole fit, then admit it (lease → admission → best)."""
        root, path = self.run.root, self.run.path
        root.mkdir(parents=True, exist_ok=True)
        try:
            locks.enter_context(file_lock(root / ".leases" / f"{self.run.id}.lock",
                                          blocking=False))
        except LockBusyError:
            raise RunLeaseError(f"run {self.run.id} is being trained by another process; "
                                "wait for it, or train another configuration") from None
        with file_lock(root / ".admission.lock"):
            if path.exists():
                if not self.params.overwrite_existing:
                    raise RunExistsError(
                        f"run {self.run.id} already exists at {display_path(path)}; pass a "
                        "salt=... for a separate record of the same configuration, or "
                        "overwrite_existing=True to replace it")
                # Overwrite: hand runs/best on first, then remove the artifacts.
                with file_lock(root / ".best.lock"):
                    if current_best(root) == self.run.id:
                        elect_best(root, exclude=self.run.id)
                shutil.rmtree(path)
            path.mkdir()
            (path / "checkpoints").mkdir()
        try:
            atomic_write_text(path / ".history-committed-by-last", "")
            self.run.save_config()
        except BaseException:
            # Nothing of the run exists yet: release the reservation so it can be retried.
            shutil.rmtree(path, ignore_errors=True)
            raise

    # -- one epoch --------------------------------------------------------------------
    def _report_update(self) -> None:
        self.ctx.committed_updates += 1
        self.updates_this_epoch += 1
        if self.schedule is not None:
            self.schedule.on_update()
        for listener in list(self.ctx.update_listeners):
            listener(self.ctx)

    def _lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def train_epoch(self, epoch: int) -> NNIterationDataPoint:
        net, params = self.model.net, self.params
        set_epoch = getattr(params.train_loader, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        net.train()
        accumulate = params.optim.accumulate_grad_batches
        window = UpdateWindow(size=accumulate)
        declared = bool(self.metrics) or self.monitor is not None
        summary = self.model.task_adapter.accumulator(metrics=self.metrics) if (
            declared and not self.custom_step) else None
        # A custom step's records are summarized as they come back (spec §6.4).
        self.summary = summary if not (declared and self.custom_step) else _RecordSummary()
        last: NNIterationDataPoint | None = None
        self.updates_this_epoch = 0
        for batch_idx, (batch, is_last) in enumerate(_with_lookahead(params.train_loader)):
            window.closes = is_last or window.position + 1 == accumulate
            ctx = TrainStepContext(
                model=self.model, batch=batch, batch_idx=batch_idx, epoch=epoch,
                optimizer=self.optimizer, precision=self.precision, scaler=self.scaler,
                grad_clip_norm=params.optim.grad_clip_norm, accumulate_grad_batches=accumulate,
                window=window, _on_update=self._report_update, summary=summary)
            edp = self.step_fn(ctx)
            if not isinstance(edp, NNEvaluationDataPoint):
                raise TypeError(f"the train step must return an NNEvaluationDataPoint; got "
                                f"{type(edp).__name__}")
            if isinstance(self.summary, _RecordSummary):
                self.summary.update(edp, batch)
            if window.closes:
                window = UpdateWindow(size=accumulate)
            else:
                window.position += 1
            idp = NNIterationDataPoint(epoch=epoch, iter_idx=self.iter_idx, batch_idx=batch_idx,
                                       train_edp=edp, lr=self._lr(),
                                       update_count=self.ctx.committed_updates)
            self.iter_idx += 1
            self.hist.append(idp)
            last = idp
            self.progress.batch(epoch, edp.loss)
            self.epoch_complete = is_last
            if self.ctx.stop_at_update:
                break
        if last is None:
            raise ValueError(f"the training loader yielded no batch in epoch {epoch}")
        if (self.schedule is not None and self.schedule.clock == "optimizer_update"
                and self.updates_this_epoch == 0):
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
        from nnx.modes import preserved_state

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
                    monitor_value: float | None = None) -> int | None:
        run = self.run
        checkpoint = NNCheckpoint(
            tag=tag, epoch=epoch, run_id=run.id, state_dict=self.model.net.state_dict(),
            model=run.model_params.state(),
            net=None if run.net_params is None else run.net_params.state(),
            train=self.params.state(), idp=idp, named_monitor=self.tracker is not None,
            monitor_value=monitor_value)
        state = self._training_state(epoch)
        position = {"completed_epoch": epoch, "global_step": self.iter_idx,
                    "committed_updates": self.ctx.committed_updates,
                    "planned_n_epochs": self.end_epoch}
        checkpoint.save(run.checkpoints_dir / f"{tag}.pt", training_state=state,
                        position=position)
        return checkpoint.generation

    def _training_state(self, epoch: int) -> dict[str, Any]:
        from nnx.seeding import capture_rng_state

        generators = loader_generators(self.params.train_loader)
        return {
            "epoch": epoch,
            "optimizer_class": type(self.optimizer).__name__,
            "optimizer_factory": optimizer_factory_state(self.params.optim),
            "optimizer": self.optimizer.state_dict(),
            "components": collect_states(self.components),
            "loop": {"iter_idx": self.iter_idx, "planned_n_epochs": self.end_epoch,
                     "best_score": None if math.isinf(self.best_score) else self.best_score},
            "loaders": {seed: gen.get_state() for seed, gen in generators.items()},
            "schedule": None if self.schedule is None else self.schedule.state_dict(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "precision": self.precision.state(),
            "committed_updates": self.ctx.committed_updates,
            "rng": capture_rng_state(),
        }

    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        run = self.run
        self.hist.commit(epoch, idp)
        try:
            generation = self._checkpoint("last", epoch, idp)
        except BaseException:
            self.hist.rollback(epoch)  # LAST failed: history rolls back to the last epoch
            raise
        if self.attempt is not None:
            self.attempt.committed("last", epoch, generation)
        for tag, phase_epoch in self.phases.items():
            if phase_epoch == epoch:
                self._checkpoint(tag, epoch, idp)
        if self.tracker is not None:  # a named monitor decides BEST; never elected to runs/best
            if improved:
                self._checkpoint("best", epoch, idp, monitor_value=value)
            return
        first_best = not (run.checkpoints_dir / "best.pt").exists()
        if improved or first_best:
            if value is not None:
                self.best_score = min(value, self.best_score)
            self._checkpoint("best", epoch, idp)
            with file_lock(run.root / ".best.lock"):
                elect_best(run.root)

    # -- the run ----------------------------------------------------------------------
    def _end(self, ctx: CallbackContext) -> None:
        _end_callbacks(self.callbacks, ctx, full=self._full_history)

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
                full = self.hist.full() if full is None else full
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
        with contextlib.ExitStack() as locks:
            self.reserve(locks)
            return self._fit()

    def _fit(self) -> NNRun:
        if self.params.seed is not None:
            from nnx.seeding import set_seed

            set_seed(self.params.seed)
        ctx, run = self.ctx, self.run
        self.hist = open_history(run, self.journal)
        ctx.idps = self.hist.view
        if self.provenance is not None:
            from nnx.provenance import begin_attempt

            self.attempt = begin_attempt(run.path, self.provenance, parent=self._parent_attempt())
        for cb in self.callbacks:
            cb.on_train_begin(ctx)
        if self.resume is not None:
            apply_resume(self.resume, self)
            run.resume_status = self.resume.status
            run.metadata["resume"] = self.resume.status.state()
            run.save_config()
        try:
            for epoch in range(self.start_epoch, self.end_epoch):
                ctx.epoch = epoch
                for cb in self.callbacks:
                    cb.on_epoch_begin(ctx)
                last = self.train_epoch(epoch)
                if ctx.stop_at_update and not self.epoch_complete:
                    self.hist.discard_epoch(epoch)  # a partial epoch is never committed
                    break
                val_edp = self.validate(epoch)
                idp = dataclasses.replace(
                    last, val_edp=val_edp,
                    train_summary=None if self.summary is None else self.summary.result())
                value, improved, record = self._signal(idp)
                if record is not None:
                    idp = dataclasses.replace(idp, selection=record.state())
                self.hist.replace_last(idp)
                if self.schedule is not None:
                    self.schedule.on_epoch_end(value)
                self.commit(epoch, idp, improved=improved, value=value)
                ctx.idp = idp
                self.progress.epoch_done(epoch, idp)
                self._dispatch("on_epoch_end")
                if ctx.should_stop or ctx.stop_at_update:
                    break
        except BaseException as exc:
            # on_train_end still runs so loggers close their files; ctx.error says why.
            ctx.error = exc
            if self.attempt is not None:
                status = "cancelled" if isinstance(exc, KeyboardInterrupt) else "failed"
                self.attempt.finish(status, exc, suppress_errors=True)
            raise
        finally:
            self.progress.close()
            self._end(ctx)
        if self.attempt is not None:
            self.attempt.finish("completed")
        print(f"Run saved to {display_path(run.path)}")
        return run


class _UpdateCounters:
    """The committed-update and microbatch counters, checkpointed as ``nnx.update_engine``.

    A stateful resume continues them; a weights_only resume starts them at zero.
    """

    def __init__(self, loop: _Loop) -> None:
        self.loop = loop

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("nnx.update_engine", 1, required=False)

    def component_state(self) -> dict[str, Any]:
        return {"committed_updates": self.loop.ctx.committed_updates,
                "iter_idx": self.loop.iter_idx}

    def load_component_state(self, state: dict[str, Any], *, version: int) -> None:
        self.loop.ctx.committed_updates = int(state["committed_updates"])
        self.loop.iter_idx = int(state["iter_idx"])


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


def _end_callbacks(callbacks: Sequence[Callback], ctx: CallbackContext,
                   full: Callable[[], Any]) -> None:
    window = ctx.idps
    for cb in callbacks:
        try:
            if getattr(cb, "history_access", "window") == "full":
                ctx.idps = full()
            cb.on_train_end(ctx)
        except Exception:
            if ctx.error is None:
                raise  # after a failure, a callback's own error must not mask the first one
        finally:
            ctx.idps = window


def _check_history(history: Any, callbacks: Sequence[Callback]) -> Any:
    """Refuse, before any run exists, a journal the callbacks cannot live with (§4.5)."""
    if history is None:
        return None
    from nnx.history import HistoryJournal

    if not isinstance(history, HistoryJournal):
        raise TypeError(f"history must be a HistoryJournal; got {type(history).__name__}")
    for i, cb in enumerate(callbacks):
        access = getattr(cb, "history_access", "window")
        if isinstance(cb, _FunctionCallback):
            raise ValueError(f"callbacks[{i}] is a plain function, which receives the full "
                             "history list by contract; with a HistoryJournal use a Callback "
                             "with history_access = 'full'")
        if access not in ("window", "full"):
            raise ValueError(f"callbacks[{i}].history_access must be 'window' or 'full'; "
                             f"got {access!r}")
    return history


def _check_provenance(provenance: Any) -> Any:
    if provenance is None:
        return None
    from nnx.provenance import ExperimentManifest

    if not isinstance(provenance, ExperimentManifest):
        raise TypeError(f"provenance must be an ExperimentManifest; got "
                        f"{type(provenance).__name__}")
    return provenance


def train_model(model: NNModel, params: NNTrainParams, *, train_step_fn: StepFn | None = None,
                eval_step_fn: EvalFn | None = None, callbacks: Sequence[Any] = (),
                salt: str | None = None, verbose: bool | None = None,
                root: str = "runs", components: Sequence[Any] = (), history: Any = None,
                provenance: Any = None) -> NNRun:
    loop = _Loop(model, params, step_fn=train_step_fn, eval_fn=eval_step_fn,
                 callbacks=callbacks, salt=salt, verbose=verbose, root=root,
                 components=components, history=history, provenance=provenance)
    return loop.execute()
