"""Which epoch's record gives a run's value, and the value it holds (spec §23).

``"last"`` is the last committed epoch; ``"best"`` the epoch the run's monitor last
elected, the rule named after the declared monitor (unknown without a monitor or when
it elected nothing). The record is the epoch's validation record (``split="val"``) or
its whole-epoch training summary (``"train"``), never a last batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnx import MonitorSpec, NNIterationDataPoint

__all__ = ["SELECTIONS", "SPLITS", "record_value", "selected_record", "selection_rule"]

SELECTIONS = ("last", "best")
SPLITS = ("val", "train")


def _monitor(state: Any) -> MonitorSpec | None:
    """The declared monitor (``RunDocument.monitor`` is its recorded state)."""
    if state is None:
        return None
    try:
        return MonitorSpec.from_state(state)
    except (TypeError, ValueError):
        return None


def selection_rule(selection: str, monitor: Any) -> str:
    """``"last"``, or ``"best:<split>.<metric>:<direction>"`` naming the declared monitor
    (``"best"`` alone for a run without one)."""
    if selection == "last":
        return "last"
    spec = _monitor(monitor)
    if spec is None:
        return "best"
    try:
        direction = spec.direction()
    except ValueError:  # a declared metric without a natural direction and no mode
        direction = spec.mode or "unstated"
    return f"best:{spec.key}:{direction}"


def selected_record(selection: str, records: Sequence[NNIterationDataPoint],
                    committed: int | None, monitor: Any
                    ) -> NNIterationDataPoint | None:
    """The record ``selection`` picks from the epoch records (already cut at the
    committed epoch); None when it picks nothing."""
    if not records:
        return None
    if selection == "last":
        last = records[-1]
        return last if committed is None or last.epoch == committed else None
    if _monitor(monitor) is None:
        return None
    elected = [r for r in records
               if r.selection is not None and r.selection.decided and r.selection.improved]
    return elected[-1] if elected else None


def record_value(record: NNIterationDataPoint | None, split: str, metric: str) -> float | None:
    if record is None:
        return None
    edp = record.val_edp if split == "val" else record.train_summary
    return None if edp is None else edp.value(metric)
