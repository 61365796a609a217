"""Whether a run's history loads, read from its ends only (spec §4.1, §4.5).

What :meth:`NNRun.load` would refuse (a missing history LAST commits, a torn
idps.csv, a damaged journal), decided from idps.csv's header and last row or
the journal's manifest and index, so ``nnx runs list`` and the runs/best
election can ask "does this history load?" without parsing it.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from nnx._persistence.run import RunDamagedError, _reading
from nnx.history.reader import check_history

__all__ = ["check_history_ends"]


def _check_csv_ends(run_id: str, path: Path) -> None:
    """idps.csv's header and last row agree on the columns: a torn tail is damage."""
    with _reading(run_id, path):
        with path.open("rb") as handle:
            header = handle.readline()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(len(header), size - 65536))
            tail = handle.read().rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
        if not header:
            raise ValueError("no header row")
        if not tail or size <= len(header):
            return  # a header alone: no record yet
        columns = next(csv.reader(io.StringIO(header.decode("utf-8"))))
        row = next(csv.reader(io.StringIO(tail.decode("utf-8"))))
        if len(row) != len(columns):
            raise ValueError(f"its last row has {len(row)} of {len(columns)} fields (torn)")
        int(row[columns.index("epoch")])


def check_history_ends(run_id: str, path: Path, committed: int | None) -> None:
    """What NNRun.load refuses of the history of the run at ``path`` whose LAST commits
    ``committed`` (None: no LAST yet), from the history's ends only."""
    if committed is None and (path / ".history-committed-by-last").is_file():
        return  # before the first LAST nothing is committed, so nothing is read
    if (path / "history" / "journal.json").is_file():
        with _reading(run_id, path / "history"):
            check_history(path)
        return
    history = path / "idps.csv"
    if not history.is_file():
        if committed is not None:
            raise RunDamagedError(run_id, history, f"missing, but LAST commits epoch "
                                                   f"{committed}")
        return
    _check_csv_ends(run_id, history)
