"""Experiment plans (spec §20): branch a configuration, validate it purely, probe, fit.

An :class:`ExperimentPlan` holds the pieces of one experiment (net, model and
training params, the data, the seed, the callbacks, the update owner) and
compiles them to the existing loop: ``set_seed`` → factories →
``NNModel(net, model)`` → ``model.train(...)``. There is no third loop and no
model cloning: a fit takes exactly the steps an equally seeded script takes,
so it matches that script on weights, history and callback order.

Every ``with_*`` method returns a new plan; the source is unchanged. The params
objects are immutable and shared; collections are copied into tuples and
read-only mappings. Everything else (loaders, callbacks, step functions, the
objective, components, the provenance manifest) is borrowed: shared by every
branch and fit, never copied or reset. Zero-argument factories give a fit
fresh objects instead.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from nnx._foundation.config_base import frozen_mapping
from nnx._foundation.modes import preserved_state
from nnx._foundation.seeding import seed_streams, set_seed
from nnx._surface.model import NNModel
from nnx._surface.plan_checks import (
    attempt_problem,
    callback_problem,
    data_problem,
    is_factory,
    plan_diagnostics,
    training_params,
)
from nnx._surface.plan_probe import ambient_state_restored
from nnx._surface.plan_types import (
    Diagnostic,
    FitResult,
    PlanData,
    PlanError,
    PlanValidation,
    ProbeResult,
    ResumeRequest,
    split_metrics,
)
from nnx.params.model import NNModelParams
from nnx.params.train import NNTrainParams

__all__ = ["ExperimentPlan", "refuse_multi_rank"]

_KEEP: Any = object()  # "not given": a with_* method keeps the plan's own value


def refuse_multi_rank(what: str) -> None:
    """RuntimeError inside a torch.distributed group of more than one rank (torchrun),
    where every rank would train its own copy into the same runs/."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        raise RuntimeError(
            f"{what} trains in this process and cannot run on each of the "
            f"{dist.get_world_size()} ranks of a process group (each would train its own "
            "copy into the same runs/); to train one model across ranks use "
            "model.train(..., distributed=DDP())")


def _tuple(items: Iterable[Any], what: str) -> tuple[Any, ...]:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise TypeError(f"{what} must be an iterable of items; got {type(items).__name__}")
    return tuple(items)


@dataclass(frozen=True, eq=False)
class ExperimentPlan:
    """One experiment, branched with ``with_*`` and run with :meth:`fit`.

    ``ExperimentPlan(model=NNModelParams(...), train=NNTrainParams(...), net=NNParams(...),
    seed=0)``; the data defaults to ``train``'s loaders and ``data_id`` (``with_data``
    sets it). ``seed`` None takes ``train.seed``; a plan's seed overrides it.
    """

    model: NNModelParams
    train: NNTrainParams
    net: Any = None
    data: PlanData = None  # type: ignore[assignment]  # None: train's loaders and data_id
    seed: int | None = None
    callbacks: tuple[Any, ...] = ()
    callback_factories: tuple[Callable[[], Any], ...] = ()
    train_step_fn: Callable[..., Any] | None = None
    eval_step_fn: Callable[..., Any] | None = None
    objective: Any = None
    components: tuple[Any, ...] = ()
    provenance: Any = None
    batch_adapter: Any = None
    task: Any = None
    resume: ResumeRequest | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.data is None:
            train = self.train
            set_(self, "data", PlanData(*(getattr(train, name, None) for name in (
                "train_loader", "val_loader", "data_id"))))
        if not isinstance(self.data, PlanData):
            raise TypeError(f"data must be a PlanData (use with_data); got "
                            f"{type(self.data).__name__}")
        for name in ("callbacks", "callback_factories", "components"):
            set_(self, name, _tuple(getattr(self, name), name))

    # -- branching: each returns a new plan -----------------------------------------
    def _with(self, **changes: Any) -> ExperimentPlan:
        return dataclasses.replace(self, **changes)

    def with_net(self, net: Any) -> ExperimentPlan:
        return self._with(net=net)

    def with_model(self, model: NNModelParams, *, task: Any = _KEEP) -> ExperimentPlan:
        return self._with(model=model, task=self.task if task is _KEEP else task)

    def with_train(self, train: NNTrainParams) -> ExperimentPlan:
        """Other training params; the plan's data, seed and resume stay the plan's."""
        return self._with(train=train)

    def _with_train(self, **changes: Any) -> ExperimentPlan:
        return self._with(train=dataclasses.replace(self.train, **changes))

    def with_epochs(self, n_epochs: int) -> ExperimentPlan:
        return self._with_train(n_epochs=n_epochs)

    def with_optim(self, optim: Any) -> ExperimentPlan:
        return self._with_train(optim=optim)

    def with_scheduler(self, scheduler: Any) -> ExperimentPlan:
        return self._with_train(scheduler=scheduler)

    def with_metrics(self, metrics: Iterable[Any] = _KEEP, *, monitor: Any = _KEEP
                     ) -> ExperimentPlan:
        """Declared metrics and / or the monitor; the one not given is kept."""
        changes: dict[str, Any] = {}
        if metrics is not _KEEP:
            changes["metrics"] = _tuple(metrics, "metrics")
        if monitor is not _KEEP:
            changes["monitor"] = monitor
        return self._with_train(**changes)

    def with_extra_metrics(self, extra_metrics: Mapping[str, Callable[..., Any]]
                           ) -> ExperimentPlan:
        return self._with_train(extra_metrics=frozen_mapping(extra_metrics))

    def with_data(self, train: Any = _KEEP, *, val: Any = _KEEP, identity: Any = _KEEP
                  ) -> ExperimentPlan:
        """Data sources (loaders or zero-argument factories) and the data identity; what
        is not given is kept (``val=None`` drops validation)."""
        data = self.data
        return self._with(data=PlanData(data.train if train is _KEEP else train,
                                        data.val if val is _KEEP else val,
                                        data.identity if identity is _KEEP else identity))

    def with_seed(self, seed: int) -> ExperimentPlan:
        return self._with(seed=seed)

    def with_callbacks(self, *callbacks: Any) -> ExperimentPlan:
        """Borrowed callbacks (shared by every fit), in order; replaces the plan's."""
        return self._with(callbacks=callbacks)

    def with_callback_factories(self, *factories: Callable[[], Any]) -> ExperimentPlan:
        """Zero-argument factories, each called once per fit, after seeding."""
        return self._with(callback_factories=factories)

    def with_step_fns(self, train: Any = _KEEP, *, eval: Any = _KEEP) -> ExperimentPlan:
        return self._with(train_step_fn=self.train_step_fn if train is _KEEP else train,
                          eval_step_fn=self.eval_step_fn if eval is _KEEP else eval)

    def with_objective(self, objective: Any) -> ExperimentPlan:
        return self._with(objective=objective)

    def with_components(self, *components: Any) -> ExperimentPlan:
        return self._with(components=components)

    def with_provenance(self, provenance: Any) -> ExperimentPlan:
        return self._with(provenance=provenance)

    def with_batch_adapter(self, batch_adapter: Any) -> ExperimentPlan:
        """A registered module's inputs (``NNModel(batch_adapter=...)``)."""
        return self._with(batch_adapter=batch_adapter)

    def resuming(self, run_id: str, checkpoint: str = "last", mode: str | None = None,
                 epochs: str | None = None) -> ExperimentPlan:
        """Warm-restart from ``run_id``'s ``checkpoint`` into a new run recording it as
        ``parent_run_id``; ``mode`` / ``epochs`` set resume_mode / resume_epochs (None:
        the training params' own)."""
        return self._with(resume=ResumeRequest(run_id, checkpoint, mode, epochs))

    def without_resume(self) -> ExperimentPlan:
        return self._with(resume=None)

    # -- checking ---------------------------------------------------------------------
    def validate(self) -> PlanValidation:
        """Every problem, each with its field path; pure (nothing iterated, called, built,
        read or written)."""
        return PlanValidation(plan_diagnostics(self))

    @property
    def effective_seed(self) -> int | None:
        return self.seed if self.seed is not None else getattr(self.train, "seed", None)

    # -- probe --------------------------------------------------------------------------
    def probe(self, batch: Any) -> ProbeResult:
        """Seed, build a temporary model and run ``batch`` through it under no_grad: the
        eval-mode raw output's shape, and the default step's train-mode loss when the batch
        has a target. The global seed state is restored afterwards, on error too."""
        found = [d for d in plan_diagnostics(self) if d.path.split(".")[0].split("[")[0] in
                 ("model", "net", "seed", "batch_adapter")]
        PlanValidation(tuple(found)).raise_for_errors()
        seed = self.effective_seed
        assert seed is not None  # checked above
        cuda = self.model.device().type == "cuda"
        with ambient_state_restored(cuda=cuda):
            seed_streams(seed, cuda=cuda)
            model = self._build_model()
            inputs, target = model.split_batch(batch)
            with (preserved_state(model.net, mode="eval"), torch.no_grad(),
                  model.inference_precision().autocast()):
                shape = tuple(int(d) for d in model.forward_raw(inputs).shape)
            loss = None
            if target is not None and self.train_step_fn is None and self.objective is None:
                with preserved_state(model.net, mode="train"), torch.no_grad():
                    output = model.forward_raw(inputs).float()
                    step = model.task_adapter.training_batch(output, target, model.loss_fn,
                                                             normalize=True)
                    loss = float(step.value) if step.has_targets else None
        return ProbeResult(shape, loss)

    def _build_model(self) -> NNModel:
        return NNModel(self.net, self.model, batch_adapter=self.batch_adapter, task=self.task)

    # -- fit ----------------------------------------------------------------------------
    def fit(self, attempt: str | None = None, *, verbose: bool | None = None) -> FitResult:
        """Validate, ``set_seed``, call each factory once, build ``NNModel(net, model)`` and
        train it into a new run salted ``"plan-attempt:<id>"`` (random unless named)."""
        refuse_multi_rank("ExperimentPlan.fit()")
        found = list(plan_diagnostics(self))
        if attempt is not None:
            problem = attempt_problem(attempt)
            if problem is not None:
                found.append(Diagnostic("attempt", problem))
        PlanValidation(tuple(found)).raise_for_errors()
        attempt_id = secrets.token_hex(8) if attempt is None else attempt
        seed = self.effective_seed
        assert seed is not None  # validated
        set_seed(seed)
        train_loader, val_loader, made = self._made()
        params = training_params(self.train, seed=seed, data=self.data, resume=self.resume,
                                 train_loader=train_loader, val_loader=val_loader)
        for i, callback in enumerate(made):  # a factory-made callback's monitor included
            problem = callback_problem(callback, params)
            if problem is not None:
                raise PlanError((Diagnostic(f"callback_factories[{i}]", problem),))
        model = self._build_model()
        run = model.train(params, train_step_fn=self.train_step_fn, objective=self.objective,
                          eval_step_fn=self.eval_step_fn, callbacks=[*self.callbacks, *made],
                          salt=f"plan-attempt:{attempt_id}", verbose=verbose,
                          components=self.components, provenance=self.provenance)
        metrics = split_metrics(run.epoch_records(), has_val=val_loader is not None)
        return FitResult(model, run, frozen_mapping(metrics), attempt_id)

    def _made(self) -> tuple[Any, Any, list[Any]]:
        """Each factory called once, in order (data, then callbacks); what a data factory
        returns is checked as validate() checks a loader, before a model is built."""
        sources = []
        for path, source, training in (("data.train", self.data.train, True),
                                       ("data.val", self.data.val, False)):
            if source is not None and is_factory(source):
                source = source()
                problem = ("None" if training and source is None else
                           data_problem(source, training=training, field=path))
                if problem is not None:
                    raise PlanError((Diagnostic(path, f"the factory returned {problem}"),))
            sources.append(source)
        made = [factory() for factory in self.callback_factories]
        return sources[0], sources[1], made
