"""Promotions owed to runs/best (docs/durability.md, "The epoch transaction").

A run whose epoch will commit a BEST first drops an empty marker
``runs/.best-pending/<id>``, before that epoch's LAST. A fit keeps its marker
from its first BEST to its end (one directory flush per fit) and clears it
under ``.best.lock`` when nothing is owed (EpochCommit.release_marker); other
promotions clear it (``promote_best``, ``settle_owed``). A process killed (or
failing) between a BEST and its promotion leaves the marker, and the next
promotion or election in that root reads the marked run's committed BEST like
any candidate's, moves runs/best to it when it scores lower, and clears the
marker. So a crash between a BEST
commit and its hand-over never leaves runs/best on a worse run for good, and
the common promotion still reads only the incumbent plus the few marked runs.

A marker of a run whose lease is held belongs to a live fit, which promotes
itself: it is read but kept. The directory is flushed once after the marker
is created, so a BEST that survives a power loss has its marker too.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from nnx._foundation.atomic import fsync_dir
from nnx._foundation.locking import lock_is_held
from nnx._foundation.safe_paths import check_inside, inside
from nnx._foundation.validation import check_run_id

__all__ = ["PENDING_DIR", "clear_pending", "mark_pending", "pending_runs"]

PENDING_DIR = ".best-pending"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def mark_pending(root: Path, run_id: str) -> None:
    """Record that ``run_id`` is about to commit a BEST its promotion has to hand over."""
    directory = check_inside(root, root / PENDING_DIR)
    directory.mkdir(exist_ok=True)
    marker = inside(root, PENDING_DIR, run_id, what="run id")
    if marker.exists():
        return  # an earlier epoch's, not yet cleared: already durable
    os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o666))
    fsync_dir(directory)


def pending_runs(root: Path) -> list[str]:
    """The run ids with a marker, sorted; names that are not run ids are ignored."""
    directory = root / PENDING_DIR
    if not directory.is_dir() or directory.is_symlink():
        return []
    found = []
    for entry in os.listdir(directory):
        with contextlib.suppress(ValueError):
            found.append(check_run_id("marker", entry))
    return sorted(found)


def clear_pending(root: Path, run_id: str, *, unless_live: bool = False) -> None:
    """Remove ``run_id``'s marker (the caller holds ``.best.lock``). ``unless_live``:
    keep it while the run's lease is held (its own fit will promote it)."""
    if unless_live and lock_is_held(root / ".leases" / f"{run_id}.lock"):
        return
    with contextlib.suppress(FileNotFoundError, ValueError):
        inside(root, PENDING_DIR, run_id, what="run id").unlink()
