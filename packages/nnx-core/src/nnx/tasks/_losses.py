"""Loss identification and the (numerator, denominator) split of the native losses.

A loss is *native* when its class is one of torch's own loss modules (or a
subclass that keeps torch's ``forward``): only then does NNx evaluate it
itself — element-wise, masked, with the module's weights, ``ignore_index``,
``pos_weight`` and ``reduction``. Any other module is called unchanged and
owns its own normalization.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "CATEGORICAL_LOSSES",
    "MULTILABEL_LOSSES",
    "REGRESSION_LOSSES",
    "TaskValidationError",
    "categorical_mean",
    "categorical_numerator",
    "categorical_parts",
    "elementwise_parts",
    "family",
    "is_native",
    "is_torch_loss",
    "opaque_parts",
    "reduction_of",
    "zero_numerator",
]


class TaskValidationError(ValueError):
    """A batch's output or target does not fit the declared task."""


_FAMILIES: tuple[tuple[type[nn.Module], str], ...] = (
    (nn.CrossEntropyLoss, "cross_entropy"),
    (nn.NLLLoss, "nll"),
    (nn.BCEWithLogitsLoss, "bce_with_logits"),
    (nn.MSELoss, "mse"),
    (nn.L1Loss, "l1"),
    (nn.SmoothL1Loss, "smooth_l1"),
    (nn.HuberLoss, "huber"),
)
CATEGORICAL_LOSSES = ("cross_entropy", "nll")
MULTILABEL_LOSSES = ("bce_with_logits",)
REGRESSION_LOSSES = ("mse", "l1", "smooth_l1", "huber")


def family(loss_fn: nn.Module) -> str | None:
    """The torch loss family ``loss_fn`` belongs to (subclasses included), or None."""
    for cls, name in _FAMILIES:
        if isinstance(loss_fn, cls):
            return name
    return None


def is_native(loss_fn: nn.Module) -> bool:
    """Whether NNx may evaluate ``loss_fn`` itself: a known family with torch's forward."""
    for cls, _ in _FAMILIES:
        if isinstance(loss_fn, cls):
            return type(loss_fn).forward is cls.forward
    return False


def is_torch_loss(loss_fn: nn.Module) -> bool:
    """Whether ``loss_fn``'s class is one of torch's own (``BCELoss``, ``KLDivLoss`` …)."""
    return type(loss_fn).__module__.startswith("torch.")


def reduction_of(loss_fn: nn.Module) -> str:
    """The module's ``reduction`` ("mean" when it declares none)."""
    value = getattr(loss_fn, "reduction", "mean")
    return value if isinstance(value, str) else "mean"


def zero_numerator(output: Tensor) -> Tensor:
    """An exact 0 connected to ``output``'s graph (zero gradient even for NaN outputs)."""
    never = torch.zeros((), dtype=torch.bool, device=output.device)
    return torch.where(never, output.sum(), torch.zeros((), dtype=output.dtype,
                                                        device=output.device))


def _parts(total: Tensor, weight: Tensor, loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
    if reduction_of(loss_fn) == "sum":
        return total, (weight > 0).to(total.dtype)
    return total, weight.to(total.dtype)


def categorical_numerator(output: Tensor, target: Tensor, loss_fn: nn.Module,
                          ignore_index: int) -> Tensor:
    """The summed CE / NLL of a native module over class-index ``target`` (the numerator
    of :func:`categorical_parts`)."""
    weight: Tensor | None = getattr(loss_fn, "weight", None)
    index = target.long()
    if isinstance(loss_fn, nn.CrossEntropyLoss):
        return F.cross_entropy(output, index, weight=weight, ignore_index=ignore_index,
                               reduction="sum", label_smoothing=float(loss_fn.label_smoothing))
    log_probs = F.log_softmax(output, dim=1)
    return F.nll_loss(log_probs, index, weight=weight, ignore_index=ignore_index,
                      reduction="sum")


def categorical_mean(output: Tensor, target: Tensor, loss_fn: nn.Module,
                     ignore_index: int) -> Tensor:
    """torch's own mean CE / NLL over the non-ignored class-index targets (no class
    weights, no label smoothing): :func:`categorical_parts`' numerator over its weight."""
    index = target if target.dtype is torch.int64 else target.long()
    if isinstance(loss_fn, nn.CrossEntropyLoss):
        return F.cross_entropy(output, index, ignore_index=ignore_index)
    return F.nll_loss(F.log_softmax(output, dim=1), index, ignore_index=ignore_index)


def categorical_parts(output: Tensor, target: Tensor, loss_fn: nn.Module,
                      ignore_index: int) -> tuple[Tensor, Tensor]:
    """Summed CE / NLL of a native module and its normalization weight.

    NLLLoss gets ``log_softmax`` over the class axis first (built-in nets return
    logits). Class-index targets normalize by the count of non-ignored targets,
    or the summed class weights of those targets; class-probability targets
    (cross-entropy only) by the number of rows, as torch does.
    """
    weight: Tensor | None = getattr(loss_fn, "weight", None)
    if target.is_floating_point():  # soft targets (default adapter, CE only)
        total = F.cross_entropy(output, target, weight=weight, reduction="sum",
                                label_smoothing=float(getattr(loss_fn, "label_smoothing", 0.0)))
        rows = torch.tensor(float(target.numel() // target.shape[1]), device=output.device)
        return _parts(total, rows, loss_fn)
    index = target.long()
    total = categorical_numerator(output, index, loss_fn, ignore_index)
    valid = index != ignore_index
    if weight is None:
        den = valid.sum().to(total.dtype)
    else:
        safe = torch.where(valid, index, torch.zeros_like(index))
        den = torch.where(valid, weight.to(total.dtype)[safe],
                          torch.zeros((), dtype=total.dtype, device=total.device)).sum()
    return _parts(total, den, loss_fn)


def _elementwise(output: Tensor, target: Tensor, loss_fn: nn.Module) -> Tensor:
    name = family(loss_fn)
    if name == "bce_with_logits":
        return F.binary_cross_entropy_with_logits(
            output, target, weight=getattr(loss_fn, "weight", None),
            pos_weight=getattr(loss_fn, "pos_weight", None), reduction="none")
    if name == "mse":
        return F.mse_loss(output, target, reduction="none")
    if name == "l1":
        return F.l1_loss(output, target, reduction="none")
    if name == "smooth_l1":
        return F.smooth_l1_loss(output, target, reduction="none",
                                beta=float(getattr(loss_fn, "beta", 1.0)))
    if name == "huber":
        return F.huber_loss(output, target, reduction="none",
                            delta=float(getattr(loss_fn, "delta", 1.0)))
    raise TypeError(f"{type(loss_fn).__name__} is not an element-wise loss")


def elementwise_parts(output: Tensor, target: Tensor, valid: Tensor,
                      loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
    """Masked element-wise loss at full shape: its sum over ``valid`` and their count.

    ``target`` already has ``output``'s shape; both are evaluated in their
    promoted dtype (at least float32), so a target is never cast down to a
    reduced-precision output.
    """
    dtype = torch.promote_types(torch.promote_types(output.dtype, target.dtype), torch.float32)
    filled = torch.where(valid, target.to(dtype), torch.zeros((), dtype=dtype,
                                                              device=target.device))
    losses = _elementwise(output.to(dtype), filled, loss_fn)
    total = torch.where(valid, losses, torch.zeros((), dtype=losses.dtype,
                                                   device=losses.device)).sum()
    return _parts(total, valid.sum(), loss_fn)


def opaque_parts(output: Tensor, target: Any, loss_fn: nn.Module,
                 count: int) -> tuple[Tensor, Tensor]:
    """A non-native loss called unchanged, weighted by ``count`` scored targets."""
    value = loss_fn(output, target)
    if not isinstance(value, Tensor) or value.numel() != 1:
        raise TaskValidationError(
            f"{type(loss_fn).__name__} must return a scalar tensor; got "
            f"{tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__}"
        )
    value = value.reshape(())
    if count == 0:
        return zero_numerator(output), torch.zeros((), device=output.device)
    if reduction_of(loss_fn) == "sum":
        return value, torch.ones((), dtype=value.dtype, device=value.device)
    weight = torch.tensor(float(count), dtype=value.dtype, device=value.device)
    return value * weight, weight
