"""iter_history: a run's committed records, up to LAST, its lineage included on request (§4.5).

A run is named by id (``"best"`` too) or directory; its history is cut at
LAST's epoch and checked to hold the record LAST commits before any record is
returned. The journal-level readers (``read_tail``, ``read_epochs``,
``read_manifest``, ``check_history``) read the history's own files only and
live below persistence, in :mod:`nnx._journal.reader`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from nnx._foundation.records import NNIterationDataPoint
from nnx._journal.reader import check_history, own_records
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.last_epoch import committed_epoch
from nnx.history._runs import RunRef, resolve_run
from nnx.history.lineage import lineage_records

__all__ = ["iter_history"]


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
        check_history(run_dir)  # a corrupt journal is HistoryCorruptionError, as documented
        check_history_ends(run_dir.name, run_dir, limit)  # RunDamagedError when cut short
    if lineage:
        return lineage_records(run_dir, limit)
    return own_records(run_dir, limit)
