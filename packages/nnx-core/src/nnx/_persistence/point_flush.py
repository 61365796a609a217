"""When a published resume point's directory is flushed: at once, or once for a commit.

A point is saved file by file, each flushed before its rename, and made live by the
rename of its manifest; the flush of its directory then makes those renames last
through a power loss, and only after it are the files the point no longer names
removed (:mod:`nnx._persistence.resume_point`). An epoch commit publishes LAST, the
phase points and BEST one after another in the one ``checkpoints/`` directory, with
nothing between them that needs the earlier ones to be durable yet. Inside
:func:`one_directory_flush` each point's flush and clean-up wait, and the directory
is flushed once for all of them (docs/durability.md, "Flushes per commit"):

* when something outside the directory is about to vouch for those points (the
  runs/best hand-over calls :func:`settle_points` before it moves the pointer);
* at the end of the block, also when it ends with an error (LAST may be live
  already: it is flushed as it would have been), unless that flush itself fails.

The clean-ups (each point's previous generation's sidecar) run at the end of the
block, and only for points whose directory was flushed: a removal that reached the
disk before the manifest naming the new sidecar did would leave the previous point
torn. Until the flush, a power loss may take back the batch's points as a kill before
them would: their files are flushed before their renames, so what survives is the
complete earlier point, or a staged one the next save settles.

Outside the block, nothing waits. The batch is per thread (a context variable), so a
commit written by a background thread defers only its own points.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from nnx._foundation.atomic import fsync_dir

__all__ = ["one_directory_flush", "point_published", "settle_points"]


@dataclass
class _Batch:
    #: Directories with a point published since their last flush, in publishing order,
    #: and the clean-ups of those points.
    pending: dict[str, list[Callable[[], None]]] = field(default_factory=dict)
    #: Clean-ups whose directory is flushed: run at the end of the block.
    ready: list[Callable[[], None]] = field(default_factory=list)


_BATCH: ContextVar[_Batch | None] = ContextVar("nnx_point_flush_batch", default=None)


def point_published(directory: Path, later: Callable[[], None]) -> bool:
    """A point's manifest went live in ``directory``. Outside a batch: flush it now and
    return True (the caller then removes what the point no longer names, under the lock
    it holds). Inside one: return False; ``later`` (the same removal, taking that lock
    itself) runs at the end of the block, once the directory is flushed."""
    batch = _BATCH.get()
    if batch is None:
        fsync_dir(directory, strict=True)
        return True
    batch.pending.setdefault(os.fspath(directory), []).append(later)
    return False


def settle_points() -> None:
    """Flush, once each, the directories of the points published so far in this batch:
    before anything outside them vouches for those points. A no-op outside a batch or
    with nothing pending."""
    batch = _BATCH.get()
    if batch is None:
        return
    while batch.pending:
        directory = next(iter(batch.pending))
        fsync_dir(directory, strict=True)
        batch.ready.extend(batch.pending.pop(directory))


@contextlib.contextmanager
def one_directory_flush() -> Iterator[None]:
    """Defer the directory flushes of the points published in the block to one flush per
    directory (see the module docstring). Nested blocks join the outermost one."""
    if _BATCH.get() is not None:
        yield
        return
    batch = _Batch()
    token = _BATCH.set(batch)
    try:
        yield
    except BaseException:
        # The points already live are flushed as they would have been; a failure of that
        # flush or of a clean-up never masks the error that ended the block.
        with contextlib.suppress(OSError):
            settle_points()
        with contextlib.suppress(OSError):
            _run(batch.ready)
        raise
    else:
        settle_points()
        _run(batch.ready)
    finally:
        _BATCH.reset(token)


def _run(cleanups: list[Callable[[], None]]) -> None:
    while cleanups:
        cleanups.pop(0)()
