"""What both training loops share besides the loop itself (spec §4, §4.5, §5, §6.4,
§6.5): phase epochs, callback normalization, epoch-end lookahead, the epoch summaries,
the end-of-training callback dispatch, the journal / provenance checks, the parent
attempt of a resumed run, and the unowned-parameter warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx._journal.spec import HistoryJournal
from nnx.callbacks.base import Callback, CallbackContext

if TYPE_CHECKING:
    from nnx._engine.resume import ResumePlan
    from nnx._engine.update_engine import OptimizerSlot, UpdateEngine

__all__ = ["EngineSummary", "FunctionCallback", "RecordSummary", "announce_epoch",
           "as_callbacks", "batch_size", "check_history", "check_provenance", "dispatch_epoch_end",
           "end_callbacks",
           "parent_attempt", "phase_epochs", "reducible", "run_deferred", "warn_unowned",
           "with_lookahead"]


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


class FunctionCallback(Callback):
    """A plain function callback receives the full history at each epoch's end."""

    def __init__(self, fn: Callable[[Sequence[NNIterationDataPoint]], Any]) -> None:
        self.fn = fn

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        self.fn(ctx.idps)


def as_callbacks(items: Iterable[Any]) -> list[Callback]:
    out: list[Callback] = []
    for i, cb in enumerate(items):
        if isinstance(cb, Callback):
            out.append(cb)
        elif callable(cb):
            out.append(FunctionCallback(cb))
        else:
            raise TypeError(f"callbacks[{i}] must be a Callback or a callable; "
                            f"got {type(cb).__name__}")
    return out


def with_lookahead(loader: Iterable[Any]) -> Iterator[tuple[Any, bool]]:
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


def batch_size(batch: Any) -> int:
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


class RecordSummary:
    """The whole-epoch training summary of a custom step's records: loss and error each
    averaged over the records that carry them, weighted by the record's count or else
    the batch's sample count (spec §6.4)."""

    def __init__(self) -> None:
        self.sums = {"loss": [0.0, 0.0], "error": [0.0, 0.0]}

    def update(self, edp: NNEvaluationDataPoint, batch: Any) -> None:
        weight = float(edp.count if edp.count is not None else batch_size(batch))
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


def dispatch_epoch_end(callbacks: Sequence[Callback], ctx: CallbackContext, history: Any,
                       journal: Any) -> None:
    """``on_epoch_end`` on every callback; under a journal, full-history callbacks see the
    whole history (read back once per epoch), the others the window."""
    full = None
    for cb in callbacks:
        if getattr(cb, "history_access", "window") == "full" and journal is not None:
            full = history.full(open_epoch=True) if full is None else full
            ctx.idps, window = full, ctx.idps
            try:
                cb.on_epoch_end(ctx)
            finally:
                ctx.idps = window
        else:
            cb.on_epoch_end(ctx)


def end_callbacks(callbacks: Sequence[Callback], ctx: CallbackContext, history: Any) -> None:
    """``on_train_end`` on every callback; full-history callbacks see the whole history
    read back (the window, with a warning, when that read fails)."""
    window = ctx.idps
    for cb in callbacks:
        try:
            if getattr(cb, "history_access", "window") == "full":
                ctx.idps = _full_history(history)
            cb.on_train_end(ctx)
        except Exception:
            if ctx.error is None:
                raise  # after a failure, a callback's own error must not mask the first one
        finally:
            ctx.idps = window


def _full_history(history: Any) -> Any:
    try:
        return history.full()
    except Exception as exc:  # the final read-back failed: the window, with a warning
        warnings.warn(f"reading the full history back failed ({exc!r}); full-history "
                      "callbacks get the window", RuntimeWarning, stacklevel=3)
        return history.view


def run_deferred(ctx: CallbackContext) -> None:
    """The epoch transaction's last step: what callbacks deferred (``ctx.defer``), in
    order."""
    queued, ctx.deferred = ctx.deferred, []
    for action in queued:
        action(ctx)


def check_history(history: Any, callbacks: Sequence[Callback]) -> Any:
    """Refuse, before any run exists, a journal the callbacks cannot live with (§4.5)."""
    if history is None:
        return None
    if not isinstance(history, HistoryJournal):
        raise TypeError(f"history must be a HistoryJournal; got {type(history).__name__}")
    for i, cb in enumerate(callbacks):
        access = getattr(cb, "history_access", "window")
        if isinstance(cb, FunctionCallback):
            raise ValueError(f"callbacks[{i}] is a plain function, which receives the full "
                             "history list by contract; with a HistoryJournal use a Callback "
                             "with history_access = 'full'")
        if access not in ("window", "full"):
            raise ValueError(f"callbacks[{i}].history_access must be 'window' or 'full'; "
                             f"got {access!r}")
    return history


def check_provenance(provenance: Any) -> Any:
    if provenance is None:
        return None
    # On first use: a fit without provenance= loads none of it (issue 38).
    from nnx.provenance.manifest import ExperimentManifest

    if not isinstance(provenance, ExperimentManifest):
        raise TypeError(f"provenance must be an ExperimentManifest; got "
                        f"{type(provenance).__name__}")
    return provenance


def announce_epoch(loader: Any, epoch: int) -> None:
    """Tell the loader, or else its sampler (a DistributedSampler), the epoch's index."""
    for owner in (loader, getattr(loader, "sampler", None)):
        set_epoch = getattr(owner, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
            return


class EngineSummary:
    """An objective run's whole-epoch training summary: the engine's epoch loss (§6.5)."""

    def __init__(self, engine: UpdateEngine) -> None:
        self.engine = engine

    def result(self) -> NNEvaluationDataPoint:
        return NNEvaluationDataPoint(loss=self.engine.epoch_loss())


def reducible(summary: Any) -> Any:
    """The part of an epoch summary that holds its sums and counts (what DDP reduces)."""
    return summary.engine.epoch_terms if isinstance(summary, EngineSummary) else summary


def warn_unowned(slots: Iterable[OptimizerSlot], net: torch.nn.Module) -> bool:
    """Warn about parameters that train but no optimizer owns (§6.5); whether it warned."""
    owned = {id(p) for slot in slots for p in slot.params()}
    names = [n for n, p in net.named_parameters() if p.requires_grad and id(p) not in owned]
    if not names:
        return False
    shown = ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
    warnings.warn(f"{len(names)} parameter(s) require gradients but no optimizer owns "
                  f"them, so they never train: {shown} (an optimizer built with "
                  "param_groups leaves out parameters frozen at build time)",
                  RuntimeWarning, stacklevel=4)  # the user's train() call
    return True


def parent_attempt(root: Path, plan: ResumePlan | None) -> dict[str, Any] | None:
    """The provenance parent of a resumed run: the source run's attempt and checkpoint."""
    if plan is None:
        return None
    if plan.parent is not None:  # a memory source (a bundle) records its own lineage
        return dict(plan.parent)
    source = root / str(plan.status.source_run)
    from nnx.provenance.reading import read_provenance  # on first use (issue 38)

    prov = read_provenance(source) if source.is_dir() else None
    return {"run_id": plan.status.source_run,
            "attempt_id": None if prov is None or prov.attempt is None
            else prov.attempt.attempt_id,
            "checkpoint": plan.status.source_checkpoint,
            "generation": plan.checkpoint.generation,
            # the epoch it resumed at, as a bundle's link records it: nnx.comparison's
            # lineage needs it when the source is later retrained or deleted (spec §23)
            "epoch": plan.status.source_epoch}
