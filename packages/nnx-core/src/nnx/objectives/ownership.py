"""Who owns a run's updates (spec §6.5): exactly one of a step function or an objective.

These checks run before any callback, loader read or parameter change, and
before any run directory is reserved.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch
from torch import nn

from nnx.objectives._core import Objective

__all__ = ["check_precision_owner", "check_step_model", "check_strict_ownership",
           "check_update_owner",
           "full_precision_only", "imperative_step", "is_full_precision_only",
           "is_imperative_step"]

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__nnx_imperative_step__"
_FULL_PRECISION = "__nnx_full_precision_only__"
_SHOWN = 5  # how many shared parameter names a refusal lists before eliding the rest


def imperative_step(fn: F) -> F:
    """Mark a step function that steps the optimizer itself, so passing it as an
    objective is refused (the engine would step it twice)."""
    setattr(fn, _MARK, True)
    return fn


def is_imperative_step(fn: Any) -> bool:
    return bool(getattr(fn, _MARK, False))


def full_precision_only(fn: F) -> F:
    """Mark a step function that trains in full precision, one microbatch per update
    (one built on ``nnx._step_helpers.finalize_step``), so a run whose precision
    resolves to FP16 or BF16, or that accumulates gradients, refuses it before any run
    is reserved (§6.1)."""
    setattr(fn, _FULL_PRECISION, True)
    return fn


def is_full_precision_only(fn: Any) -> bool:
    return bool(getattr(fn, _FULL_PRECISION, False))


def check_precision_owner(step_fn: Any, precision: Any, *, step_name: str,
                          accumulate: int = 1) -> None:
    """Refuse a full-precision-only step under a reduced resolved precision or with
    gradient accumulation: finalize_step would refuse either at the first batch, after
    the run was reserved and the step had drawn from the RNG streams."""
    if step_fn is None or not is_full_precision_only(step_fn):
        return
    if precision.is_reduced:
        raise ValueError(f"{step_name} {_name(step_fn)} is full-precision-only, but the run's "
                         f"precision resolves to {precision.policy.name}: set "
                         "NNModelParams.precision=FP32 (or drop mixed_precision), or train its "
                         "objective counterpart, whose shared update engine applies autocast "
                         "and the FP16 scaler")
    if accumulate != 1:
        raise ValueError(f"{step_name} {_name(step_fn)} steps the optimizer once per batch and "
                         f"cannot accumulate: accumulate_grad_batches={accumulate}; set it to "
                         "1, or train its objective counterpart, whose shared update engine "
                         "accumulates exactly")


def check_step_model(step_fn: Any, model: Any) -> None:
    """Call a step function's own ``check_model(model)`` hook, if it defines one.

    NNModel.train calls it first thing in the build, before the optimizer is built
    and before any run is reserved, so a step that cannot train this model (a
    distillation step whose teacher is the student) refuses before anything changes
    and before a later check could fail on the step's own side effects.
    """
    check = getattr(step_fn, "check_model", None)
    if step_fn is not None and callable(check):
        check(model)


def _hidden_objective(fn: Any) -> bool:
    """A lambda, closure or functools.partial around an Objective hides its hooks."""
    if isinstance(fn, functools.partial):
        return any(isinstance(x, Objective) for x in (fn.func, *fn.args, *fn.keywords.values()))
    if isinstance(getattr(fn, "__wrapped__", None), Objective):
        return True
    cells = getattr(fn, "__closure__", None) or ()
    for cell in cells:
        try:
            if isinstance(cell.cell_contents, Objective):
                return True
        except ValueError:  # an empty cell
            continue
    return False


def check_update_owner(step_fn: Any, objective: Any, *, step_name: str) -> None:
    """Refuse two update owners, an imperative step as the objective, an objective as
    the step function, and a wrapper hiding an objective."""
    if step_fn is not None and objective is not None:
        raise ValueError(f"a run has exactly one update owner: pass {step_name} or "
                         "objective=, not both")
    if step_fn is not None and (isinstance(step_fn, Objective) or _hidden_objective(step_fn)):
        raise TypeError(f"{step_name} got an objective: pass it as objective=... so the shared "
                        "update engine owns the update")
    if objective is None:
        return
    if is_imperative_step(objective):
        raise TypeError(f"objective= got an imperative step ({_name(objective)}): it steps the "
                        f"optimizer itself, so the engine would step twice; pass it as "
                        f"{step_name}, or use its objective counterpart")
    if not isinstance(objective, Objective) and _hidden_objective(objective):
        raise TypeError("objective= got a wrapper (lambda / functools.partial) around an "
                        "Objective, which hides its check_run, after_update and component "
                        "state: pass the objective itself")
    if not callable(objective):
        raise TypeError(f"objective must be callable (ObjectiveContext) -> ObjectiveResult; "
                        f"got {type(objective).__name__}")


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or
               type(fn).__name__)


def check_strict_ownership(net: nn.Module,
                           optimizers: Mapping[str, torch.optim.Optimizer]) -> None:
    """The Trainer's strict ownership (§8.1): each parameter has at most one optimizer.

    Two optimizers holding one parameter would both update it, whoever owns the
    update (a step function's two ``step()`` calls, or the engine stepping every
    optimizer per commit). An optimizer without ``param_groups`` owns every
    trainable parameter, so beside any other optimizer it always overlaps.
    Refuses the first overlapping pair (in build order) with a ValueError naming
    both optimizers and the parameters they share.
    """
    names = {id(p): name for name, p in net.named_parameters()}
    owner: dict[int, str] = {}
    shared: dict[tuple[str, str], list[str]] = {}
    for name, optimizer in optimizers.items():
        for group in optimizer.param_groups:
            for p in group["params"]:
                first = owner.setdefault(id(p), name)
                if first != name:
                    label = names.get(id(p), f"<{type(p).__name__} {tuple(p.shape)}>")
                    shared.setdefault((first, name), []).append(label)
    if not shared:
        return
    (first, second), params = next(iter(shared.items()))
    listed = ", ".join(params[:_SHOWN])
    more = f", ... ({len(params) - _SHOWN} more)" if len(params) > _SHOWN else ""
    raise ValueError(
        f"optimizers {first!r} and {second!r} both own {len(params)} parameter(s): "
        f"{listed}{more}; the Trainer's strict ownership gives each parameter one optimizer, "
        "or both would update the same weights (an optimizer without param_groups owns every "
        "trainable parameter): give each optimizer param_groups matching disjoint parameters")
