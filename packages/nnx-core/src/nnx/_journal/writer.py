"""JournalWriter: how the training loop writes a journal run's history (§4.2, §4.5).

The loop drives one writer per run, in the epoch transaction's "history" step::

    writer = JournalWriter(run.path, journal)       # opens (or continues) runs/<id>/history/
    ctx.idps = writer.window                        # live read-only view (HistoryWindow)
    for batch in epoch:
        writer.append(idp)                          # every microbatch record, in order
    writer.replace_last(idp_with_validation)        # optional: the epoch's last record,
                                                    # re-made with val_edp / summary / selection
    writer.commit_epoch(epoch, epoch_summary(idp))  # chunks + index + epochs row, flushed
                                                    # once, then journal.json published
    try:
        save LAST
    except BaseException:
        writer.rollback()                           # LAST failed: previous manifest again
        raise
    # a partial epoch that is not committed: writer.discard_epoch()

``append`` keeps only the last ``retention`` records in memory. When an epoch
has more than ``chunk`` records, full chunks are written mid-epoch (neither
indexed nor fsynced yet); the newest record always stays pending, so
``replace_last`` works until the commit. ``commit_epoch`` ends the epoch's
last chunk (a chunk never spans a commit), appends one hash-chained index line
per chunk and one epochs.jsonl row, flushes every file the epoch wrote once,
and publishes the manifest atomically. Index and epochs files are cut back to
the published lengths before each append, so a torn append is repaired. A
failed ``commit_epoch`` publishes nothing and may simply be called again.
``rollback`` republishes the manifest from before the last successful
``commit_epoch`` (only while nothing was appended since; after a failed commit
it keeps the published one) and reloads the window from disk.

The epoch commit (``nnx._engine.epoch_commit``) splits ``commit_epoch`` in two, so
the flushes happen off the training thread: ``stage_epoch`` writes the epoch's data
(in the training thread; the next epoch may append right after), ``publish`` flushes
and publishes it (the commit's writer), ``unpublish`` republishes the previous manifest
when LAST failed, and ``forget_unpublished`` drops in memory what was not published.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import (
    append_at,
    atomic_write_bytes,
    atomic_write_text,
    fsync_dir,
    fsync_file,
)
from nnx._foundation.hashing import sha256_hex
from nnx._foundation.records import NNIterationDataPoint
from nnx._journal.errors import HistoryCorruptionError
from nnx._journal.format import (
    EPOCHS,
    HISTORY_DIR,
    INDEX,
    MANIFEST,
    ChunkEntry,
    JournalManifest,
    chunk_name,
    encode_line,
    line_hash,
)
from nnx._journal.spec import HistoryJournal
from nnx._journal.store import load_manifest, read_chunk, read_index, tail
from nnx._journal.window import HistoryWindow

__all__ = ["JournalWriter", "epoch_summary"]


def epoch_summary(idp: NNIterationDataPoint) -> dict[str, Any]:
    """The default epochs.jsonl summary: the state of the epoch's last record."""
    return idp.state()


@dataclass(frozen=True, slots=True)
class _Chunk:
    """A chunk file written for the open epoch, not yet indexed."""

    seq: int
    records: int
    first: NNIterationDataPoint
    last: NNIterationDataPoint
    size: int
    sha256: str

    def entry(self, prev: str) -> ChunkEntry:
        return ChunkEntry(seq=self.seq, chunk=chunk_name(self.seq), records=self.records,
                          first_epoch=self.first.epoch, last_epoch=self.last.epoch,
                          first_iter=self.first.iter_idx, last_iter=self.last.iter_idx,
                          size=self.size, sha256=self.sha256, prev=prev)


@dataclass(frozen=True)
class EpochPublication:
    """One staged epoch (:meth:`JournalWriter.stage_epoch`): the manifest that publishes
    it, the one it replaces, and the files written for it, still to be flushed."""

    manifest: JournalManifest
    previous: JournalManifest
    unsynced: tuple[Path, ...]


class JournalWriter:
    """Writes one run's history journal under ``<run_dir>/history/``."""

    def __init__(self, run_dir: str | os.PathLike[str], journal: HistoryJournal) -> None:
        if not isinstance(journal, HistoryJournal):
            raise TypeError(f"journal must be a HistoryJournal; got {type(journal).__name__}")
        self.journal = journal
        self.path = Path(run_dir) / HISTORY_DIR
        self._records: deque[NNIterationDataPoint] = deque(maxlen=journal.retention)
        self.window = HistoryWindow(self._records)
        self._pending: list[NNIterationDataPoint] = []
        self._chunks: list[_Chunk] = []  # written for the open epoch
        self._unsynced: list[Path] = []
        self._epoch: int | None = None  # the open epoch
        self.bytes_written = 0
        published = load_manifest(self.path)
        if published is None:
            published = JournalManifest(retention=journal.retention, chunk_size=journal.chunk)
        else:
            read_index(self.path, published)  # refuse to continue a corrupt journal
        self._published = self._base = published
        self._undo: JournalManifest | None = None  # what rollback republishes
        self._reload_window()

    # -- state ------------------------------------------------------------------------
    @property
    def manifest(self) -> JournalManifest:
        """The published manifest (what readers see)."""
        return self._published

    @property
    def committed_epoch(self) -> int | None:
        """The last epoch the journal has published, or None."""
        return self._published.last_epoch

    def open_records(self) -> list[NNIterationDataPoint]:
        """The open epoch's records in order: its chunks written mid-epoch (read back)
        and the ones still pending."""
        records = [r for chunk in self._chunks for r in read_chunk(self.path, chunk.entry(""))]
        return records + list(self._pending)

    @property
    def pending(self) -> int:
        """Records appended to the open epoch (written mid-epoch or not)."""
        return sum(c.records for c in self._chunks) + len(self._pending)

    # -- records ----------------------------------------------------------------------
    def append(self, idp: NNIterationDataPoint) -> None:
        """Add the next record of the open epoch (to the window, and later to disk)."""
        if not isinstance(idp, NNIterationDataPoint):
            raise TypeError(f"append takes an NNIterationDataPoint; got {type(idp).__name__}")
        last = self._base.last_epoch
        if last is not None and idp.epoch <= last:
            raise ValueError(f"JournalWriter.append: epoch {idp.epoch} is already committed "
                             f"(last committed epoch {last})")
        if self._epoch is not None and idp.epoch != self._epoch:
            raise ValueError(f"JournalWriter.append: a record of epoch {idp.epoch} while epoch "
                             f"{self._epoch} is open; call commit_epoch({self._epoch}) first")
        if len(self._pending) >= self.journal.chunk:
            self._write_chunk()
        self._pending.append(idp)
        self._records.append(idp)
        self._epoch = idp.epoch
        self._undo = None  # a new epoch began: the last commit is final

    def replace_last(self, idp: NNIterationDataPoint) -> None:
        """Replace the newest uncommitted record (same epoch and iter_idx)."""
        if not self._pending:
            raise ValueError("JournalWriter.replace_last: no uncommitted record to replace")
        old = self._pending[-1]
        if not isinstance(idp, NNIterationDataPoint) or (idp.epoch, idp.iter_idx) != (
                old.epoch, old.iter_idx):
            raise ValueError("JournalWriter.replace_last: the replacement must be a record of "
                             f"epoch {old.epoch}, iter_idx {old.iter_idx}")
        self._pending[-1] = idp
        self._records[-1] = idp

    def _write_chunk(self) -> None:
        records = self._pending
        data = b"".join(encode_line(r.state()) for r in records)
        seq = self._base.chunks + len(self._chunks)
        self.path.mkdir(exist_ok=True)
        path = atomic_write_bytes(self.path / chunk_name(seq), data, sync=False)
        self._chunks.append(_Chunk(seq=seq, records=len(records), first=records[0],
                                   last=records[-1], size=len(data), sha256=sha256_hex(data)))
        self._unsynced.append(path)
        self.bytes_written += len(data)
        self._pending = []

    # -- the epoch transaction ----------------------------------------------------------
    def commit_epoch(self, epoch: int, summary_row: Mapping[str, Any]) -> JournalManifest:
        """Write, flush and publish epoch ``epoch``; returns the published manifest."""
        self._undo = None
        publication = self.stage_epoch(epoch, summary_row)
        self.publish(publication)
        self._undo = publication.previous
        return publication.manifest

    def stage_epoch(self, epoch: int, summary_row: Mapping[str, Any]) -> EpochPublication:
        """Write epoch ``epoch``'s chunks, index lines and row, unflushed and unpublished:
        the next epoch may append at once, while :meth:`publish` flushes and publishes
        this one (the epoch commit's writer, on its own thread)."""
        previous = self._base
        manifest = self._stage_epoch(epoch, summary_row)
        unsynced, self._unsynced = tuple(self._unsynced), []
        return EpochPublication(manifest=manifest, previous=previous, unsynced=unsynced)

    def publish(self, publication: EpochPublication) -> None:
        """Flush a staged epoch's files, once, and the directory; then its manifest."""
        self._flush(publication.unsynced)
        self._publish(publication.manifest)

    def unpublish(self, publication: EpochPublication) -> None:
        """The staged epoch's LAST failed: the manifest before it is live again (the
        records in memory are cut back by :meth:`forget_unpublished`)."""
        if self.path.is_dir():
            self._write_manifest(publication.previous)
        self._published = publication.previous

    def forget_unpublished(self) -> None:
        """After a failed commit: drop every record not published (an epoch staged but
        rolled back, the open epoch) and reload the window from disk."""
        if self._base is self._published and not self._pending and not self._chunks:
            return
        self._drop_open()
        self._reload_window()

    def _stage_epoch(self, epoch: int, summary_row: Mapping[str, Any]) -> JournalManifest:
        """Write the epoch's chunks, index lines and row (nothing flushed or published)."""
        base = self._base
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"commit_epoch: epoch must be an integer >= 0; got {epoch!r}")
        if base.last_epoch is not None and epoch <= base.last_epoch:
            raise ValueError(f"commit_epoch: epoch {epoch} is already committed "
                             f"(last committed epoch {base.last_epoch})")
        if self._epoch is not None and epoch != self._epoch:
            raise ValueError(f"commit_epoch({epoch}): the open records are of epoch {self._epoch}")
        if not isinstance(summary_row, Mapping):
            raise TypeError("commit_epoch: summary_row must be a mapping")
        try:
            row = encode_line({"epoch": epoch, "records": self.pending,
                               "summary": dict(summary_row)})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"commit_epoch: summary_row is not JSON data ({exc})") from None
        self.path.mkdir(exist_ok=True)
        if self._pending:
            self._write_chunk()
        head, lines = base.index_head, []
        for chunk in self._chunks:
            line = chunk.entry(head).line()
            head = line_hash(line)
            lines.append(line)
        index = self._append(INDEX, base.index_bytes, b"".join(lines))
        epochs = self._append(EPOCHS, base.epochs_bytes, row)
        manifest = base.advanced(
            chunks=base.chunks + len(self._chunks), records=base.records + self.pending,
            epochs=base.epochs + 1, last_epoch=epoch, index_bytes=index, epochs_bytes=epochs,
            index_head=head)
        self._base, self._chunks, self._epoch = manifest, [], None
        return manifest

    def _append(self, name: str, offset: int, data: bytes) -> int:
        path = self.path / name
        try:
            length = append_at(path, offset, data, sync=False)
        except ValueError as exc:
            raise HistoryCorruptionError(f"cannot append to {path}: {exc}") from None
        if path not in self._unsynced:
            self._unsynced.append(path)
        self.bytes_written += len(data)
        return length

    def _flush(self, paths: Sequence[Path]) -> None:
        """Flush ``paths``, once each, and the directory."""
        for path in paths:
            fsync_file(path)
        fsync_dir(self.path)

    def _publish(self, manifest: JournalManifest) -> None:
        self._write_manifest(manifest)
        self._published = manifest

    def _write_manifest(self, manifest: JournalManifest) -> None:
        text = manifest.render()
        atomic_write_text(self.path / MANIFEST, text)
        fsync_dir(self.path)
        self.bytes_written += len(text.encode("utf-8"))

    def rollback(self) -> JournalManifest:
        """LAST failed: republish the manifest from before the last ``commit_epoch``.

        Undoes only a commit that succeeded with nothing appended since; after a
        failed ``commit_epoch`` (or a second call) it republishes the current
        manifest. Open records are dropped and the window is reloaded from disk.
        """
        self._drop_open()
        target = self._published if self._undo is None else self._undo
        self._undo = None
        if self.path.is_dir():
            self._write_manifest(target)
        self._published = self._base = target
        self._reload_window()
        return target

    def discard_epoch(self) -> None:
        """Forget the open epoch's records (a partial epoch that will not be committed)."""
        self._drop_open()
        self._reload_window()

    def _drop_open(self) -> None:
        self._pending, self._chunks, self._unsynced, self._epoch = [], [], [], None
        self._base = self._published

    def _reload_window(self) -> None:
        records = tail(self.path, self._published, self.journal.retention, None)
        self._records.clear()
        self._records.extend(records)
