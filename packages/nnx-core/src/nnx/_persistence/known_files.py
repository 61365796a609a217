"""What this process knows a file holds, so that a commit need not read back what it wrote.

An epoch commit publishes LAST's and BEST's manifests, then derives two caches from
the same facts: the score beside runs/best (bound to BEST's manifest digest) and the
listing summary (LAST's and BEST's points, the previous summary's BEST row, the
digests of run.yaml and metadata.yaml). Each writer :func:`remember`\\ s what it wrote
(the manifest's point and the SHA-256 of its bytes as written; the summary's body),
and :func:`recall` gives it back instead of a read and a parse.

An entry is bound to the file's identity right after the write: device, inode, size,
modification and change times. A lookup takes one ``lstat`` and returns the entry
only while the path is still that very file, so a file replaced since (another
writer, a repair, a run overwritten and written again, a changed working directory)
is read as before: the same identity the listing trusts for the history it does not
re-read (:func:`nnx._persistence.run_summary.history_signature`). Every NNx writer
replaces a file by a rename, never in place, so a rewrite is always another inode.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["file_identity", "recall", "remember"]

#: Entries kept (the files of the runs a process commits lately; a few per run).
_LIMIT = 256
_KNOWN: OrderedDict[str, tuple[tuple[int, ...], Any]] = OrderedDict()
_LOCK = threading.Lock()  # a commit may be written by a background thread


def file_identity(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """(device, inode, size, mtime ns, ctime ns) of the regular file at ``path``; None
    when there is none (missing, a link, a directory)."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def remember(path: str | os.PathLike[str], value: Any,
             identity: tuple[int, ...] | None = None) -> None:
    """Keep ``value`` as what ``path`` holds: the file as it is now, or as ``identity``
    found it (taken before reading it, so a file replaced meanwhile is never matched)."""
    identity = identity if identity is not None else file_identity(path)
    key = os.path.abspath(path)
    with _LOCK:
        _KNOWN.pop(key, None)
        if identity is None:
            return
        _KNOWN[key] = (identity, value)
        while len(_KNOWN) > _LIMIT:
            _KNOWN.popitem(last=False)


def recall(path: str | os.PathLike[str]) -> Any | None:
    """What :func:`remember` kept for ``path`` while it is still the same file; else None."""
    key = os.path.abspath(path)
    with _LOCK:
        entry = _KNOWN.get(key)
    if entry is None:
        return None
    return entry[1] if file_identity(path) == entry[0] else None
