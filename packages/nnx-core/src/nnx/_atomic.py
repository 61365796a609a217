"""The one atomic writer (spec §4.2): destination-local temp file, then rename.

A reader, or a process interrupted mid-write (KeyboardInterrupt included),
sees either the previous file or the new one at the destination, never a
half-written file. The temp lives next to the *resolved* destination, so the
rename never crosses filesystems. The writer owns the temp until the rename: a
failure while opening, writing, flushing, closing or renaming releases the
descriptor, unlinks the temp and re-raises the original error (a cleanup error
never masks it). An fsync error is tolerated; after a successful rename the
temp name is never touched again.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "fsync_dir"]

PathLike = str | os.PathLike[str]


def _fsync(fd: int) -> None:
    with contextlib.suppress(OSError):  # durability is best-effort; the rename is atomic
        os.fsync(fd)


def fsync_dir(path: PathLike) -> None:
    """Flush a directory entry (the rename) to disk where the platform allows it."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any], *, sync: bool = True) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temp file that replaces it.

    Returns the resolved destination. ``sync=False`` skips the fsync (for
    files whose durability an enclosing commit handles).
    """
    dest = Path(os.path.realpath(os.fspath(path)))
    tmp = dest.parent / f".{dest.name}.{secrets.token_hex(4)}"
    # O_EXCL: never reuse a name; mode 0o666 so the umask decides, as for open().
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            fd = -1  # the file object owns the descriptor now
            write(handle)
            handle.flush()
            if sync:
                _fsync(handle.fileno())
        os.replace(tmp, dest)
    except BaseException:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return dest


def atomic_write_bytes(path: PathLike, data: bytes, *, sync: bool = True) -> Path:
    return atomic_write(path, lambda f: f.write(data), sync=sync)


def atomic_write_text(path: PathLike, text: str, *, sync: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), sync=sync)


def serialized(save: Callable[[IO[bytes]], Any]) -> bytes:
    """Run a writer into memory (to hash or size what it would write)."""
    buffer = io.BytesIO()
    save(buffer)
    return buffer.getvalue()
