"""kd_train_step_factory and feature_kd_train_step_factory (spec §10, §10.1, §6.1).

Hinton KD: ``α · KL(softmax(t/T) ‖ softmax(s/T)) · T² + (1 − α) · L_hard``, the KL
through ``F.kl_div(log_softmax(s/T), softmax(t/T), reduction="batchmean")`` on raw
logits, the hard term through the student's own loss_fn with the §3.1 NLL
adaptation. FitNets feature KD adds ``β · Σ_layers MSE(student_act, teacher_act)``
over named intermediate activations captured by forward hooks that live for one
step only.

Both steps finish through ``finalize_step`` (NaN guard before backward, grad clip,
one ``report_update`` per step, the ValueError for a scaler / reduced precision /
accumulation), are marked full-precision-only (an FP16/BF16 run refuses them before
any run is reserved) and imperative (passing one as ``objective=`` is refused).
``nnx.kd_objective`` is the counterpart on the shared update engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    FrozenTeacher,
    check_real,
    distillation_loss,
    finalize_step,
    full_precision_only,
    imperative_step,
    supervised_loss,
    train_mode,
)
from nnx.paradigms._classifier import labelled_input

__all__ = ["feature_kd_train_step_factory", "kd_loss", "kd_train_step_factory"]

TrainStepFn = Callable[[TrainStepContext], NNEvaluationDataPoint]


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, hard: torch.Tensor, *,
            alpha: float, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(combined, soft)``: the Hinton loss of one batch and its softened KL · T² (the soft
    term is core's one :func:`~nnx.extend.distillation_loss`, batch-mean reduced)."""
    soft = distillation_loss(student, teacher, temperature, reduction="batchmean")
    if alpha == 0:
        return hard, soft.detach()
    if alpha == 1:
        return soft, soft.detach()
    return alpha * soft + (1.0 - alpha) * hard, soft.detach()


def _check(who: str, alpha: float, temperature: float) -> tuple[float, float]:
    return (check_real(f"{who} alpha", alpha, PROBABILITY),
            check_real(f"{who} temperature", temperature, POSITIVE))


def kd_train_step_factory(teacher: Any, *, alpha: float = 0.5,
                          temperature: float = 4.0) -> TrainStepFn:
    """A ``train_step_fn`` distilling ``teacher`` (an NNModel or nn.Module) into the model.

    The teacher's parameters are frozen and its net set to eval now, on call (§10.1);
    a run that finds the teacher is, or shares a parameter with, its student refuses
    before its optimizer is built and undoes that freeze.
    """
    who = "kd_train_step_factory"
    alpha, temperature = _check(who, alpha, temperature)
    frozen = FrozenTeacher(teacher, who)
    frozen.freeze()

    @full_precision_only
    @imperative_step
    def kd_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x, target = labelled_input(ctx.model, ctx.batch, who)
        frozen.check_student_once(ctx.model.net)  # the run checked it: once per net
        output = ctx.forward((x,)).float()
        # Validates the targets before anything is back-propagated; the record's label
        # counting waits for the commit, as the default step's does.
        hard = supervised_loss(ctx.model, output, target)
        loss, soft = kd_loss(output, frozen.logits(x), hard.loss, alpha=alpha,
                             temperature=temperature)
        done = finalize_step(ctx, loss, (soft,))
        return hard.record(done.loss, distillation=done.values[0], hard=hard.value)

    _describe(kd_train_step, frozen, alpha, temperature)
    return kd_train_step


def _describe(step: Any, frozen: FrozenTeacher, alpha: float, temperature: float) -> None:
    # NNModel.train calls it before building the optimizer: a teacher that is, or shares
    # a parameter with, the student is refused there with the freeze undone (the one
    # check kd_objective runs), not after the run found a frozen student.
    step.check_model = lambda model: frozen.check_student(model.net)
    step.teacher = frozen.teacher
    step.alpha = alpha
    step.temperature = temperature


# -- feature distillation -----------------------------------------------------------------

def _modules(net: nn.Module, names: Any, side: str, who: str) -> dict[str, nn.Module]:
    found = dict(net.named_modules())
    missing = [n for n in names if n not in found]
    if missing:
        known = ", ".join(repr(n) for n in list(found)[1:12])
        raise ValueError(f"{who}: the {side} has no module named {missing}; its modules "
                         f"include {known}")
    return {n: found[n] for n in names}


@contextlib.contextmanager
def _captured(modules: Mapping[str, nn.Module]) -> Iterator[dict[str, torch.Tensor]]:
    """Each named module's output of the forward run inside the block; every hook is
    removed when the block ends, also on error (no leaked hooks)."""
    seen: dict[str, torch.Tensor] = {}
    handles = []

    def hook_for(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor):
                raise TypeError(f"feature_kd_train_step_factory: module {name!r} returned "
                                f"{type(output).__name__}, not a tensor")
            seen[name] = output
        return hook

    try:
        for name, module in modules.items():
            handles.append(module.register_forward_hook(hook_for(name)))
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def feature_kd_train_step_factory(teacher: Any, *, layers: Mapping[str, str],
                                  alpha: float = 0.5, temperature: float = 4.0,
                                  beta: float = 1.0) -> TrainStepFn:
    """KD plus ``beta · Σ MSE(student[s], teacher[t])`` over ``layers`` ({student module
    name: teacher module name}); each pair must have the same shape (to bridge widths,
    add a projector to the student's net and name its output)."""
    who = "feature_kd_train_step_factory"
    alpha, temperature = _check(who, alpha, temperature)
    beta = check_real(f"{who} beta", beta, NON_NEGATIVE)
    if not isinstance(layers, Mapping) or not layers or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in layers.items()):
        raise TypeError(f"{who} layers must be a non-empty mapping of student module name -> "
                        f"teacher module name; got {layers!r:.80}")
    pairs = dict(layers)
    frozen = FrozenTeacher(teacher, who)
    teacher_modules = _modules(frozen.net, pairs.values(), "teacher", who)
    frozen.freeze()

    @full_precision_only
    @imperative_step
    def feature_kd_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        x, target = labelled_input(ctx.model, ctx.batch, who)
        frozen.check_student_once(ctx.model.net)
        student_modules = _modules(ctx.model.net, pairs, "student", who)
        with _captured(student_modules) as mine:
            output = ctx.forward((x,)).float()
        with _captured(teacher_modules) as theirs:
            teacher_logits = frozen.logits(x)
        feature = output.new_zeros(())
        for s, t in pairs.items():
            if s not in mine or t not in theirs:
                raise ValueError(f"{who}: module {s if s not in mine else t!r} did not run in "
                                 "the forward pass")
            a, b = mine[s], theirs[t]
            if a.shape != b.shape:
                raise ValueError(f"{who}: student {s!r} {tuple(a.shape)} and teacher {t!r} "
                                 f"{tuple(b.shape)} differ in shape; add a projector to the "
                                 "student's net and name its output instead")
            feature = feature + F.mse_loss(a.float(), b.detach().float().to(a.device))
        hard = supervised_loss(ctx.model, output, target)
        kd, soft = kd_loss(output, teacher_logits, hard.loss, alpha=alpha,
                           temperature=temperature)
        loss = kd + beta * feature if beta else kd
        done = finalize_step(ctx, loss, (soft, feature))
        distillation, feature_mse = done.values
        return hard.record(done.loss, distillation=distillation, hard=hard.value,
                           feature_mse=feature_mse)

    _describe(feature_kd_train_step, frozen, alpha, temperature)
    feature_kd_train_step.layers = dict(pairs)  # type: ignore[attr-defined]
    feature_kd_train_step.beta = beta  # type: ignore[attr-defined]
    return feature_kd_train_step
