"""What ``ExperimentPlan.validate()`` checks (spec §20), each problem as a Diagnostic.

Pure: nothing here iterates a loader, calls a factory, builds a model, reads
weights or writes a directory. The one object built is the loss module, which
the task check reads (as ``NNModel`` does before it builds the net). A borrowed
callback's ``check_run`` runs on a shallow copy, so the callback is never bound. A
resume's source run is only looked up under ``<cwd>/runs`` (the fit's root), as the fit
would: a source that does not exist is reported, and nothing there is opened.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset

from nnx._contracts.batch_adapters import BatchAdapter
from nnx._contracts.components import is_component
from nnx._engine.control_signal import monitor_tracker
from nnx._engine.evaluation import is_streaming_step, streaming_step_problems
from nnx._engine.loop_support import check_provenance
from nnx._foundation.validation import check_optional_str, check_run_id, check_seed
from nnx._persistence.resume_source import require_source_run
from nnx._persistence.run import DEFAULT_ROOT
from nnx._surface.plan_types import Diagnostic, PlanData, ResumeRequest
from nnx.callbacks.base import Callback
from nnx.metrics import check_metric_inputs
from nnx.models import ModelSpec, RuntimeModule
from nnx.models.registry import resolve_model_factory
from nnx.objectives.ownership import check_update_owner
from nnx.params._loaders import check_loader
from nnx.params.loop import RESUME_MODES
from nnx.params.model import NNModelParams
from nnx.params.train import RESUME_EPOCHS, NNTrainParams
from nnx.tasks.runtime import check_task_object, resolve_task

__all__ = ["attempt_problem", "callback_problem", "data_problem", "is_factory",
           "plan_diagnostics", "takes_no_arguments", "training_params"]

_SINGLE = "it yields single samples, not batches: wrap it in a DataLoader"


def takes_no_arguments(fn: Callable[..., Any]) -> bool:
    """Whether ``fn()`` binds: every parameter has a default or is variadic."""
    try:
        inspect.signature(fn).bind()
    except TypeError:
        return False
    except ValueError:  # no signature (some builtins): cannot tell, trust the caller
        return True
    return True


def is_factory(source: Any) -> bool:
    """A data source that is a zero-or-more-argument callable rather than batches."""
    return callable(source) and not callable(getattr(type(source), "__iter__", None))


def data_problem(source: Any, *, training: bool, field: str) -> str | None:
    """Why ``source`` is not re-iterable batches (None when it is), read from its type."""
    if isinstance(source, (torch.Tensor, np.ndarray)):
        return f"a bare {type(source).__name__}: {_SINGLE}"
    if isinstance(source, Mapping):
        return "a mapping iterates its keys, not batches: pass a DataLoader or a list of batches"
    if callable(getattr(type(source), "__next__", None)):
        return ("a one-shot iterator is exhausted after one epoch: pass a DataLoader, a list "
                "of batches, or a zero-argument factory")
    if isinstance(source, Dataset) and not isinstance(source, IterableDataset):
        return f"a map-style Dataset ({type(source).__name__}): {_SINGLE}"
    try:
        check_loader(field, source, training=training)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


class _Unmade:
    """Stands in, while validating, for validation data a fit will make (a factory's,
    never called here): a callback's ``check_run`` sees that the fit has a val_loader,
    as NNModel.train will (a validation-split monitor is accepted, §20)."""

    def __iter__(self) -> Any:
        raise RuntimeError("ExperimentPlan.validate() never iterates or makes a loader")


_UNMADE = _Unmade()


def _source(out: list[Diagnostic], path: str, source: Any, *, training: bool) -> None:
    if source is None:
        if training:
            out.append(Diagnostic(path, "a plan needs training data: with_data(train=...)"))
        return
    if is_factory(source):
        if not takes_no_arguments(source):
            out.append(Diagnostic(path, "a data factory must take no arguments"))
        return
    problem = data_problem(source, training=training, field=path)
    if problem is not None:
        out.append(Diagnostic(path, problem))


def callback_problem(callback: Any, params: NNTrainParams | None) -> str | None:
    """Why ``callback`` cannot be a callback of the fit (None when it can); a Callback's
    ``check_run`` (its declared monitor) runs on a copy, as NNModel.train would run it."""
    if isinstance(callback, Callback):
        if params is None:
            return None
        try:
            copy.copy(callback).check_run(params)
        except (TypeError, ValueError, LookupError) as exc:
            return str(exc)
        return None
    if not callable(callback):
        return (f"a callback must be a Callback or a legacy fn(idps) callable; got "
                f"{type(callback).__name__}")
    if takes_no_arguments(callback):
        return ("a callable that takes no arguments reads as a factory: pass it to "
                "with_callback_factories(...), or give a legacy fn(idps) callback its one "
                "required parameter")
    try:
        inspect.signature(callback).bind(None)
    except TypeError:
        return "a legacy callback takes exactly one argument (the run's idps)"
    except ValueError:
        pass
    return None


def attempt_problem(attempt: Any) -> str | None:
    """Why ``attempt`` cannot name an attempt (None when it can): folded into the run's
    salt, so a plain name."""
    try:
        check_run_id("attempt", attempt, what="attempt id")
    except ValueError as exc:
        return str(exc)
    return None


def training_params(train: NNTrainParams, *, seed: int | None, data: PlanData,
                    resume: ResumeRequest | None, train_loader: Any = None,
                    val_loader: Any = None) -> NNTrainParams:
    """The NNTrainParams a fit passes to ``model.train``: the plan's seed, data identity and
    resume over ``train``, with the given loaders (while validating: None, or a stand-in
    for the validation data the fit will have, so a callback's check_run sees it)."""
    changes: dict[str, Any] = {"train_loader": train_loader, "val_loader": val_loader,
                               "seed": train.seed if seed is None else seed,
                               "data_id": data.identity}
    if resume is not None:
        changes.update(
            resume_from_run_id=resume.run_id, resume_from_checkpoint=resume.checkpoint,
            resume_mode=train.resume_mode if resume.mode is None else resume.mode,
            resume_epochs=train.resume_epochs if resume.epochs is None else resume.epochs)
    return dataclasses.replace(train, **changes)


def _resume(out: list[Diagnostic], train: NNTrainParams, resume: ResumeRequest | None) -> bool:
    """The resume request and the horizon it implies; True when it is sound."""
    before = len(out)
    if resume is not None:
        for name, what in (("run_id", "run id"), ("checkpoint", "checkpoint tag")):
            try:
                check_run_id(f"resume.{name}", getattr(resume, name), what=what)
            except ValueError as exc:
                out.append(Diagnostic(f"resume.{name}", str(exc)))
        if len(out) == before:  # a fit writes under <cwd>/runs: its source must be there
            try:
                require_source_run(Path(DEFAULT_ROOT), resume.run_id)
            except FileNotFoundError as exc:
                out.append(Diagnostic("resume.run_id", str(exc)))
        if resume.mode is not None and resume.mode not in RESUME_MODES:
            out.append(Diagnostic("resume.mode", f"must be one of {RESUME_MODES}; "
                                                 f"got {resume.mode!r}"))
        if resume.epochs is not None and resume.epochs not in RESUME_EPOCHS:
            out.append(Diagnostic("resume.epochs", f"must be one of {RESUME_EPOCHS}; "
                                                   f"got {resume.epochs!r}"))
        for own in ("parent_run_id", "resume_from_run_id"):
            if getattr(train, own) is not None:
                out.append(Diagnostic("resume", f"resuming({resume.run_id!r}) conflicts with "
                                                f"train.{own} ({getattr(train, own)!r}): a "
                                                "plan records its lineage through resuming()"))
    mode = train.resume_mode if resume is None or resume.mode is None else resume.mode
    epochs = train.resume_epochs if resume is None or resume.epochs is None else resume.epochs
    if epochs == "planned":
        set_by_plan = resume is not None and resume.epochs is not None
        where = "resume.epochs" if set_by_plan else "train.resume_epochs"
        if resume is None and train.resume_from_run_id is None:
            out.append(Diagnostic(where, "a 'planned' horizon needs a run to resume: "
                                         "resuming(run_id, ...)"))
        elif mode == "weights_only":
            if not set_by_plan and resume is not None and resume.mode is not None:
                where = "resume.mode"
            out.append(Diagnostic(where, "a 'planned' horizon continues the source's plan and "
                                         "needs a stateful resume, not 'weights_only'"))
    return len(out) == before


def _model(out: list[Diagnostic], net: Any, model: Any, task: Any) -> Any:
    """The net / model / task checks with no model built; the task's per-batch machinery
    (its adapter), or None."""
    if not isinstance(model, NNModelParams):
        out.append(Diagnostic("model", f"must be an NNModelParams; got {type(model).__name__}"))
        return None
    desc = model.net
    if isinstance(desc, RuntimeModule):
        out.append(Diagnostic("model.net", "a runtime module cannot be rebuilt by a plan, which "
                                           "builds its own model per fit: register a factory "
                                           "and name it with a ModelSpec"))
    elif isinstance(desc, ModelSpec):
        if net is not None:
            out.append(Diagnostic("net", f"a registered model ({desc.label}) takes no net "
                                         "params; its config lives in the ModelSpec"))
        try:
            resolve_model_factory(desc)
        except LookupError as exc:
            out.append(Diagnostic("model.net", str(exc)))
    elif net is None:
        out.append(Diagnostic("net", f"Nets.{desc.name} needs net params: with_net(...)"))
    elif not isinstance(net, desc.params_class):
        out.append(Diagnostic("net", f"Nets.{desc.name} takes {desc.params_class.__name__}; "
                                     f"got {type(net).__name__}"))
    elif model.task is not None and getattr(net, "output_dim", None) not in (
            None, model.task.num_outputs):
        out.append(Diagnostic("net", f"the {model.task.kind} task declares "
                                     f"{model.task.num_outputs} outputs but net.output_dim is "
                                     f"{getattr(net, 'output_dim', None)}"))
    try:
        check_task_object(task, model.task)
        return resolve_task(task, model.task, model.loss()).batch_ops
    except (TypeError, ValueError) as exc:
        out.append(Diagnostic("model", str(exc)))
        return None


def plan_diagnostics(plan: Any) -> tuple[Diagnostic, ...]:
    """Every problem of ``plan`` (an ExperimentPlan), in field order."""
    out: list[Diagnostic] = []
    adapter = _model(out, plan.net, plan.model, plan.task)
    train = plan.train if isinstance(plan.train, NNTrainParams) else None
    if train is None:
        out.append(Diagnostic("train", f"must be an NNTrainParams; got "
                                       f"{type(plan.train).__name__}"))
    _source(out, "data.train", plan.data.train, training=True)
    _source(out, "data.val", plan.data.val, training=False)
    data = plan.data
    try:
        check_optional_str("data.identity", data.identity)
    except ValueError as exc:
        out.append(Diagnostic("data.identity", str(exc)))
        data = PlanData(data.train, data.val, None)  # reported once, not again under train
    seed = plan.seed if plan.seed is not None else None if train is None else train.seed
    if seed is None:
        out.append(Diagnostic("seed", "a plan needs a seed: with_seed(s) or "
                                      "NNTrainParams(seed=s)"))
    else:
        try:
            check_seed("seed", seed)
        except ValueError as exc:
            out.append(Diagnostic("seed", str(exc)))
            seed = None
    params = None
    if train is not None:
        params = _train(out, train, plan, adapter, seed, data)
    for i, callback in enumerate(plan.callbacks):
        problem = callback_problem(callback, params)
        if problem is not None:
            out.append(Diagnostic(f"callbacks[{i}]", problem))
    for i, factory in enumerate(plan.callback_factories):
        if not callable(factory) or not takes_no_arguments(factory):
            out.append(Diagnostic(f"callback_factories[{i}]", "a callback factory must be "
                                                              "callable with no arguments"))
    _owners(out, plan)
    return tuple(out)


def _train(out: list[Diagnostic], train: NNTrainParams, plan: Any, adapter: Any,
           seed: int | None, data: PlanData) -> NNTrainParams | None:
    if train.overwrite_existing:
        out.append(Diagnostic("train.overwrite_existing", "a plan never overwrites a run: each "
                                                          "fit is a new attempt with its own id"))
    for i, spec in enumerate(train.metrics):
        if adapter is not None:
            try:
                check_metric_inputs((spec,), adapter, task=plan.task)
            except (TypeError, ValueError, LookupError) as exc:
                out.append(Diagnostic(f"train.metrics[{i}]", str(exc)))
    monitor = train.monitor
    if monitor is not None and monitor.split == "val" and plan.data.val is None:
        out.append(Diagnostic("train.monitor", "a validation-split MonitorSpec needs validation "
                                               "data: with_data(val=...)"))
    else:
        try:  # the run's monitor as the loop reads it (a custom step and split "train")
            monitor_tracker(SimpleNamespace(monitor=monitor, val_loader=plan.data.val),
                            train.metrics, custom_step=plan.train_step_fn is not None or
                            plan.objective is not None)
        except (TypeError, ValueError) as exc:
            out.append(Diagnostic("train.monitor", str(exc)))
    resume = plan.resume if _resume(out, train, plan.resume) else None
    val = plan.data.val
    if val is not None and (is_factory(val) or data_problem(val, training=False,
                                                            field="data.val") is not None):
        val = _UNMADE  # the factory is never called here; a bad source is reported above
    try:  # what the callbacks' check_run sees (a broken resume reported above is left out)
        return training_params(train, seed=seed, data=data, resume=resume, val_loader=val)
    except (TypeError, ValueError) as exc:
        out.append(Diagnostic("train", str(exc)))
        return None


def _owners(out: list[Diagnostic], plan: Any) -> None:
    if plan.train_step_fn is not None and not callable(plan.train_step_fn):
        out.append(Diagnostic("train_step_fn", "must be callable"))
    if plan.eval_step_fn is not None and not callable(plan.eval_step_fn):
        out.append(Diagnostic("eval_step_fn", "must be callable"))
    try:
        check_update_owner(plan.train_step_fn, plan.objective, step_name="train_step_fn")
    except (TypeError, ValueError) as exc:
        out.append(Diagnostic("objective", str(exc)))
    for i, component in enumerate(plan.components):
        if not is_component(component):
            out.append(Diagnostic(f"components[{i}]", f"{type(component).__name__} does not "
                                                      "implement StatefulComponent"))
    try:
        check_provenance(plan.provenance)
    except TypeError as exc:
        out.append(Diagnostic("provenance", str(exc)))
    if plan.batch_adapter is not None and not isinstance(plan.batch_adapter, BatchAdapter):
        out.append(Diagnostic("batch_adapter", f"must be a BatchAdapter; got "
                                               f"{type(plan.batch_adapter).__name__}"))
    train = plan.train if isinstance(plan.train, NNTrainParams) else None
    if train is not None and is_streaming_step(plan.eval_step_fn):
        try:  # what streaming_eval_step refuses, with the paths §21 names
            problems = streaming_step_problems(train.extra_metrics, train.metrics)
        except (KeyError, LookupError, ValueError):
            problems = []  # an unknown metric is reported at its own path above
        out += [Diagnostic(path, message) for path, message in problems]
