"""The points an epoch's LAST owes, and their recovery (docs/durability.md, "The epoch
transaction").

An epoch commits history → LAST → FIRST / Qk on their epochs → BEST when it
improved → runs/best. LAST is the commit marker, so the points after it are
written *after* the epoch is durable: a kill, a full disk or any exception in
between would lose them for good (the epoch's best score is already in LAST's
training state, so the resumed run never re-saves that BEST). LAST's manifest
therefore lists them in its position, ``"owes": {tag: {...}}``, and the
recovery here writes every owed point that is not committed: LAST of that
epoch *is* that point, so it is re-derived from LAST's own weights, record and
training state (a hard link of its sidecar), with the point's tag and, for a
named monitor's BEST, the monitor value LAST recorded. An owed BEST is then
handed to runs/best as its promotion would have.

:func:`settle_owed` runs under the run's lease, taken without waiting (a live
fit owns its own points): at the start of a resume from the run, and in
``nnx runs verify --repair``. It writes nothing but the owed points, so it is
the uninterrupted run's own transaction finished, not new data in the source.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.locking import LockBusyError, file_lock
from nnx._foundation.safe_paths import inside
from nnx._persistence.best import promote_best
from nnx._persistence.best_pending import mark_pending, pending_runs
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.point_manifest import ResumePoint, ResumePointError
from nnx._persistence.point_position import COMPLETED_EPOCH, OWES, SCORE
from nnx._persistence.point_verify import verify_point

__all__ = ["OWED_TAGS", "OwedPointsBusy", "owed_points", "point_position", "settle_owed"]

#: The tags an epoch commits after LAST.
OWED_TAGS = ("first", "q1", "q2", "q3", "best")


class OwedPointsBusy(RuntimeError):
    """The run's lease is held: its own fit is writing (and will write) its points."""


def point_position(last: ResumePoint, tag: str, score: float | None) -> dict[str, Any]:
    """The position a point of LAST's epoch records: LAST's, without what LAST owes, and
    for an unnamed BEST its score (what the score beside runs/best is checked against)."""
    position = {k: v for k, v in last.position.items() if k != OWES}
    if tag == "best" and score is not None:
        position[SCORE] = score if math.isfinite(score) else None
    return position


def _owes(last: ResumePoint) -> dict[str, Mapping[str, Any]]:
    owes = last.position.get(OWES)
    if not isinstance(owes, Mapping):
        return {}
    # In commit order (the manifest's keys are sorted): phases, then BEST.
    return {tag: owes[tag] if isinstance(owes[tag], Mapping) else {}
            for tag in OWED_TAGS if tag in owes}


def _committed(path: Path, epoch: int | None) -> bool:
    """Whether ``path`` is a point that verifies and holds ``epoch`` (None: any epoch)."""
    try:
        point = verify_point(path)
    except (ResumePointError, OSError, ValueError):
        return False
    return point is not None and (epoch is None
                                  or point.position.get(COMPLETED_EPOCH) == epoch)


def owed_points(checkpoints: Path) -> list[str]:
    """The tags LAST's epoch owes and that are not committed, in commit order; [] when
    LAST owes nothing (or has no manifest). Raises ResumePointError when LAST does not
    verify."""
    last = verify_point(checkpoints / "last.pt")
    if last is None:
        return []
    epoch = last.position.get(COMPLETED_EPOCH)
    return [tag for tag in _owes(last)
            if not _committed(checkpoints / f"{tag}.pt", epoch)]


def _derive(checkpoints: Path, last: ResumePoint, tag: str, detail: Mapping[str, Any]
            ) -> NNCheckpoint:
    """Write ``tag`` as LAST's epoch's point, from LAST itself."""
    source = NNCheckpoint.from_file(checkpoints / "last.pt")
    source.point = last  # the verified point: the derived one shares its sidecar
    state = source.training_state()
    if state is not None:  # its generation and id are the point's, stamped on save
        state = {k: v for k, v in state.items() if k not in ("generation", "checkpoint_id")}
    monitor_value = detail.get("monitor_value")
    derived = dataclasses.replace(
        source, tag=tag, generation=None, checkpoint_id=None, sidecar=None, path=None,
        point=None, monitor_value=monitor_value if source.named_monitor else None)
    score = None if derived.named_monitor else derived.score
    derived.save(checkpoints / f"{tag}.pt", training_state=state,
                 position=point_position(last, tag, score), like=source)
    return derived


def settle_owed(root: str | Path, run_id: str) -> list[str]:
    """Write the points the run's LAST owes (see the module docstring); the tags written.
    OwedPointsBusy when the run's lease is held; ResumePointError when LAST does not
    verify (nothing is written)."""
    base = Path(root)
    checkpoints = inside(base, run_id, "checkpoints", what="run id")
    if not (checkpoints / "last.pt").is_file():
        return []
    try:
        with file_lock(base / ".leases" / f"{run_id}.lock", blocking=False, root=base):
            return _settle(base, run_id, checkpoints)
    except LockBusyError:
        raise OwedPointsBusy(f"run {run_id} is being trained by another process, which "
                             "writes its own points") from None


def _settle(root: Path, run_id: str, checkpoints: Path) -> list[str]:
    last = verify_point(checkpoints / "last.pt")
    if last is None:
        return []
    owes = _owes(last)
    epoch = last.position.get(COMPLETED_EPOCH)
    written = []
    for tag, detail in owes.items():
        if _committed(checkpoints / f"{tag}.pt", epoch):
            continue
        if tag == "best":
            mark_pending(root, run_id)  # killed while settling: the next promotion sees it
        derived = _derive(checkpoints, last, tag, detail)
        written.append(tag)
        if tag == "best" and not derived.named_monitor:
            with file_lock(root / ".best.lock", root=root):
                promote_best(root, run_id, derived.score)
    if "best" not in written:
        _promote_if_pending(root, run_id, checkpoints)
    return written


def _promote_if_pending(root: Path, run_id: str, checkpoints: Path) -> None:
    """A BEST that was committed but whose hand-over a crash cut off: promote it now."""
    if run_id not in pending_runs(root) or not _committed(checkpoints / "best.pt", None):
        return
    checkpoint = NNCheckpoint.from_file(checkpoints / "best.pt")
    if checkpoint.named_monitor:
        return
    with file_lock(root / ".best.lock", root=root):
        promote_best(root, run_id, checkpoint.score)
