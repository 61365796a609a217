"""A run's file that exists but cannot be read back (spec §4, §4.2): the one error type.

:class:`RunDamagedError` names the run, the file and the cause; :func:`reading`
turns any failure while a file is read into one. It lives apart from
:mod:`nnx._persistence.run` so the history readers (which the run module is
built on) raise the same error without importing the run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nnx._persistence.read_errors import CheckpointReadError, cause_line

__all__ = ["DamagedRun", "RunDamagedError", "display_path", "reading"]


def display_path(path: Path) -> str:
    """``runs/<id>`` relative to the working directory, with ``/`` separators."""
    try:
        shown = os.path.relpath(path, Path.cwd())
    except ValueError:  # another drive on Windows
        shown = str(path)
    return shown.replace(os.sep, "/")


class RunDamagedError(ValueError):
    """A run's file exists but cannot be read back; names the run, the file and why."""

    def __init__(self, run_id: str, path: Path, reason: str) -> None:
        super().__init__(f"run {run_id} is damaged: {display_path(path)}: {reason}")
        self.run_id, self.path, self.reason = run_id, path, reason


@dataclass(frozen=True, slots=True)
class DamagedRun:
    """One entry of :meth:`NNRun.scan`'s damaged list: which run, which file, why."""

    run_id: str
    path: Path
    reason: str


@contextlib.contextmanager
def reading(run_id: str, path: Path) -> Iterator[None]:
    """Any failure reading ``path`` is damage of that file. A missing add-on is not:
    its install hint (an ImportError) passes through."""
    try:
        yield
    except (RunDamagedError, ImportError):
        raise
    except CheckpointReadError as exc:  # it names the file already: keep its reason alone
        raise RunDamagedError(run_id, path, exc.reason) from exc
    except Exception as exc:
        # An empty file is the plainest diagnosis; torch's own message for one (about
        # mmap and zip serialization) would send the user the wrong way.
        empty = path.is_file() and path.stat().st_size == 0
        raise RunDamagedError(run_id, path, "empty file (0 bytes)" if empty else cause_line(exc)
                              ) from exc
