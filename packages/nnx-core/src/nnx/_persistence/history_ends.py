"""Whether a run's history loads, read from its ends only (spec §4.1, §4.5).

What :meth:`NNRun.load` would refuse (a missing history LAST commits, a torn
idps.csv, a damaged journal, a history shorter than LAST:
:mod:`nnx._persistence.history_completeness`), decided from idps.csv's header
and last row or the journal's manifest and index, so ``nnx runs list``, the
runs/best election and ``iter_history`` can ask "does this history load?"
without parsing it.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from nnx._journal.format import HISTORY_DIR, MANIFEST
from nnx._journal.store import load_manifest, read_index
from nnx._persistence.history_completeness import LastMark, check_ends_at, read_mark
from nnx._persistence.run_damage import RunDamagedError, reading

__all__ = ["check_history_ends"]

_TAIL = 65536  # bytes read from a CSV's end: many rows, however wide


def _row(line: bytes) -> list[str]:
    return next(csv.reader(io.StringIO(line.decode("utf-8"))))


def _scan_committed(path: Path, columns: list[str], mark: LastMark) -> tuple[int, int] | None:
    """The last row at or before LAST's epoch, by reading the whole file: only for a
    history newer than LAST (a kill between the history step and LAST), which is rare."""
    epoch_at, iter_at = columns.index("epoch"), columns.index("iter_idx")
    found = None
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle)
        next(rows, None)  # the header
        for row in rows:
            epoch = int(row[epoch_at])
            if epoch <= mark.epoch:
                found = (epoch, int(row[iter_at]))
    return found


def _check_csv_ends(run_id: str, path: Path, mark: LastMark | None) -> None:
    """idps.csv's header and last row agree on the columns (a torn tail is damage), and
    the last committed row is the record LAST commits."""
    with reading(run_id, path):
        with path.open("rb") as handle:
            header = handle.readline()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(len(header), size - _TAIL))
            tail = handle.read().rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
        if not header:
            raise ValueError("no header row")
        columns = _row(header)
        last = None
        if tail and size > len(header):  # else a header alone: no record
            row = _row(tail)
            if len(row) != len(columns):
                raise ValueError(f"its last row has {len(row)} of {len(columns)} fields (torn)")
            last = (int(row[columns.index("epoch")]), int(row[columns.index("iter_idx")]))
        if mark is not None and last is not None and last[0] > mark.epoch:
            last = _scan_committed(path, columns, mark)
    if mark is not None:
        check_ends_at(run_id, path, last, mark)


def _check_journal(run_id: str, path: Path, mark: LastMark | None) -> None:
    """The journal's manifest and index chain (no chunk is read), and its last indexed
    chunk at or before LAST's epoch ends with the record LAST commits. A chunk never
    spans an epoch, so the index alone tells where each epoch ends."""
    hdir = path / HISTORY_DIR
    with reading(run_id, hdir):
        manifest = load_manifest(hdir)
        entries = [] if manifest is None else read_index(hdir, manifest)
    if mark is None:
        return
    last = None
    for entry in entries:
        if entry.last_epoch <= mark.epoch:
            last = (entry.last_epoch, entry.last_iter)
    check_ends_at(run_id, hdir / MANIFEST, last, mark)


def check_history_ends(run_id: str, path: Path, committed: int | LastMark | None) -> None:
    """What NNRun.load refuses of the history of the run at ``path`` whose LAST commits
    ``committed`` (None: no LAST yet), from the history's ends only. ``committed`` is
    LAST's epoch, or its :class:`LastMark` when the caller read LAST's record already;
    given an epoch, LAST's record is read here (its mark says where the history ends)."""
    if committed is None and (path / ".history-committed-by-last").is_file():
        return  # before the first LAST nothing is committed, so nothing is read
    mark = committed
    if isinstance(committed, int):
        last = path / "checkpoints" / "last.pt"
        with reading(run_id, last):
            mark = read_mark(last)
    assert mark is None or isinstance(mark, LastMark)
    if (path / HISTORY_DIR / MANIFEST).is_file():
        _check_journal(run_id, path, mark)
        return
    history = path / "idps.csv"
    if not history.is_file():
        if mark is not None:
            raise RunDamagedError(run_id, history, f"missing, but LAST commits epoch "
                                                   f"{mark.epoch}")
        return
    _check_csv_ends(run_id, history, mark)
