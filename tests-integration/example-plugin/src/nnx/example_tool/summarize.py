"""summarize_run: the tool's one action (the verb module of the skeleton)."""

from __future__ import annotations

import os

from nnx.example_tool.document import read_run
from nnx.example_tool.inputs import checked
from nnx.example_tool.report import RunSummary

__all__ = ["summarize_run"]


def summarize_run(run_id: str, *, metric: str = "loss",
                  root: str | os.PathLike[str] = "runs") -> RunSummary:
    """One run's seed, parent and ``metric``'s validation value per epoch. Every argument
    is checked before a file is read; a missing run raises RunSummaryError."""
    run_id, metric = checked(run_id, metric)
    files = read_run(root, run_id)
    values = tuple(None if r.val_edp is None else r.val_edp.value(metric)
                   for r in files.records)
    return RunSummary(run_id=run_id, seed=files.document.seed,
                      parent_run_id=files.document.parent_run_id, metric=metric,
                      epochs=tuple(r.epoch for r in files.records), values=values)
