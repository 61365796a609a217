"""What a killed writer leaves inside a run directory, and removing it for ``nnx runs verify
--repair`` and at the start of a resume from the run (docs/durability.md). Removing a
source's stranded temps writes no data to it (spec §14.3): it leaves the directory as
the source's own uninterrupted writers would have.

NNx names every temp it writes, so a stranded one is recognizable by name:

* ``.<name>.<8 hex>``: the atomic writer's temp of any file (run.yaml,
  metadata.yaml, idps.csv, provenance, a checkpoint or its sidecar, a staged
  manifest, a journal chunk or journal.json) and the compatibility link's
  ``.<tag>.pt.opt.pt.<8 hex>``, in the run directory, ``checkpoints/`` and
  ``history/``. A kill between writing and renaming leaves one, as large as
  the file it was to become; nothing reuses or deletes it;
* ``<tag>.pt.manifest.json.staged``: a staged manifest a writer died with,
  settled as the tag's next save settles it
  (:func:`~nnx._persistence.resume_point.settle_staged`);
* ``history/chunk-<n>.jsonl`` past what journal.json publishes: an epoch's
  chunks written before a kill, which no reader reads and no writer continues;
* ``checkpoints/.optim-staging.<32 hex>/``: the optimizer shards a sharded fit's ranks
  wrote for a commit that a kill stopped before a point took them
  (:mod:`nnx._persistence.optimizer_shards`).

:func:`remove_leftovers` removes them only under the run's lease (held by the
taken here without waiting), so a live writer of the run, which holds the lease
for its whole fit, is never robbed of a temp it is writing; a held lease (this
process's own fit included) means nothing is touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from nnx._foundation.atomic import fsync_dir
from nnx._foundation.locking import LockBusyError, file_lock
from nnx._foundation.safe_paths import check_inside, inside
from nnx._journal.errors import HistoryCorruptionError
from nnx._journal.format import HISTORY_DIR, chunk_name
from nnx._journal.store import load_manifest
from nnx._persistence.last_epoch import committed_epoch
from nnx._persistence.optimizer_shards import STAGING_PREFIX, remove_tree
from nnx._persistence.resume_point import settle_staged

__all__ = ["find_best_temps", "find_leftovers", "remove_best_temps", "remove_leftovers"]

_TEMP = re.compile(r"^\.[^/\\]+\.[0-9a-f]{8}$")
_CHUNK = re.compile(r"^chunk-(\d{8})\.jsonl$")
_STAGED = ".manifest.json.staged"
_SHARD_STAGING = re.compile(rf"^{re.escape(STAGING_PREFIX)}[0-9a-f]{{32}}$")
_PLACES = ("", "checkpoints", HISTORY_DIR)  # where a run's writers write
#: runs/best's hand-over temps in the root (nnx._persistence.best, best_score): the
#: pointer's ``.best.<pid>.<32 hex>`` link and the score's ``.best.<pid>.score.<16 hex>``.
_BEST_TEMP = re.compile(r"^\.best\.\d+\.(?:score\.[0-9a-f]{16}|[0-9a-f]{32})$")


def _plain_entries(directory: Path, *, dirs: bool = False) -> list[str]:
    """The regular files (or, with ``dirs``, the directories) directly in ``directory``;
    links are left out."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(e.name for e in entries if (e.is_dir(follow_symlinks=False) if dirs
                                               else e.is_file(follow_symlinks=False)))


def _unpublished_chunks(hdir: Path, names: list[str]) -> list[str]:
    """Chunk files past the published manifest's count; none without a manifest that
    loads (an unpublished first epoch or a migration's leftover: not ours to judge), and
    none when the manifest is behind LAST (an older journal.json put back: the chunks
    past it hold committed records, the evidence of that damage, never leftovers)."""
    try:
        manifest = load_manifest(hdir)
        committed = committed_epoch(hdir.parent)
    except (HistoryCorruptionError, ValueError):
        return []
    if manifest is None or (committed is not None and (
            manifest.last_epoch is None or manifest.last_epoch < committed)):
        return []
    return [name for name in names if (m := _CHUNK.match(name)) is not None
            and int(m.group(1)) >= manifest.chunks and name == chunk_name(int(m.group(1)))]


def find_leftovers(root: str | os.PathLike[str], run_id: str) -> list[str]:
    """What :func:`remove_leftovers` would remove or settle, relative to the run
    directory, sorted (read-only; no lock)."""
    run_dir = inside(root, run_id, what="run id")
    found = []
    for place in _PLACES:
        directory = check_inside(root, run_dir / place) if place else run_dir
        names = _plain_entries(directory)
        prefix = f"{place}/" if place else ""
        found += [prefix + n for n in names if _TEMP.match(n)]
        if place == "checkpoints":
            found += [prefix + n for n in names if n.endswith(_STAGED)]
            staging = _plain_entries(directory, dirs=True)
            found += [prefix + n for n in staging if _SHARD_STAGING.match(n)]
        if place == HISTORY_DIR:
            found += [prefix + n for n in _unpublished_chunks(directory, names)]
    return sorted(found)


def _remove(run_dir: Path, names: list[str]) -> list[str]:
    removed, touched = [], set()
    for name in names:
        path = run_dir / name
        if name.endswith(_STAGED):
            outcome = settle_staged(path.with_name(path.name.removesuffix(_STAGED)))
            if outcome is not None:
                removed.append(f"{name} ({outcome})")
            continue
        if _SHARD_STAGING.match(path.name) and path.is_dir() and not path.is_symlink():
            remove_tree(path)
            removed.append(name)
            touched.add(path.parent)
            continue
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()
                removed.append(name)
                touched.add(path.parent)
    for directory in touched:
        fsync_dir(directory)
    return removed


def remove_leftovers(root: str | os.PathLike[str], run_id: str) -> list[str] | None:
    """Remove the run's :func:`find_leftovers` under its lease, taken without waiting;
    returns what was removed (a settled staged manifest as ``"<name> (made live)"`` or
    ``"<name> (removed)"``), or None when the lease is held (a fit of the run, in this
    process or another, may be writing them: nothing is touched)."""
    run_dir = inside(root, run_id, what="run id")
    try:
        with file_lock(Path(root) / ".leases" / f"{run_id}.lock", blocking=False, root=root):
            return _remove(run_dir, find_leftovers(root, run_id))
    except LockBusyError:
        return None


def find_best_temps(root: str | os.PathLike[str]) -> list[str]:
    """runs/best's hand-over temps a kill stranded in the runs root, sorted (read-only):
    links and regular files only, matched by the names their writers give them."""
    try:
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if _BEST_TEMP.match(e.name) and (
                e.is_symlink() or e.is_file(follow_symlinks=False)))
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove_best_temps(root: str | os.PathLike[str]) -> list[str] | None:
    """Remove :func:`find_best_temps` under ``.best.lock``, taken without waiting (every
    hand-over writes its temps while holding it, so none removed here is live); a link
    is removed, never its target. The names removed, or None when the lock is held."""
    base = Path(root)
    try:
        with file_lock(base / ".best.lock", blocking=False, root=base):
            removed = []
            for name in find_best_temps(base):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(base / name)
                    removed.append(name)
            if removed:
                fsync_dir(base)
            return removed
    except LockBusyError:
        return None
