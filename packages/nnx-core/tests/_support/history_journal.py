"""Helpers shared by the tests split out of persistence/test_history_journal.py."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import yaml

from nnx._foundation.records import MonitorRecord, NNEvaluationDataPoint, NNIterationDataPoint
from nnx._journal.history_csv import render_idps_csv
from nnx.history import (
    HistoryJournal,
    JournalWriter,
    epoch_summary,
)

NAN, INF = float("nan"), float("inf")


# -- helpers ---------------------------------------------------------------------------
def record(epoch: int, iter_idx: int, batch_idx: int, *, last: bool = False,
           loss: float | None = None) -> NNIterationDataPoint:
    value = 0.25 + iter_idx / 1024 if loss is None else loss
    train = NNEvaluationDataPoint(loss=value, error=0.125, metrics={"nll": value / 2})
    val = NNEvaluationDataPoint(loss=value * 2, error=0.5, accuracy=0.5) if last else None
    return NNIterationDataPoint(epoch=epoch, iter_idx=iter_idx, batch_idx=batch_idx,
                                train_edp=train, val_edp=val, lr=0.01,
                                update_count=iter_idx + 1,
                                selection=selection(value / 2) if last else None)


def selection(value: float) -> MonitorRecord:
    """The epoch's monitor decision, as the loop records it on the epoch's last record."""
    return MonitorRecord(metric="nll", split="val", direction="min", min_delta=0.0,
                         value=value, status="ok" if math.isfinite(value) else "nonfinite",
                         improved=math.isfinite(value))


def epoch_of(epoch: int, n: int, start: int, **kw: float) -> list[NNIterationDataPoint]:
    return [record(epoch, start + b, b, last=b == n - 1, **kw) for b in range(n)]


def epochs(first: int, count: int, per_epoch: int, start: int = 0
           ) -> list[NNIterationDataPoint]:
    out: list[NNIterationDataPoint] = []
    for e in range(first, first + count):
        out += epoch_of(e, per_epoch, start + len(out))
    return out


def commit_all(writer: JournalWriter, records: Iterable[NNIterationDataPoint]) -> None:
    by_epoch: dict[int, list[NNIterationDataPoint]] = {}
    for r in records:
        by_epoch.setdefault(r.epoch, []).append(r)
    for epoch, rs in by_epoch.items():
        for r in rs:
            writer.append(r)
        writer.commit_epoch(epoch, epoch_summary(rs[-1]))


def states(records: Iterable[NNIterationDataPoint]) -> list[str]:
    """NaN-aware comparison keys (json writes NaN as the same token on both sides)."""
    return [json.dumps(r.state(), sort_keys=True, allow_nan=True) for r in records]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def run_dir(tmp_path: Path, name: str = "r0") -> Path:
    path = tmp_path / "runs" / name
    path.mkdir(parents=True)
    (path / "run.yaml").write_text(yaml.safe_dump({"train": {}}), encoding="utf-8")
    return path


def write_last(path: Path, epoch: int) -> None:
    (path / "checkpoints").mkdir(exist_ok=True)
    torch.save({"epoch": epoch}, path / "checkpoints" / "last.pt")


# -- lineage runs (test_journal_lineage, test_path_rule) ----------------------------------
def make_run(root: Path, run_id: str, records: Sequence[NNIterationDataPoint], *,
             csv: bool = False, parent: str | None = None,
             resume: dict[str, object] | None = None) -> Path:
    path = root / run_id
    path.mkdir(parents=True)
    train = {} if parent is None else {"parent_run_id": parent}
    (path / "run.yaml").write_text(yaml.safe_dump({"train": train}), encoding="utf-8")
    if resume is not None:
        (path / "metadata.yaml").write_text(yaml.safe_dump({"resume": resume}),
                                            encoding="utf-8")
    if csv:
        (path / "idps.csv").write_text(render_idps_csv(records), encoding="utf-8")
    else:
        commit_all(JournalWriter(path, HistoryJournal(retention=3, chunk_size=2)), records)
    return path


def resumed(source: str, epoch: int | None, checkpoint: str = "last") -> dict[str, object]:
    out: dict[str, object] = {"mode": "stateful", "source_run": source,
                              "source_checkpoint": checkpoint}
    if epoch is not None:
        out["source_epoch"] = epoch
    return out
