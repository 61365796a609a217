"""observations_from_runs: one observation per run, from run ids alone (spec §23).

Each run's run.yaml, history and provenance are read once. With provenance= the attempt
record gives the status, the attempt id and the committed epoch, and the history (idps.csv
or the journal) is read only up to that epoch. Without it, a run whose history LAST
commits has an unknown value (LAST is never opened, so nothing is unpickled), and a
legacy run keeps its value; either way its status is unknown and it is never in ``n``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nnx.comparison.config_identity import digest, replicate_key
from nnx.comparison.document import RunFiles, RunReader
from nnx.comparison.errors import ComparisonError
from nnx.comparison.lineage import Lineage
from nnx.comparison.observation import Metric, Observation
from nnx.comparison.values import (
    SELECTIONS,
    SPLITS,
    record_value,
    selected_record,
    selection_rule,
)
from nnx.extend import check_choice, check_run_id, epoch_ends

__all__ = ["NATURAL_DIRECTIONS", "observations_from_runs"]

#: The metrics a bare name may stand for (their better direction is not a choice).
NATURAL_DIRECTIONS = {"loss": "min", "error": "min", "accuracy": "max", "f1": "max",
                      "recall": "max", "precision": "max"}
_MARKER = ".history-committed-by-last"


def _metric(metric: Metric | str) -> Metric:
    if isinstance(metric, Metric):
        return metric
    if isinstance(metric, str) and metric in NATURAL_DIRECTIONS:
        return Metric(metric, NATURAL_DIRECTIONS[metric])
    raise TypeError(f"metric must be a Metric(name, direction) (a bare name only for "
                    f"{', '.join(NATURAL_DIRECTIONS)}); got {metric!r}")


def _labels(ids: list[str], config: Any) -> list[str] | None:
    if config is None:
        return None
    labels: list[Any] | None = ([config.get(i) for i in ids] if isinstance(config, Mapping)
              else list(config) if isinstance(config, Sequence) and not isinstance(config, str)
              else None)
    if labels is None or len(labels) != len(ids) or not all(
            isinstance(label, str) and label for label in labels):
        raise ComparisonError("config= must give a non-empty label for every run (a mapping "
                              "run id -> label, or one label per run in order)")
    return [str(label) for label in labels]


def _identities(run: RunFiles, split: str) -> tuple[str | None, str | None]:
    """(data, split) identities the provenance declares; None when unknown."""
    if run.provenance is None:
        return None, None
    document = run.provenance.manifest.document()
    data, splits = document.get("data"), document.get("splits")
    entry = splits.get(split, splits.get("validation") if split == "val" else None) \
        if isinstance(splits, Mapping) else None
    return (None if data is None else digest(data)), (None if entry is None else digest(entry))


def _observe(run: RunFiles, metric: Metric, split: str, selection: str,
             config: str | None) -> Observation:
    attempt = run.attempt
    if attempt is not None:
        status, committed = attempt.status, attempt.last_epoch
        readable = committed is not None  # nothing committed: no history is read
    else:
        # No attempt record: LAST would say where the history ends, but it is never
        # opened; a legacy run (no marker) has no uncommitted tail to hide.
        status, committed = "unknown", None
        readable = not (run.path / _MARKER).is_file()
    records = epoch_ends(run.path, committed) if readable else []
    record = selected_record(selection, records, committed, run.document.monitor)
    data, split_id = _identities(run, split)
    return Observation(
        run_id=run.run_id, attempt_id=None if attempt is None else attempt.attempt_id,
        metric=metric, value=record_value(record, split, metric.name), status=status,
        split=split, selection=selection_rule(selection, run.document.monitor), config=config,
        data=data, split_id=split_id, replicate=replicate_key(run),
        evaluation=None if record is None else f"epoch={record.epoch}")


def observations_from_runs(run_ids: Iterable[str], *, metric: Metric | str,
                           split: str = "val", selection: str = "last",
                           root: str | os.PathLike[str] = "runs",
                           config: Mapping[str, str] | Sequence[str] | None = None
                           ) -> list[Observation]:
    """One :class:`Observation` per run, in the order given; every argument is checked
    before any file is read. ``config=`` labels every run instead of the configuration
    identity (then no lineage is read)."""
    if isinstance(run_ids, str):
        raise TypeError("run_ids must be a list of run ids, not one string")
    ids = [check_run_id(f"run_ids[{i}]", r) for i, r in enumerate(run_ids)]
    repeated = sorted({r for r in ids if ids.count(r) > 1})
    if repeated:
        raise ComparisonError(f"run id(s) {', '.join(repeated)} listed twice")
    chosen = _metric(metric)
    check_choice("split", split, SPLITS)
    check_choice("selection", selection, SELECTIONS)
    labels = _labels(ids, config)
    reader = RunReader(root)
    lineage = Lineage(reader)
    out = []
    for i, run_id in enumerate(ids):
        if not reader.exists(run_id):
            raise ComparisonError(f"no run {run_id} under {reader.root}")
        try:
            run = reader.read(run_id)
        except (OSError, ValueError) as exc:
            raise ComparisonError(f"run {run_id}: run.yaml cannot be read ({exc})") from None
        identity = labels[i] if labels is not None else lineage.identity(run)
        out.append(_observe(run, chosen, split, selection, identity))
    return out
