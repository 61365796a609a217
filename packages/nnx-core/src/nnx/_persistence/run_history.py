"""Where a run's records go while it trains: the eager idps.csv or the history journal.

Both keep the same protocol for the loop: ``append`` each microbatch's
record, ``replace_last`` with the epoch's completed last record, ``stage_commit``
for the epoch transaction's history step (its ``write`` before LAST, its ``undo``
when LAST fails; the writer may run them while the next epoch appends),
``forget_after`` to cut the records in memory back to the last durable epoch when a
commit failed, ``discard_epoch`` for a partial epoch that will not commit. ``view`` is
what ``ctx.idps`` and ``run.idps`` show; ``full()`` the whole committed history
for callbacks that declare ``history_access = "full"`` (``open_epoch=True``, at
``on_epoch_end``, which runs before the epoch commits: with the epoch's records).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from nnx._foundation.records import NNIterationDataPoint
from nnx._journal.history_csv import render_idps_csv
from nnx._journal.reader import own_records
from nnx._journal.spec import HistoryJournal
from nnx._journal.writer import EpochPublication, JournalWriter, epoch_summary

__all__ = ["EagerHistory", "HistoryRun", "JournalHistory", "open_history"]


class HistoryRun(Protocol):
    """What a history writes into of its run (NNRun is one). A protocol rather than NNRun,
    so this module needs nothing of the run module (which the loop builds over it)."""

    idps: list[NNIterationDataPoint]
    journal: Any

    @property
    def path(self) -> Path: ...
    def history_text(self, records: list[NNIterationDataPoint]) -> str | None: ...
    def write_history_text(self, text: str) -> None: ...


class _EagerStep:
    """One commit's idps.csv, rendered when staged (in the training thread, where the
    records' deferred fields are computed) and written by the commit's writer."""

    def __init__(self, run: HistoryRun, records: list[NNIterationDataPoint],
                 epoch: int) -> None:
        self.run, self.records, self.epoch = run, records, epoch
        self.text = run.history_text(records)

    def write(self) -> None:
        if self.text is not None:
            self.run.write_history_text(self.text)

    def undo(self) -> None:
        if self.text is not None:  # the records before the epoch: rendered when staged
            self.run.write_history_text(
                render_idps_csv([r for r in self.records if r.epoch < self.epoch]))


class _JournalStep:
    """One commit's journal epoch: its data written (unflushed) when staged, then
    flushed and published, or the previous manifest republished."""

    def __init__(self, writer: JournalWriter, publication: EpochPublication) -> None:
        self.writer, self.publication = writer, publication

    def write(self) -> None:
        self.writer.publish(self.publication)

    def undo(self) -> None:
        self.writer.unpublish(self.publication)


class EagerHistory:
    """Every record in memory; idps.csv grown by each commit's lines."""

    def __init__(self, run: HistoryRun) -> None:
        self.run = run

    @property
    def view(self) -> list[NNIterationDataPoint]:
        return self.run.idps

    def append(self, idp: NNIterationDataPoint) -> None:
        self.run.idps.append(idp)

    def replace_last(self, idp: NNIterationDataPoint) -> None:
        self.run.idps[-1] = idp

    def _drop(self, epoch: int) -> None:
        while self.run.idps and self.run.idps[-1].epoch == epoch:
            self.run.idps.pop()

    def discard_epoch(self, epoch: int) -> None:
        self._drop(epoch)

    def stage_commit(self, epoch: int, idp: NNIterationDataPoint) -> _EagerStep:
        return _EagerStep(self.run, list(self.run.idps), epoch)

    def forget_after(self, epoch: int) -> None:
        while self.run.idps and self.run.idps[-1].epoch > epoch:
            self.run.idps.pop()

    def full(self, open_epoch: bool = False) -> list[NNIterationDataPoint]:
        return self.run.idps  # without a journal, the plain running list (open epoch too)


class JournalHistory:
    """A bounded window in memory; each epoch written once as journal chunks."""

    def __init__(self, run: HistoryRun, journal: HistoryJournal) -> None:
        self.run = run
        self.writer = JournalWriter(run.path, journal)
        run.journal = journal
        run.idps = self.writer.window  # type: ignore[assignment]

    @property
    def view(self) -> Any:
        return self.writer.window

    def append(self, idp: NNIterationDataPoint) -> None:
        self.writer.append(idp)

    def replace_last(self, idp: NNIterationDataPoint) -> None:
        self.writer.replace_last(idp)

    def discard_epoch(self, epoch: int) -> None:
        self.writer.discard_epoch()

    def stage_commit(self, epoch: int, idp: NNIterationDataPoint) -> _JournalStep:
        return _JournalStep(self.writer, self.writer.stage_epoch(epoch, epoch_summary(idp)))

    def forget_after(self, epoch: int) -> None:
        self.writer.forget_unpublished()

    def full(self, open_epoch: bool = False) -> tuple[NNIterationDataPoint, ...]:
        # Up to the journal's own published epoch: LAST lags it while an epoch commits.
        committed = tuple(own_records(self.run.path, self.writer.committed_epoch))
        if not open_epoch:
            return committed  # read-only, like the window
        return committed + tuple(self.writer.open_records())


def open_history(run: HistoryRun, journal: HistoryJournal | None) -> EagerHistory | JournalHistory:
    return EagerHistory(run) if journal is None else JournalHistory(run, journal)
