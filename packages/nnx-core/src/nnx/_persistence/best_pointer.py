"""Reading runs/best (spec §4.1): which run it names, by name, never followed as a path.

The pointer is a relative symlink ``runs/best -> <id>``; where symlinks are
unavailable, a directory ``runs/best/`` holding only ``POINTER.txt`` with the
run's path. Either way it is read by the *name* of the run it points at, which
must be one plain run id, and that run is then read as a sibling under the
root: a link to anything else names no run. Writing and electing the pointer
is :mod:`nnx._persistence.best`'s; this module is what every reader of a run
(``NNCheckpoint.load("best")``, a resume from ``"best"``, ``iter_history``)
resolves "best" through, below the run and checkpoint modules.
"""

from __future__ import annotations

import os
from pathlib import Path

from nnx._foundation.validation import check_run_id

__all__ = ["BEST_NAME", "POINTER_FILE", "current_best", "is_own_fallback", "resolve_best"]

BEST_NAME = "best"
POINTER_FILE = "POINTER.txt"


def is_own_fallback(pointer: Path) -> bool:
    """runs/best as NNx writes it where symlinks are unavailable: a real directory holding
    nothing but POINTER.txt (an empty one is a hand-over a kill interrupted)."""
    if pointer.is_symlink() or not pointer.is_dir():
        return False
    return set(os.listdir(pointer)) <= {POINTER_FILE}


def current_best(root: Path) -> str | None:
    """The run id runs/best points at, or None."""
    pointer = root / BEST_NAME
    if pointer.is_symlink():
        target = os.readlink(pointer)
    elif is_own_fallback(pointer) and (pointer / POINTER_FILE).is_file():
        target = Path((pointer / POINTER_FILE).read_text(encoding="utf-8").strip()).name
    else:
        return None
    try:
        return check_run_id("runs/best", target)
    except ValueError:
        return None


def resolve_best(run: str, root: str | os.PathLike[str]) -> str:
    """``run`` itself, or for ``"best"`` the run runs/best names (FileNotFoundError when
    it names none: no run has committed a BEST that can claim it yet)."""
    if run != BEST_NAME:
        return run
    named = current_best(Path(root))
    if named is None:
        raise FileNotFoundError(f"{Path(root).as_posix()}/best names no run yet (no run "
                                "under that root has a committed BEST that can claim it)")
    return named
