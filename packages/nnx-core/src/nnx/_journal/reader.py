"""Reading a run directory's committed history as stored: the journal or idps.csv (§4.5).

These readers see only the history's own files: they trust what journal.json
covers, check every chunk they read against its SHA-256 and the index against
its hash chain, and write nothing. Where a run's history ends (LAST's epoch),
whether it holds what LAST commits, and the lineage of a continuation are read
above, in :mod:`nnx.history` (``iter_history``), which needs the checkpoints.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.validation import check_count
from nnx._journal.format import HISTORY_DIR, JournalManifest
from nnx._journal.history_csv import read_idps_csv
from nnx._journal.store import epoch_rows, iter_journal, load_manifest, read_index, tail

__all__ = ["check_history", "epoch_ends", "own_records", "read_epochs", "read_manifest",
           "read_tail"]


def read_manifest(run_dir: str | os.PathLike[str]) -> JournalManifest | None:
    """A run's published journal manifest; None when it has no journal (yet)."""
    return load_manifest(Path(run_dir) / HISTORY_DIR)


def check_history(run_dir: str | os.PathLike[str]) -> JournalManifest | None:
    """The published manifest after checking the index against its hash chain (no chunk
    is read); None without a journal. Raises :class:`HistoryCorruptionError`."""
    hdir = Path(run_dir) / HISTORY_DIR
    manifest = load_manifest(hdir)
    if manifest is not None:
        read_index(hdir, manifest)
    return manifest


def own_records(run_dir: Path, last_epoch: int | None) -> Iterator[NNIterationDataPoint]:
    """The run's own history up to ``last_epoch``: its journal, else its idps.csv.

    A journal's manifest and index are checked before this returns.
    """
    hdir = run_dir / HISTORY_DIR
    manifest = load_manifest(hdir)
    if manifest is not None:
        return iter_journal(hdir, manifest, last_epoch)
    csv = run_dir / "idps.csv"
    if not csv.is_file():
        return iter(())
    records = read_idps_csv(csv.read_text(encoding="utf-8"))
    return iter([r for r in records if last_epoch is None or r.epoch <= last_epoch])


def read_tail(run_dir: str | os.PathLike[str], retention: int, last_epoch: int | None
              ) -> list[NNIterationDataPoint]:
    """The last ``retention`` committed records (epoch <= ``last_epoch``; None: no limit),
    reading only the chunks that hold them. [] when the run has no published journal."""
    retention = check_count("retention", retention)
    hdir = Path(run_dir) / HISTORY_DIR
    manifest = load_manifest(hdir)
    return [] if manifest is None else tail(hdir, manifest, retention, last_epoch)


def read_epochs(run_dir: str | os.PathLike[str], *, last_epoch: int | None = None
                ) -> list[dict[str, Any]]:
    """The published epochs.jsonl rows: ``{"epoch", "records", "summary"}`` per epoch.

    Rows past ``last_epoch`` are left out (None: no limit); [] without a journal.
    """
    hdir = Path(run_dir) / HISTORY_DIR
    manifest = load_manifest(hdir)
    return [] if manifest is None else epoch_rows(hdir, manifest, last_epoch)


def epoch_ends(run_dir: str | os.PathLike[str], last_epoch: int | None
               ) -> list[NNIterationDataPoint]:
    """The last record of each epoch up to ``last_epoch`` (None: no cut), in epoch order:
    a journal's epochs.jsonl summaries, else idps.csv's last row per epoch; [] without a
    history. The cut is the caller's: no checkpoint is opened here, so a reader that knows
    the committed epoch from elsewhere (an attempt record) never unpickles LAST."""
    path = Path(run_dir)
    hdir = path / HISTORY_DIR
    manifest = load_manifest(hdir)
    if manifest is not None:
        return [NNIterationDataPoint.from_state(row["summary"])
                for row in epoch_rows(hdir, manifest, last_epoch)]
    csv = path / "idps.csv"
    if not csv.is_file():
        return []
    by_epoch = {idp.epoch: idp for idp in read_idps_csv(csv.read_text(encoding="utf-8"))
                if last_epoch is None or idp.epoch <= last_epoch}
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]
