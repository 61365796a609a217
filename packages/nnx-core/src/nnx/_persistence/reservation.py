"""Admitting a run directory (spec §4.1, §4.4; docs/durability.md, Locks): the lease,
then the admission, then (on an overwrite) the hand-over of runs/best.

The lease (``runs/.leases/<id>.lock``) is taken without waiting and held for the
whole fit, so a second process training the same run id is refused at once. The
admission lock serializes the check that the directory is free with its creation.

An *empty reservation* (:func:`is_empty_reservation`: what a fit killed between
reserving the directory and writing run.yaml leaves) is no run: ``nnx runs
list`` shows it as ``incomplete``, and a plain retry, holding the lease, reclaims
it instead of refusing it as an existing run.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from nnx._foundation.locking import LockBusyError, file_lock
from nnx._persistence.best import check_pointer_slot, discard_retired, retire_run
from nnx._persistence.reservation_shape import entries, is_empty_reservation
from nnx._persistence.run_damage import display_path

__all__ = ["RunExistsError", "RunLeaseError", "admit_run", "is_empty_reservation"]


class RunExistsError(FileExistsError):
    """The configuration's run directory already exists and overwriting was not asked for."""


class RunLeaseError(RuntimeError):
    """Another process holds this run's lease: it is training the same run id now."""


def admit_run(root: Path, run_id: str, *, overwrite: bool, locks: contextlib.ExitStack) -> Path:
    """Take ``run_id``'s lease into ``locks`` and create its empty directory (with
    ``checkpoints/``) under ``root``; returns the directory. An existing run is refused
    with RunExistsError unless ``overwrite``, which retires it first."""
    path = root / run_id
    root.mkdir(parents=True, exist_ok=True)
    check_pointer_slot(root)  # a runs/best NNx did not write would be replaced later
    try:
        locks.enter_context(file_lock(root / ".leases" / f"{run_id}.lock", blocking=False,
                                              root=root))
    except LockBusyError:
        raise RunLeaseError(f"run {run_id} is being trained by another process; "
                            "wait for it, or train another configuration") from None
    retired = None
    with file_lock(root / ".admission.lock", root=root):
        if is_empty_reservation(path):
            _reclaim(path)  # under the lease: no fit of this run is writing it
        if path.exists():
            if not overwrite:
                raise RunExistsError(
                    f"run {run_id} already exists at {display_path(path)}; pass a "
                    "salt=... for a separate record of the same configuration, or "
                    "overwrite_existing=True to replace it")
            # Overwrite: hand runs/best on and rename the old run aside in one
            # .best.lock section, so no election can advertise it (§4.1).
            retired = retire_run(root, run_id)
        path.mkdir()
        (path / "checkpoints").mkdir()
    if retired is not None:
        discard_retired(retired)  # outside the locks: the old artifacts may be large
    return path


def _reclaim(path: Path) -> None:
    for entry in entries(path) or []:
        if entry.name == "checkpoints":
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)
    os.rmdir(path)  # fails, keeping the directory, if anything appeared meanwhile
