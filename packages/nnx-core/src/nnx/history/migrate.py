"""migrate_history: move an existing run's idps.csv into a history journal (§4.5).

The journal is written unpublished, flushed, read back and compared with the
CSV's records; only then is the manifest published and the CSV removed. An
unpublished leftover (history/ without journal.json) is replaced; a migration
interrupted after publishing is finished (the CSV removed once the journal is
checked against it). run.yaml and the run id are untouched.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from nnx._foundation.atomic import fsync_dir
from nnx._foundation.records import NNIterationDataPoint
from nnx._journal.errors import HistoryCorruptionError
from nnx._journal.format import HISTORY_DIR, JournalManifest, encode_line
from nnx._journal.history_csv import read_idps_csv
from nnx._journal.spec import HistoryJournal
from nnx._journal.store import iter_journal, load_manifest
from nnx._journal.writer import JournalWriter, epoch_summary
from nnx._persistence.last_epoch import committed_epoch

__all__ = ["migrate_history"]


def _never(_: str) -> bool:
    return False


def _check_same(hdir: Path, manifest: JournalManifest,
                expected: Sequence[NNIterationDataPoint]) -> None:
    got = [encode_line(r.state()) for r in iter_journal(hdir, manifest, None)]
    if got != [encode_line(r.state()) for r in expected]:
        raise HistoryCorruptionError(f"{hdir} does not read back as the run's idps.csv; "
                                     "the CSV is kept")


def _remove_csv(csv: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(csv)
    fsync_dir(csv.parent)


def migrate_history(run_id: str, *, spec: HistoryJournal, root: str | os.PathLike[str] = "runs",
                    discard_uncommitted: bool = False,
                    is_leased: Callable[[str], bool] = _never) -> JournalManifest:
    """Move run ``run_id``'s idps.csv into a journal configured by ``spec``.

    Refuses (nothing written or deleted) the ``best`` pointer (ValueError), a
    run whose lease is held (``is_leased(run_id)``; RuntimeError), and, unless
    ``discard_uncommitted``, a CSV holding records past LAST's epoch
    (ValueError). Returns the published manifest; a run already migrated is
    left as it is.
    """
    if not isinstance(spec, HistoryJournal):
        raise TypeError(f"spec must be a HistoryJournal; got {type(spec).__name__}")
    run_dir = Path(root) / run_id
    if run_id in ("best", "", ".", "..") or "/" in run_id or os.sep in run_id \
            or run_dir.is_symlink():
        raise ValueError(f"migrate_history: {run_id!r} is not a run id (migrate a run by its "
                         "own id, not through the runs/best pointer)")
    if is_leased(run_id):
        raise RuntimeError(f"migrate_history: run {run_id} is being trained (its lease is "
                           "held); migrate it once training ends")
    if not (run_dir / "run.yaml").is_file():
        raise FileNotFoundError(f"no run {run_id!r} under {root} (no run.yaml)")
    hdir, csv = run_dir / HISTORY_DIR, run_dir / "idps.csv"
    published = load_manifest(hdir)
    if not csv.is_file():
        if published is not None:
            return published  # already migrated
        raise FileNotFoundError(f"run {run_id} has no idps.csv to migrate")
    records = read_idps_csv(csv.read_text(encoding="utf-8"))
    last = committed_epoch(run_dir)
    kept = [r for r in records if last is None or r.epoch <= last]
    if len(kept) != len(records) and not discard_uncommitted:
        raise ValueError(f"migrate_history: idps.csv of run {run_id} holds "
                         f"{len(records) - len(kept)} records past LAST's epoch {last}, which "
                         "a migration would delete; pass discard_uncommitted=True to drop them")
    if published is not None:  # interrupted after publishing: check, then finish
        _check_same(hdir, published, kept)
        _remove_csv(csv)
        return published
    if hdir.exists():
        shutil.rmtree(hdir)  # an unpublished leftover of an interrupted migration
    writer = JournalWriter(run_dir, spec)
    unsynced: list[Path] = []
    for epoch, group in itertools.groupby(kept, key=lambda r: r.epoch):
        epoch_records = list(group)
        for record in epoch_records:
            writer.append(record)
        unsynced += writer.stage_epoch(epoch, epoch_summary(epoch_records[-1])).unsynced
    manifest = writer._base
    hdir.mkdir(exist_ok=True)
    writer._flush(unsynced)
    _check_same(hdir, manifest, kept)
    writer._publish(manifest)
    _remove_csv(csv)
    return manifest
