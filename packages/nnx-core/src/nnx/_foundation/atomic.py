"""The one atomic writer (spec §4.2): destination-local temp file, then rename.

A reader, or a process interrupted mid-write (KeyboardInterrupt included),
sees either the previous file or the new one at the destination, never a
half-written file. The temp lives next to the *resolved* destination, so the
rename never crosses filesystems. The writer owns the temp until the rename: a
failure while opening, writing, flushing, closing or renaming releases the
descriptor, unlinks the temp and re-raises the original error (a cleanup error
never masks it). An fsync error is tolerated; after a successful rename the
temp name is never touched again.

An ``OSError`` (a full disk, a read-only or vanished directory) is re-raised as
an ``OSError`` with the same errno and subclass whose ``filename`` and message
name the destination, not the anonymous temp; the original stays chained as
``__cause__``. An error that already names another file passes through as it is.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import re
import secrets
import signal
import threading

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = [
    "append_at",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "fsync_dir",
    "fsync_file",
    "fsync_together",
    "interrupts_held",
    "serialized",
]

PathLike = str | os.PathLike[str]


# A filesystem that cannot flush does not fail a save; a real I/O error does.
_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}


def _naming(exc: OSError, dest: Path) -> OSError:
    """``exc`` again, naming the file being written: same errno, same subclass where
    it can be rebuilt (``OSError(errno, ...)`` maps the errno to it otherwise)."""
    detail = f"{exc.strerror or exc} while writing"
    cls = type(exc)
    try:
        named = cls(exc.errno, detail, os.fspath(dest)) if exc.errno is not None else cls(
            f"{detail} {dest}")
    except Exception:  # a subclass with another constructor: the errno still decides
        named = OSError(exc.errno, detail, os.fspath(dest))
    return named


def _fsync(fd: int, *, strict: bool = False, data: bool = False) -> None:
    """Flush ``fd`` to stable storage (F_FULLFSYNC on macOS, whose fsync stops at the
    drive's cache). ``data``: ``fd`` is a regular file whose bytes are what must last;
    where the system has ``fdatasync`` (Linux) it flushes them with the metadata needed
    to read them back (the size, the blocks), not the timestamps a full fsync would add
    to the journal. A directory (the entries a rename changed) always takes the full
    flush. Errors are tolerated unless ``strict``; even then an unsupported flush is
    tolerated and only a real I/O error (EIO, ENOSPC) raises."""
    try:
        full = getattr(fcntl, "F_FULLFSYNC", None) if fcntl is not None else None
        if full is not None:
            fcntl.fcntl(fd, full)
        elif data and hasattr(os, "fdatasync"):  # not on macOS or Windows
            os.fdatasync(fd)
        else:
            os.fsync(fd)
    except OSError as exc:
        if strict and exc.errno not in _UNSUPPORTED:
            raise


def fsync_dir(path: PathLike, *, strict: bool = False) -> None:
    """Flush a directory entry (the rename) to disk; Windows cannot flush directories."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        _fsync(fd, strict=strict)
    finally:
        os.close(fd)


def fsync_file(path: PathLike, *, strict: bool = False) -> None:
    """Flush an already-written file (one written with ``sync=False``) to disk."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        if strict:
            raise
        return
    try:
        _fsync(fd, strict=strict, data=True)
    finally:
        os.close(fd)


def append_at(path: PathLike, offset: int, data: bytes, *, sync: bool = True) -> int:
    """Cut ``path`` back to ``offset`` bytes, append ``data``; return the new length.

    Not atomic, and not an alternative to :func:`atomic_write`: it is for
    append-only files whose readers trust only a length published elsewhere
    (the history journal's manifest), so a torn append past ``offset`` is
    invisible until this call cuts it off. The file is created if missing; a
    file shorter than ``offset`` raises ValueError and is left as it is.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0),
                     0o666)
    except OSError as exc:
        raise _naming(exc, Path(path)) from exc
    try:
        size = os.fstat(fd).st_size
        if size < offset:
            raise ValueError(f"{os.fspath(path)} holds {size} bytes, fewer than the {offset} "
                             "to keep")
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            _fsync(fd, data=True)
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise _naming(exc, Path(path)) from exc
    finally:
        os.close(fd)
    return offset + len(data)


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any], *, sync: bool = True,
                 strict: bool = False, temp: str | None = None, follow: bool = True,
                 reclaim: bool = False) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temp file that replaces it.

    Returns the resolved destination. ``sync=False`` skips the fsync (for
    files whose durability an enclosing commit handles, or caches every reader
    verifies). ``temp`` names the temp file (in the destination's directory)
    instead of ``.<name>.<8 hex>``: runs/best's hand-over names its temps as the
    pointer's own, so a stranded one reads as what it is. ``follow=False`` (files
    under a runs root, docs/durability.md "The path rule"): a symlink at the
    destination is replaced by the new file, never written through; only the
    directory is resolved. ``reclaim=True`` (a file outside any runs root, where no
    ``--repair`` looks: teacher records): first remove the ``.<name>.<8 hex>`` temps a
    killed writer of the same destination stranded, under an exclusive lock on the
    destination's directory held for the whole write, so another reclaiming writer's
    live temp is never taken (where locks are unavailable, nothing is reclaimed).
    """
    raw = Path(os.fspath(path))
    dest = (Path(os.path.realpath(os.fspath(path))) if follow
            else Path(os.path.realpath(raw.parent)) / raw.name)
    tmp = dest.parent / (temp or f".{dest.name}.{secrets.token_hex(4)}")
    if not reclaim:
        return _replace(dest, tmp, write, sync=sync, strict=strict)
    with _directory_lock(dest.parent) as locked:
        if locked:
            _drop_stranded(dest)
        return _replace(dest, tmp, write, sync=sync, strict=strict)


def _replace(dest: Path, tmp: Path, write: Callable[[IO[bytes]], Any], *, sync: bool,
             strict: bool) -> Path:
    # O_EXCL: never reuse a name; mode 0o666 so the umask decides, as for open().
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
    except OSError as exc:
        raise _naming(exc, dest) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            fd = -1  # the file object owns the descriptor now
            write(handle)
            handle.flush()
            if sync:
                _fsync(handle.fileno(), strict=strict, data=True)
        os.replace(tmp, dest)
    except BaseException as exc:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (None, os.fspath(tmp)):
            # The temp is gone already: name the file the caller asked for instead.
            raise _naming(exc, dest) from exc
        raise
    return dest


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[bool]:
    """An exclusive ``flock`` on ``directory`` for the block (the kernel drops it when its
    holder dies, so a kill never leaves it held); yields False where there is none."""
    if fcntl is None:
        yield False
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _drop_stranded(dest: Path) -> None:
    """Remove the regular files named ``.<dest name>.<8 hex>`` beside ``dest``: what a
    writer killed between creating its temp and renaming it left (never a link's target)."""
    stranded = re.compile(rf"^\.{re.escape(dest.name)}\.[0-9a-f]{{8}}$")
    with os.scandir(dest.parent) as entries:
        names = [e.name for e in entries
                 if stranded.match(e.name) and e.is_file(follow_symlinks=False)]
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest.parent / name)


def atomic_write_bytes(path: PathLike, data: bytes, *, sync: bool = True,
                       strict: bool = False, temp: str | None = None,
                       follow: bool = True, reclaim: bool = False) -> Path:
    return atomic_write(path, lambda f: f.write(data), sync=sync, strict=strict, temp=temp,
                        follow=follow, reclaim=reclaim)


def atomic_write_text(path: PathLike, text: str, *, sync: bool = True,
                      temp: str | None = None, follow: bool = True,
                      reclaim: bool = False) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), sync=sync, temp=temp, follow=follow,
                              reclaim=reclaim)


def serialized(save: Callable[[IO[bytes]], Any]) -> bytes:
    """Run a writer into memory (to hash or size what it would write)."""
    buffer = io.BytesIO()
    save(buffer)
    return buffer.getvalue()


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold the first Ctrl-C until the block completes; a second one stops at once.

    Used around the few renames that make a resume point complete, so an
    interrupt never leaves a half-published point. Outside the main thread
    (where signal handlers cannot be set) the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def hold(signum: int, frame: Any) -> None:
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def fsync_together(files: Sequence[PathLike], dirs: Sequence[PathLike] = (), *,
                   strict: bool = False) -> None:
    """:func:`fsync_file` each of ``files`` and :func:`fsync_dir` each of ``dirs``, all at
    once (a thread each, the last on the caller's), returning when every one is done.

    For files written with ``sync=False`` that nothing names yet (a bundle's staged
    generation): each is as durable as after its own flush, and a journaling filesystem
    commits the concurrent flushes together, so the caller waits about one flush, not
    one per file. The first error (``strict``) is raised once all have finished."""
    jobs: list[Callable[[], None]] = [
        *(functools.partial(fsync_file, path, strict=strict) for path in files),
        *(functools.partial(fsync_dir, path, strict=strict) for path in dirs)]
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # re-raised on the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,), daemon=True) for job in jobs[:-1]]
    for thread in threads:
        thread.start()
    if jobs:
        run(jobs[-1])
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
