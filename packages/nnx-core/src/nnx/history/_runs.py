"""Finding a run's directory, its committed epoch and its own records (CSV or journal)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_yaml
from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.safe_paths import check_inside
from nnx._persistence.best_pointer import resolve_best
from nnx._persistence.history_csv import read_idps_csv
from nnx.history._format import HISTORY_DIR
from nnx.history._store import iter_journal, load_manifest

__all__ = ["checkpoint_epoch", "committed_epoch", "own_records", "read_yaml", "resolve_run"]

RunRef = str | os.PathLike[str]


def resolve_run(run: RunRef, root: str | os.PathLike[str]) -> Path:
    """``root/<id>`` for a run id (``"best"``: the run runs/best names, by name, and no
    symbolic link below the root followed), else ``run`` itself as a directory."""
    if isinstance(run, str) and (Path(root) / run).is_dir():
        named = resolve_best(run, root)
        return Path(os.path.realpath(Path(root))) / check_inside(root, Path(root) / named).name
    path = Path(run)
    if path.is_dir():
        return Path(os.path.realpath(path))
    raise FileNotFoundError(f"no run {os.fspath(run)!r} (neither {Path(root) / run} nor a "
                            "run directory)")


def checkpoint_epoch(path: Path) -> int:
    """The epoch a checkpoint file records (read without its tensors)."""
    import torch

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


def own_records(run_dir: Path, last_epoch: int | None) -> Iterator[NNIterationDataPoint]:
    """The run's own history up to ``last_epoch``: its journal, else its idps.csv.

    A journal's manifest and index are checked before this returns.
    """
    hdir = run_dir / HISTORY_DIR
    manifest = load_manifest(hdir)
    if manifest is not None:
        return iter_journal(hdir, manifest, last_epoch)
    csv = run_dir / "idps.csv"
    if not csv.is_file():
        return iter(())
    records = read_idps_csv(csv.read_text(encoding="utf-8"))
    return iter([r for r in records if last_epoch is None or r.epoch <= last_epoch])


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping, or {} when the file is missing, unreadable (too large or nested
    too deeply included: the bounded reader) or not a mapping."""
    try:
        doc = load_yaml(path)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
