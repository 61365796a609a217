"""The one place an update window closes (spec §2.5, §6.1, §6.5).

The default step (:mod:`nnx._engine.steps`), the shared update engine
(:mod:`nnx._engine.update_engine`) and ``finalize_step`` (:mod:`nnx._step_helpers`)
each gather a window's gradients their own way: one loss per microbatch, one
buffer per loss term, one paradigm loss. All three close the window here, in
the order nanoGPT's ``train.py`` reads (backward on ``loss / grad_accum``,
unscale, clip, step, update, zero_grad)::

    takes no update?  → zero_grad                 (a NaN-guarded or all-masked window)
    normalize         → Σ numerators / Σ denominators
    reduce            → sum over ranks            (the engine under DDP)
    holding           → optimizers with gradients (the others are not stepped)
    unscale           → FP16 only
    overflowed?       → scaler.update, no step    (all or nothing across optimizers)
    clip              → each its own grad_clip_norm; a non-finite norm fails or drops
    step              → optimizer.step / scaler.step, then scaler.update
    report            → the update clocks, counters and events
    zero_grad         → always, even when a step raised

A :class:`WindowStepper` holds what does not change between windows (built
once per run, or once per step context), so closing a window allocates
nothing on the default step's common path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["Closed", "GradientBuffer", "WindowStepper", "holds_gradients"]

# A loss term's gradients kept apart from p.grad (keyed by id(p)) and its coefficient.
GradientBuffer = tuple[float, dict[int, torch.Tensor]]
Report = Callable[[Sequence[int]], None]  # gets the indices of the optimizers that stepped

Closed = Literal["stepped", "no update", "overflow", "gradient norm"]
_NO_BUFFERS: tuple[GradientBuffer, ...] = ()
_ONE = (0,)  # the one optimizer of the common case stepped: no list per window


def holds_gradients(optimizer: torch.optim.Optimizer) -> bool:
    """Whether any parameter of ``optimizer`` has a gradient (stops at the first)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                return True
    return False


def _owned(optimizers: Iterable[torch.optim.Optimizer]) -> list[torch.Tensor]:
    return [p for opt in optimizers for g in opt.param_groups for p in g["params"]]


def _with_grads(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]


@dataclass(frozen=True, eq=False)
class WindowStepper:
    """What closing a window steps: the optimizers, their clip norms, the scaler.

    ``nonfinite_norm`` is what a non-finite clipped gradient norm does: "fail"
    raises FloatingPointError before anything steps, "skip" drops the window
    (an objective's policy, §6.5); None steps anyway, because the default step
    and finalize_step guard the loss before backward instead (§6.1).
    ``session`` is the DDP session whose ranks the engine sums the window's
    gradients over; the default step's DDP wrapper already reduced them in
    backward, so it passes none.
    """

    optimizers: tuple[torch.optim.Optimizer, ...]
    clip_norms: tuple[float | None, ...]
    scaler: torch.amp.GradScaler | None
    report: Report
    nonfinite_norm: Literal["fail", "skip"] | None = None
    session: Any = None

    def close(self, *, takes_update: bool, coefficient: float = 1.0,
              buffers: Sequence[GradientBuffer] = _NO_BUFFERS,
              params: list[torch.Tensor] | None = None, where: str = "") -> Closed:
        """Close one window whose gradients are in ``p.grad`` (times ``coefficient``)
        and in ``buffers``; ``params`` are the parameters they cover (default: every
        parameter of the optimizers). ``where`` ("epoch e, batch b") names the window
        in a refusal. Returns how the window closed."""
        try:
            if not takes_update:
                return "no update"
            if coefficient != 1.0 or buffers:
                params = _owned(self.optimizers) if params is None else params
                _normalize(params, coefficient, buffers)
            if self.session is not None:
                self.session.sum_gradients(_owned(self.optimizers) if params is None else params)
            stepped = self._holding()
            if not stepped:
                return "no update"
            scaler = self.scaler
            if scaler is not None:
                for i in stepped:
                    scaler.unscale_(self.optimizers[i])
                if self._overflowed(stepped):
                    scaler.update()  # all or nothing: no optimizer steps; the scale backs off
                    return "overflow"
            if not self._clip(stepped, where):
                if scaler is not None:
                    scaler.update()
                return "gradient norm"
            self._step(stepped)
            self.report(stepped)
            return "stepped"
        finally:
            for opt in self.optimizers:  # a closed window's gradients never leak into the next
                opt.zero_grad(set_to_none=True)

    # -- the named steps --------------------------------------------------------------
    def _holding(self) -> Sequence[int]:
        """An optimizer without gradients in the window is not stepped (§6.5)."""
        if len(self.optimizers) == 1:  # the common case: no generator, no scan past p[0]
            return _ONE if holds_gradients(self.optimizers[0]) else ()
        return [i for i, opt in enumerate(self.optimizers) if holds_gradients(opt)]

    def _overflowed(self, stepped: Sequence[int]) -> bool:
        """Whether any unscaled gradient is non-finite: the scaler's own skip rule, checked
        across every optimizer first so that none steps when one overflowed. The max-abs
        norm never overflows on finite gradients."""
        grads = [g for i in stepped for p in _with_grads(self.optimizers[i])
                 if (g := p.grad) is not None]
        norm = torch.nn.utils.get_total_norm(grads, norm_type=math.inf)
        return not bool(torch.isfinite(norm))

    def _clip(self, stepped: Sequence[int], where: str) -> bool:
        for i in stepped:
            clip = self.clip_norms[i]
            if clip is None:
                continue
            norm = torch.nn.utils.clip_grad_norm_(_with_grads(self.optimizers[i]), clip)
            if self.nonfinite_norm is None or bool(torch.isfinite(norm)):
                continue
            if self.nonfinite_norm == "fail":
                raise FloatingPointError(
                    f"non-finite gradient norm at {where}; nothing was stepped (declare "
                    "nonfinite='skip' to drop such windows)")
            return False  # "skip": the loop warns once per epoch (nnx._engine.nonfinite)
        return True

    def _step(self, stepped: Sequence[int]) -> None:
        scaler = self.scaler
        for i in stepped:
            if scaler is None:
                self.optimizers[i].step()
            else:
                scaler.step(self.optimizers[i])
        if scaler is not None:
            scaler.update()


def _normalize(params: list[torch.Tensor], coefficient: float,
               buffers: Sequence[GradientBuffer]) -> None:
    """p.grad × coefficient + Σ buffer × its coefficient: each term's Σ weighted
    numerators over its Σ denominators (1 for a summed term)."""
    if coefficient != 1.0:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(coefficient)
    for c, buffer in buffers:
        for p in params:
            g = buffer.get(id(p))
            if g is None:
                continue
            if p.grad is None:
                p.grad = g.mul_(c)
            else:
                p.grad.add_(g, alpha=c)
