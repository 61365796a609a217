"""The one file-lock helper: advisory ``flock`` locks on lock files beside what they guard.

Lock order everywhere (spec §4.1): lease → admission → ``.best.lock`` when a
run is reserved or overwritten; lease → ``.run.lock`` → ``.best.lock`` when a
run saves. A lease is held for a whole ``train()`` and is taken without
waiting: a second process training the same run id is refused at once.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: locks degrade to no-ops (documented in docs/durability.md)
    fcntl = None  # type: ignore[assignment]

from nnx._foundation.safe_paths import UnsafePathError, check_inside

__all__ = ["LockBusyError", "file_lock", "lock_is_held"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LockBusyError(RuntimeError):
    """A non-blocking lock is held by another process."""


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str], *, blocking: bool = True,
              root: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on ``path`` (created when missing) for the block.

    ``root``: the runs root ``path`` lies under; no component below it may be a
    symlink (:func:`~nnx._foundation.safe_paths.check_inside`, UnsafePathError), so
    a planted link never makes the lock, or its missing directories, appear
    elsewhere. The lock file itself is never followed when it is a link."""
    lock_path = Path(path)
    if root is not None:
        check_inside(root, lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    if root is not None:
        check_inside(root, lock_path)  # mkdir followed nothing a check had not seen
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{lock_path.as_posix()} is a symbolic link; NNx never "
                                  "follows a lock file: remove it", path=lock_path,
                                  link=lock_path) from None
        raise
    try:
        if fcntl is not None:
            flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
            try:
                fcntl.flock(fd, flags)
            except BlockingIOError:
                raise LockBusyError(f"{lock_path} is held by another process") from None
        yield lock_path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def lock_is_held(path: str | os.PathLike[str]) -> bool:
    """Whether a process holds ``path``'s lock now, probed without waiting and without
    creating anything: a missing lock file is free. The probe takes a shared lock, so
    probers never block one another; a holder of the exclusive lock makes it fail."""
    if fcntl is None:
        return False  # no locks to probe where they degrade to no-ops
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:  # missing (never locked) or unreadable: nothing to report
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the probe's own shared lock at once
    return False
