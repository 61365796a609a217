"""What both training loops share besides the loop itself (spec §4, §4.5, §5, §6.4):
phase epochs, callback normalization, epoch-end lookahead, the custom-step record
summary, the end-of-training callback dispatch, and the journal / provenance checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx.callbacks.base import Callback, CallbackContext

__all__ = ["FunctionCallback", "RecordSummary", "as_callbacks", "batch_size", "check_history",
           "check_provenance", "end_callbacks", "phase_epochs", "transform_states",
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


def transform_states(model: Any) -> tuple[dict[str, Any], ...]:
    """The states of the topology-transform recipes the model materialized (§4.2)."""
    return tuple(dict(recipe.state()) for recipe in getattr(model, "transforms", ()))


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


def end_callbacks(callbacks: Sequence[Callback], ctx: CallbackContext,
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


def check_history(history: Any, callbacks: Sequence[Callback]) -> Any:
    """Refuse, before any run exists, a journal the callbacks cannot live with (§4.5)."""
    if history is None:
        return None
    from nnx.history import HistoryJournal

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
    from nnx.provenance import ExperimentManifest

    if not isinstance(provenance, ExperimentManifest):
        raise TypeError(f"provenance must be an ExperimentManifest; got "
                        f"{type(provenance).__name__}")
    return provenance
