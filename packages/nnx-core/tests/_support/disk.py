"""A snapshot of a directory tree, to prove a refusal created, changed or deleted nothing.

Entries are recorded without following symbolic links (a link is its target's text), so
a planted link is compared as the link, and whatever it points at is snapshotted where
it really lies (the tests snapshot the whole tmp_path: the runs root and outside it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["tree"]


def tree(base: Path) -> dict[str, tuple[str, object, int]]:
    """``{relative path: (kind, content, mtime_ns)}`` of everything under ``base``: a
    file's bytes, a link's target, a directory's nothing."""
    found: dict[str, tuple[str, object, int]] = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = os.lstat(path)
            key = path.relative_to(base).as_posix()
            if stat.S_ISLNK(info.st_mode):
                found[key] = ("link", os.readlink(path), info.st_mtime_ns)
            elif stat.S_ISDIR(info.st_mode):
                found[key] = ("dir", None, info.st_mtime_ns)
            else:
                found[key] = ("file", path.read_bytes(), info.st_mtime_ns)
    return found
