"""The shared update engine (spec §6.5): one update protocol under every objective run.

Per microbatch the objective runs under the run's autocast and returns loss
terms. Each term goes into its own gradient buffer, weighted; a window of one
microbatch takes a single backward pass through its combined loss instead.
When the window closes (``accumulate_grad_batches`` microbatches, or the
epoch's end) a normalized term becomes Σ weighted numerators / Σ denominators
and a summed one Σ weighted numerators, so uneven microbatches, a short final
window and ignored targets give exactly the full-batch update. The window then
closes through the one update window (:mod:`nnx._engine.update_window`, shared with
the default step and ``finalize_step``): under DDP the sum over ranks, unscale
(FP16), the all-or-nothing overflow check across optimizers, clipping (each
optimizer its own ``grad_clip_norm``), step, scaler update, and the commit
reported back here: counters, ``after_update``, one :class:`UpdateEvent` per
stepped optimizer, and update-clock schedules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.nn.parallel import DistributedDataParallel

from nnx._engine.nonfinite import NonFiniteSkips
from nnx._engine.steps import batch_extra_metrics, with_extra
from nnx._engine.update_window import GradientBuffer, WindowStepper
from nnx._foundation.records import NNEvaluationDataPoint
from nnx.objectives._core import ObjectiveContext, ObjectiveResult, UpdateEvent, nonfinite_policy

if TYPE_CHECKING:
    from torch import nn

    from nnx._contracts.precision import ResolvedPrecision
    from nnx._contracts.trainable import TrainableModel
    from nnx._engine.schedule import ScheduleDriver
    from nnx.params.optim_factory import OptimConfig

__all__ = ["OptimizerSlot", "UpdateEngine"]


@dataclass(eq=False)
class OptimizerSlot:
    """One optimizer of a run: its config, its schedule and its committed updates."""

    name: str | None  # the Trainer's name; None under NNModel.train
    optimizer: torch.optim.Optimizer
    config: OptimConfig
    schedule: ScheduleDriver | None = None
    updates: int = 0

    def params(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]


@dataclass(eq=False)
class _TermSums:
    reduction: str
    weighted: float = 0.0  # Σ weight · numerator
    plain: float = 0.0  # Σ numerator (the term's own value, for events)
    denominator: float = 0.0

    def value(self, weighted: bool) -> float | None:
        total = self.weighted if weighted else self.plain
        if self.reduction == "sum":
            return total
        return total / self.denominator if self.denominator > 0 else None


@dataclass(eq=False)
class _Window:
    microbatches: int = 0
    poisoned: bool = False
    cause: str | None = None  # why a non-finite window was dropped (this rank's first term)
    terms: dict[str, _TermSums] = field(default_factory=dict)
    # Gradient buffers of every term but the first back-propagated one, whose
    # gradients accumulate in p.grad itself (the common single-term case costs nothing).
    first: str | None = None
    buffers: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)


CommitHook = Callable[[list[UpdateEvent], list[OptimizerSlot]], None]


class UpdateEngine:
    def __init__(self, *, model: TrainableModel, objective: Any, slots: Sequence[OptimizerSlot],
                 precision: ResolvedPrecision, scaler: torch.amp.GradScaler | None,
                 accumulate: int, counter: Any, on_commit: CommitHook,
                 session: Any = None,
                 extra_metrics: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.model, self.objective = model, objective
        self.extra_metrics = dict(extra_metrics or {})  # scored on each microbatch (§20)
        self.slots = list(slots)
        self.precision, self.scaler = precision, scaler
        self.accumulate = accumulate
        self.policy = nonfinite_policy(objective)
        self.counter = counter  # the callback context: committed_updates lives there
        self.on_commit = on_commit
        self.after_update = getattr(objective, "after_update", None)
        self.window = _Window()
        self.epoch_terms: dict[str, _TermSums] = {}
        # Under DDP a window closes on the sums over every rank (nnx.distributed), and the
        # objective's forward runs through the DDP wrapper, which the loop sets here once it
        # built it (train_net), for the contexts to carry.
        self.session = session
        # Under FSDP the sharded parameters receive gradients only through FSDP's own
        # reduction in backward: a one-microbatch window agrees on its denominators first
        # and back-propagates once, already normalized (_reduced_backward); a longer one
        # keeps each term's reduced gradients apart until its close (_term_backwards).
        self.reduced = bool(getattr(session, "reduces_in_backward", False))
        self.train_net: nn.Module | None = None
        self.skips = NonFiniteSkips()  # the epoch's non-finite windows (the loop's tally)
        self.dropped: str | None = None  # why the window being closed was dropped
        # The window closes through the one update window (nnx._engine.update_window), which
        # reports each committed update back here (_report → _commit).
        self.stepper = WindowStepper(
            tuple(s.optimizer for s in self.slots),
            tuple(s.config.grad_clip_norm for s in self.slots), scaler,
            report=self._report, nonfinite_norm="skip" if self.policy == "skip" else "fail",
            session=None if self.reduced else session)
        self._closing: tuple[_Window, int, int] = (self.window, 0, 0)

    # -- the epoch --------------------------------------------------------------------
    def begin_epoch(self, skips: NonFiniteSkips | None = None) -> None:
        self.epoch_terms = {}
        self.window = _Window()
        self.skips = NonFiniteSkips() if skips is None else skips

    def epoch_loss(self) -> float:
        """Each term's summed weighted numerators over its summed denominators, across
        the epoch's committed-or-masked windows; NaN when every window was dropped."""
        values = [t.value(weighted=True) for t in self.epoch_terms.values()]
        finite = [v for v in values if v is not None]
        return math.fsum(finite) if finite else math.nan

    # -- one microbatch ---------------------------------------------------------------
    def _owned(self) -> list[torch.Tensor]:
        """Optimizer-owned parameters that require gradients now (gradual unfreezing)."""
        return [p for slot in self.slots for p in slot.params() if p.requires_grad]

    def microbatch(self, batch: Any, *, epoch: int, batch_idx: int,
                   closes: bool) -> NNEvaluationDataPoint:
        window = self.window
        params = self._owned()
        if window.microbatches == 0:
            for p in params:
                p.grad = None
        ctx = ObjectiveContext(model=self.model, batch=batch, batch_idx=batch_idx, epoch=epoch,
                               precision=self.precision, microbatch=window.microbatches,
                               train_net=self.train_net)
        # Under DDP the engine reduces each window's gradients itself (once, exactly), so
        # the wrapper's per-backward all-reduce is switched off.
        local = self._local_gradients()
        with local, self.precision.autocast():
            result = self.objective(ctx)
        if not isinstance(result, ObjectiveResult):
            raise TypeError(f"an objective must return an ObjectiveResult; got "
                            f"{type(result).__name__}")
        values = self._account(result, window, epoch, batch_idx)
        if self.reduced and self.accumulate == 1:
            self._reduced_backward(result, window)
        elif self.reduced:
            self._term_backwards(result, window, params)
        elif not window.poisoned:
            self._backward(result, window, params)
        window.microbatches += 1
        if closes:
            self._close(epoch, batch_idx, params)
        return self._record(result, values)

    def _account(self, result: ObjectiveResult, window: _Window, epoch: int,
                 batch_idx: int) -> dict[str, float]:
        """Read each term's value, refuse a reduction switch, apply the non-finite policy."""
        values: dict[str, float] = {}
        for term in result.terms:
            sums = window.terms.get(term.name)
            if sums is None:
                sums = window.terms[term.name] = _TermSums(term.reduction)
            elif sums.reduction != term.reduction:
                raise ValueError(f"loss term {term.name!r} switched from {sums.reduction!r} to "
                                 f"{term.reduction!r} within an update window; a term is "
                                 "either normalized (a denominator) or summed (none)")
            value = float(term.numerator.detach())
            if not math.isfinite(value) and not term.masked:
                if self.policy == "fail":
                    raise FloatingPointError(
                        f"non-finite loss term {term.name!r} ({value}) at epoch {epoch}, batch "
                        f"{batch_idx}; nothing was stepped (declare nonfinite='skip' on the "
                        "Objective to drop such windows)")
                if not window.poisoned:  # the loop warns once per epoch (nnx._engine.nonfinite)
                    window.cause = f"loss term {term.name!r}"
                window.poisoned = True
            values[term.name] = value
            sums.plain += value
            sums.weighted += term.weight * value
            sums.denominator += float(term.denominator or 0.0)
        return values

    def _backward(self, result: ObjectiveResult, window: _Window,
                  params: list[torch.Tensor]) -> None:
        live = [t for t in result.terms if t.weight != 0 and not t.masked
                and t.numerator.requires_grad]
        if not live or not params:
            return
        scale = self.scaler.scale if self.scaler is not None else (lambda x: x)
        if self.accumulate == 1 and self.session is None:  # one pass, the combined loss
            combined = sum(t.weight * t.numerator / float(t.denominator or 1.0) for t in live)
            assert isinstance(combined, torch.Tensor)
            torch.autograd.backward(scale(combined), inputs=params)
            return
        for i, term in enumerate(live):
            loss = scale(term.weight * term.numerator)
            keep = i < len(live) - 1  # later terms share the graph
            if window.first in (None, term.name):
                window.first = term.name
                torch.autograd.backward(loss, inputs=params, retain_graph=keep)
                continue
            grads = torch.autograd.grad(loss, params, retain_graph=keep, allow_unused=True)
            buffer = window.buffers.setdefault(term.name, {})
            for p, g in zip(params, grads, strict=True):
                if g is not None:
                    held = buffer.get(id(p))
                    buffer[id(p)] = g if held is None else held.add_(g)

    def _reduced_backward(self, result: ObjectiveResult, window: _Window) -> None:
        """One backward of Σ weight × numerator × world / global denominator (× world
        for a summed term): FSDP averages it over the ranks into each shard's gradient.
        Every rank takes the same decision, and every rank joins the backward (a term
        masked here goes in times zero), as FSDP's reduction is collective."""
        poisoned, denominators = self._denominators(window)
        if poisoned or not any(s.reduction == "sum" or denominators[n] > 0
                               for n, s in window.terms.items()):
            return
        world = float(self.session.world_size)
        parts = []
        for term in result.terms:
            if term.weight == 0 or not term.numerator.requires_grad:
                continue
            total = denominators[term.name]
            if term.masked or (term.reduction != "sum" and total <= 0):
                parts.append(term.numerator.nan_to_num() * 0.0)
                continue
            factor = world if term.reduction == "sum" else world / total
            parts.append(term.weight * factor * term.numerator)
        if parts:
            loss = torch.stack([p.reshape(()) for p in parts]).sum()
            torch.autograd.backward(loss if self.scaler is None else self.scaler.scale(loss))

    def _term_backwards(self, result: ObjectiveResult, window: _Window,
                        params: list[torch.Tensor]) -> None:
        """A window of several microbatches under FSDP, whose denominators are known only
        at its close: each term's backward (of weight × numerator × world) is reduced by
        FSDP at once, and its sharded gradient moves into the term's buffer, which the
        close divides by the term's agreed denominator (:meth:`_coefficient`), as DDP's
        per-term buffers are. Every rank runs the same backwards (a term masked here
        goes in times zero), so whether the window is poisoned is agreed first, per
        microbatch: once it is anywhere, no rank back-propagates the rest of it."""
        if self.session.sum([float(window.poisoned)])[0] > 0:
            window.cause = window.cause or "loss term (on some rank)"
            window.poisoned = True
            return
        live = [t for t in result.terms if t.weight != 0 and t.numerator.requires_grad]
        world = float(self.session.world_size)
        scale = self.scaler.scale if self.scaler is not None else (lambda x: x)
        for i, term in enumerate(live):
            loss = (term.numerator.nan_to_num() * 0.0 if term.masked
                    else term.weight * world * term.numerator)
            torch.autograd.backward(scale(loss.reshape(())), retain_graph=i < len(live) - 1)
            buffer = window.buffers.setdefault(term.name, {})
            for p in params:
                if p.grad is not None:
                    held = buffer.get(id(p))
                    buffer[id(p)] = p.grad if held is None else held.add_(p.grad)
                    p.grad = None

    def _local_gradients(self) -> Any:
        ddp = self.train_net if self.session is not None else None
        if isinstance(ddp, DistributedDataParallel):
            return ddp.no_sync()
        return contextlib.nullcontext()

    # -- the window's end -------------------------------------------------------------
    def _coefficient(self, window: _Window, denominators: dict[str, float], name: str) -> float:
        """What a term's summed weighted gradient is multiplied by: 1 / Σ denominators
        (over every rank under DDP, whose gradients are then summed)."""
        if self.accumulate == 1 and self.session is None:
            return 1.0  # the combined loss was already normalized
        if window.terms[name].reduction == "sum":
            return 1.0
        return 1.0 / denominators[name]

    def _buffers(self, window: _Window, denominators: dict[str, float]) -> list[GradientBuffer]:
        return [(self._coefficient(window, denominators, name), buffer)
                for name, buffer in window.buffers.items()]

    def _close(self, epoch: int, batch_idx: int, params: list[torch.Tensor]) -> None:
        window, self.window = self.window, _Window()
        self.dropped = None
        poisoned, denominators = self._denominators(window)
        takes_update = not poisoned
        if poisoned:  # a dropped window (nonfinite="skip") counts nowhere
            self.dropped = window.cause or "loss term (on some rank)"
        else:
            for name, sums in window.terms.items():
                total = self.epoch_terms.setdefault(name, _TermSums(sums.reduction))
                total.weighted += sums.weighted
                total.plain += sums.plain
                total.denominator += sums.denominator
            takes_update = any(s.reduction == "sum" or denominators[n] > 0
                               for n, s in window.terms.items())  # else every term masked
        first = 1.0 if window.first is None or not takes_update else self._coefficient(
            window, denominators, window.first)
        self._closing = (window, epoch, batch_idx)
        closed = self.stepper.close(
            takes_update=takes_update, coefficient=first,
            buffers=self._buffers(window, denominators) if takes_update else (),
            params=params, where=f"epoch {epoch}, batch {batch_idx}")
        if closed == "gradient norm":
            self.dropped = "gradient norm"  # the loop warns once per epoch
        self.skips.closed(batch_idx, self.dropped)

    def _denominators(self, window: _Window) -> tuple[bool, dict[str, float]]:
        """(poisoned?, each term's denominator) of the window: under DDP poisoned on any
        rank and summed over ranks, which needs every rank's objective to return the
        same term names."""
        names = sorted(window.terms)
        local = [float(window.poisoned), *(window.terms[n].denominator for n in names)]
        totals = local if self.session is None else self.session.sum(local)
        return totals[0] > 0, dict(zip(names, totals[1:], strict=True))

    def _report(self, stepped: Sequence[int]) -> None:
        window, epoch, batch_idx = self._closing
        self._commit([self.slots[i] for i in stepped], window, epoch, batch_idx)

    def _commit(self, stepped: list[OptimizerSlot], window: _Window, epoch: int,
                batch_idx: int) -> None:
        self.counter.committed_updates += 1
        terms = {}
        for name, sums in window.terms.items():
            value = sums.value(weighted=False)
            if value is not None:
                terms[name] = value
        events = []
        for slot in stepped:
            slot.updates += 1
            events.append(UpdateEvent(
                optimizer=slot.name, update_index=slot.updates,
                update_count=self.counter.committed_updates, epoch=epoch, batch_idx=batch_idx,
                microbatches=window.microbatches, terms=dict(terms)))
        if self.after_update is not None:
            self.after_update(events)
        self.on_commit(events, stepped)

    # -- the record -------------------------------------------------------------------
    def _record(self, result: ObjectiveResult, values: dict[str, float]) -> NNEvaluationDataPoint:
        """The microbatch's record: its own denominator-weighted loss, the task fields when
        the objective hands back output and target, and the objective's metrics."""
        parts = [t.weight * values[t.name] / float(t.denominator or 1.0)
                 for t in result.terms if not t.masked]
        loss = math.fsum(parts) if parts else None
        if result.output is not None and result.target is not None:
            adapter = self.model.task_adapter
            edp = adapter.record(result.output, result.target, loss=loss, validate=False)
            if self.extra_metrics:  # the run's, on this microbatch's valid targets (§20)
                edp = with_extra(edp, batch_extra_metrics(
                    self.model, result.output, result.target, self.extra_metrics))
        else:
            edp = NNEvaluationDataPoint(loss=loss)
        if result.metrics:
            edp = dataclasses.replace(edp, extra={**edp.extra, **result.metrics})
        return edp
