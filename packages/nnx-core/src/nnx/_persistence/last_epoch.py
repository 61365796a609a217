"""LAST's epoch: where a run's committed history ends for its readers (spec §4.2).

The history step of the epoch transaction runs before LAST, so records past
LAST's epoch are uncommitted; ``iter_history``, the lineage, a migration and
the leftover sweep all cut a run's history at :func:`committed_epoch`.
"""

from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["checkpoint_epoch", "committed_epoch"]


def checkpoint_epoch(path: Path) -> int:
    """The epoch a checkpoint file records (read without its tensors)."""
    payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    epoch = payload["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int):
        raise ValueError(f"{path} records no epoch")
    return epoch


def committed_epoch(run_dir: Path) -> int | None:
    """LAST's epoch (the commit marker), or None when the run has no LAST yet."""
    last = run_dir / "checkpoints" / "last.pt"
    if not last.is_file():
        return None
    try:
        return checkpoint_epoch(last)
    except Exception as exc:
        raise ValueError(f"LAST of {run_dir} is unreadable ({type(exc).__name__}: {exc}); "
                         "its committed history cannot be told from an uncommitted tail") from exc
