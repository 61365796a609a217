"""Kill points for tests of crash safety: every ``os``-level file-system operation a writer
makes, and a forked child ``os._exit``-ed right before one of them, as a SIGKILL there
would be (no ``finally``, no clean-up). nnx-core's commit probe
(``tests/_support/commit_crash_points.py``) cuts an epoch's commit this way; an add-on
cuts its own writers (nnx-decisions' teacher records) with :func:`writer_kill_points`.
POSIX only (``os.fork``); test code, never imported by the library.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["OPS", "OpCut", "fork_action", "writer_kill_points"]

#: The operations counted: each one a point where a kill leaves the disk as it is then.
OPS = tuple(name for name in (
    "open", "write", "fsync", "fdatasync", "replace", "rename", "link", "symlink", "unlink",
    "remove", "mkdir", "rmdir", "ftruncate") if hasattr(os, name))  # no fdatasync on macOS


class OpCut:
    """Counts the :data:`OPS` made while ``active``; ``os._exit(137)``s right before
    operation number ``at`` (None: count only)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.count, self.active = at, 0, False
        self.originals = {name: getattr(os, name) for name in OPS}

    def install_ops(self) -> None:
        for name, original in self.originals.items():
            setattr(os, name, self._wrap(original))

    def _wrap(self, original: Any) -> Any:
        def op(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                if self.at is not None and self.count == self.at:
                    os._exit(137)
                self.count += 1
            return original(*args, **kwargs)

        return op


def fork_action(action: Callable[[], Any], at: int | None) -> tuple[int, int]:
    """(exit code, operations counted) of a child running ``action()`` with every
    operation counted and a kill right before number ``at`` (None: none)."""
    read, write = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            cut = OpCut(at)
            cut.install_ops()
            cut.active = True
            action()
            cut.active = False
            os.write(write, str(cut.count).encode())
        except BaseException:  # a failure the kill did not cause: the parent sees rc 1
            os._exit(1)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        counted = handle.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), int(counted or -1)


def writer_kill_points(path: Path, old: bytes, write: Callable[[], Any]) -> list[dict[str, Any]]:
    """Every kill point of ``write()`` (which writes ``path``): before each operation a
    child is killed, with ``path`` holding ``old`` first. Per point: the exit code, the
    bytes ``path`` held right after the kill, and the temps (``.<name>.*``) beside it once
    ``write()`` ran again in this process (the next save, which must leave none)."""
    path.write_bytes(old)
    rc, total = fork_action(write, None)
    if rc != 0 or total <= 0:
        raise AssertionError(f"the uncut write failed (exit {rc}, {total} operations)")
    found = []
    for at in range(total):
        path.write_bytes(old)
        rc, _ = fork_action(write, at)
        after_kill = path.read_bytes()
        write()
        found.append({"at": at, "rc": rc, "after_kill": after_kill,
                      "temps": sorted(p.name for p in path.parent.glob(f".{path.name}.*"))})
    return found
