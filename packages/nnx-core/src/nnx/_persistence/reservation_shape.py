"""What an empty reservation looks like on disk (:mod:`nnx._persistence.reservation`),
in a module of its own so that ``nnx runs list`` can recognize one without loading
torch (the admission code around it imports the BEST pointer's writer, which does)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = ["entries", "is_empty_reservation"]

#: What FitLoop._reserve writes before run.yaml, each empty: the history marker and
#: save_config's lock file (plus the empty checkpoints/ admit_run makes).
_RESERVATION_FILES = frozenset({".history-committed-by-last", ".run.lock"})
#: The atomic writer's temps of the marker and of run.yaml (a kill before the rename).
_RESERVATION_TEMP = re.compile(r"^\.(?:history-committed-by-last|run\.yaml)\.[0-9a-f]{8}$")


def is_empty_reservation(path: Path) -> bool:
    """Whether ``path`` is a run directory a fit reserved and was killed in before it
    wrote run.yaml: a real directory holding nothing but an empty ``checkpoints/``, the
    empty history marker and run lock, and the atomic writer's temps of those and of
    run.yaml. Anything else in it (any other file, a link, a checkpoint) makes it
    something a user or a run could need, which only ``overwrite_existing`` replaces."""
    found = entries(path)
    return found is not None and all(_reservation_entry(e) for e in found)


def entries(path: Path) -> list[os.DirEntry[str]] | None:
    """The entries of a real directory (not a link), or None."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return None
        return list(os.scandir(path))
    except OSError:
        return None


def _reservation_entry(entry: os.DirEntry[str]) -> bool:
    if entry.name == "checkpoints":
        return entry.is_dir(follow_symlinks=False) and entries(Path(entry.path)) == []
    if not entry.is_file(follow_symlinks=False):
        return False
    if entry.name in _RESERVATION_FILES:
        return entry.stat(follow_symlinks=False).st_size == 0
    return _RESERVATION_TEMP.match(entry.name) is not None
