"""export_history_csv: a run's committed history in the legacy idps.csv layout."""

from __future__ import annotations

import os
from pathlib import Path

from nnx._foundation.atomic import atomic_write_text
from nnx._journal.history_csv import render_idps_csv
from nnx.history._runs import RunRef
from nnx.history.reader import iter_history

__all__ = ["export_history_csv"]


def export_history_csv(run_id_or_dir: RunRef, path: str | os.PathLike[str], *,
                       root: str | os.PathLike[str] = "runs", lineage: bool = False,
                       last_epoch: int | None = None) -> Path:
    """Write the committed history to ``path`` as idps.csv is written (same columns,
    order and cells), atomically; returns the written path.

    The records are held in memory while the table is built; stream
    :func:`iter_history` for larger histories. ``lineage`` and ``last_epoch``
    are as for :func:`iter_history`.
    """
    records = list(iter_history(run_id_or_dir, root=root, lineage=lineage,
                                last_epoch=last_epoch))
    return atomic_write_text(path, render_idps_csv(records))
