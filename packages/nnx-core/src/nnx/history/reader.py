"""Reading committed history: whole, lazily chunk by chunk, or just its tail (§4.5).

Readers trust only what journal.json covers, check every chunk they read
against its SHA-256 and the index against its hash chain, and write nothing.
``iter_history`` and ``export_history_csv`` read CSV runs (idps.csv) too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.validation import check_count
from nnx.history._format import HISTORY_DIR, JournalManifest
from nnx.history._runs import RunRef, committed_epoch, own_records, resolve_run
from nnx.history._store import epoch_rows, load_manifest, read_index, tail
from nnx.history.lineage import lineage_records

__all__ = ["check_history", "iter_history", "read_epochs", "read_manifest", "read_tail"]


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


def iter_history(run_id_or_dir: RunRef, *, root: str | os.PathLike[str] = "runs",
                 lineage: bool = False, last_epoch: int | None = None
                 ) -> Iterator[NNIterationDataPoint]:
    """The run's committed records in order, read chunk by chunk.

    ``run_id_or_dir`` is a run id under ``root`` or a run directory.
    ``last_epoch`` drops records of later epochs; None reads LAST's epoch from
    ``checkpoints/last.pt`` (no limit while the run has no LAST; an unreadable
    LAST raises ValueError). ``lineage=True`` first yields the records of the
    run this one resumed from, up to the branch epoch, recursively. A corrupt
    journal raises :class:`HistoryCorruptionError`. Read up to LAST (no
    ``last_epoch``), a history that ends before the record LAST commits (cut,
    or an older copy), or a missing one, raises ``RunDamagedError`` naming the
    file before any record is returned.
    """
    run_dir = resolve_run(run_id_or_dir, root)
    limit = committed_epoch(run_dir) if last_epoch is None else last_epoch
    if last_epoch is None and limit is not None:
        # Imported here: history_ends reads journals through this package, which imports
        # this module while it initializes (a module-level import would be a cycle).
        from nnx._persistence.history_ends import check_history_ends

        check_history(run_dir)  # a corrupt journal is HistoryCorruptionError, as documented
        check_history_ends(run_dir.name, run_dir, limit)  # RunDamagedError when cut short
    if lineage:
        return lineage_records(run_dir, limit)
    return own_records(run_dir, limit)


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
