"""The callback bus (spec §5): the hooks and the context every hook receives."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from nnx._foundation.records import NNIterationDataPoint

__all__ = ["Callback", "CallbackContext", "_CallbackContext"]


@dataclass(eq=False)
class CallbackContext:
    """What a hook sees. ``should_stop`` is writable: set it to end training.

    ``optimizers`` and ``trainer`` are set in Trainer mode only; ``optimizer``
    is then the primary (sorted-first) optimizer. ``idps`` is the running
    history of this run. ``update_listeners`` are called after each committed
    optimizer update; a listener that sets ``stop_at_update`` stops training
    right after that batch (NNModel.train only). ``committed_updates`` counts
    those updates; ``update_count`` is the same counter. ``scheduler`` is the
    training scheduler itself (the torch LRScheduler / ReduceLROnPlateau), to
    be read, not stepped; it is None without a schedule and in a Trainer,
    whose schedulers are named.
    """

    model: Any
    run: Any
    optimizer: torch.optim.Optimizer | None = None
    optimizers: dict[str, torch.optim.Optimizer] | None = None
    trainer: Any = None
    scheduler: Any = None
    epoch: int = 0
    idp: NNIterationDataPoint | None = None
    idps: Sequence[NNIterationDataPoint] = field(default_factory=list)
    should_stop: bool = False
    stop_at_update: bool = False
    committed_updates: int = 0
    update_listeners: list[Callable[[CallbackContext], None]] = field(default_factory=list)
    # Internal: called after the primary optimizer's update-clock schedule steps (LRMonitor).
    clock_listeners: list[Callable[[CallbackContext], None]] = field(default_factory=list)
    # Internal: what defer() queued, run once the epoch has committed (§4.2).
    deferred: list[Callable[[CallbackContext], None]] = field(default_factory=list)
    error: BaseException | None = None  # set when training raised; on_train_end still runs
    rank: int = 0  # this process's rank under DDP (0 otherwise): only rank 0 writes files
    world_size: int = 1
    # Internal: the model's weights as commits read them (the process session's view).
    committed_state: Callable[[], dict[str, Any]] | None = None

    @property
    def update_count(self) -> int:
        return self.committed_updates

    def model_state_dict(self) -> dict[str, Any]:
        """The model's whole weights, as LAST holds them: ``model.net.state_dict()`` in one
        process and under DDP. Under FSDP ``model.net`` holds this rank's shards, and this
        is the full state gathered for the epoch's commit, on rank 0 (the rank that
        writes files); read it from work :meth:`defer` queued, which runs after that
        commit (in ``on_epoch_end`` itself it is still the previous commit's)."""
        if self.committed_state is None:
            return dict(self.model.net.state_dict())
        return self.committed_state()

    def defer(self, action: Callable[[CallbackContext], None]) -> None:
        """Run ``action(ctx)`` once the epoch has committed: the epoch transaction's last
        step, after LAST, FIRST/Q1-Q3, BEST and runs/best (spec §4.2).

        ``on_epoch_end`` runs before the commit, so what it changes is part of the
        committed epoch; work that must see the committed files (ModelCheckpoint's
        snapshot, a probe of LAST) is deferred with this. Queued from ``on_train_end``
        of a successful run, it runs after the final LAST is written. Nothing queued
        runs when the epoch does not commit.
        """
        if not callable(action):
            raise TypeError(f"ctx.defer needs a callable; got {type(action).__name__}")
        self.deferred.append(action)


# The spec's historical name for the context type.
_CallbackContext = CallbackContext


class Callback:
    """Subclass and override the hooks you need; each receives the context.

    ``history_access = "full"`` asks for the whole committed history as
    ``ctx.idps`` at ``on_epoch_end`` / ``on_train_end`` in a run with a
    HistoryJournal (read back once per dispatch); the default ``"window"``
    sees the bounded live window.
    """

    history_access: str = "window"

    def check_run(self, params: Any) -> None:
        """Called with the training params before any run is reserved; raise to refuse."""

    def check_model(self, model: Any) -> None:
        """Called with the model being trained, beside :meth:`check_run` and before any
        run is reserved; raise to refuse a model the callback could never serve."""

    def on_train_begin(self, ctx: CallbackContext) -> None:
        """Before the first epoch; reset per-run state here."""

    def on_epoch_begin(self, ctx: CallbackContext) -> None:
        """Before each epoch's first batch."""

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        """After the epoch's validation and schedule step, before its commit: what this
        hook changes (the net, a component's state, ``should_stop``) is part of the
        committed epoch. ``ctx.idp`` is its last record; use ``ctx.defer`` for work
        that needs the committed files."""

    def on_train_end(self, ctx: CallbackContext) -> None:
        """After the last epoch, an early stop, or a failure (then ``ctx.error`` is set).
        After a successful run LAST is written once more afterwards, so it carries
        what this hook changed."""

    def on_optimizer_update(self, ctx: CallbackContext, event: Any) -> None:
        """After each committed optimizer update of an objective run (§6.5)."""
