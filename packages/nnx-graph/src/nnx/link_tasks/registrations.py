"""The registered link metrics ``link.auroc`` / ``link.ap`` / ``link.bce`` (spec §26
"Exact metrics"), declared by ``LinkTask.metric_specs()`` as ``auroc`` / ``ap`` / ``bce``.

They are registered so a run can declare them and ``MonitorSpec("auroc")`` can select
BEST on them. Only ``LinkTask.eval_step()`` computes them, over every validation candidate
at once: a per-batch accumulator would average AUROC over batches, which is not AUROC. So
the accumulator here refuses every batch a default evaluation path would hand it, and
reports nothing (NaN) where a path only reads it (an objective's training summary).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnx.extend import MetricRegistration
from nnx.link_tasks.errors import LinkBatchError

__all__ = ["LINK_AP", "LINK_AUROC", "LINK_BCE", "LinkMetricAccumulator"]


def _no_config(config: Mapping[str, Any]) -> None:
    if config:
        raise ValueError(f"a link metric takes no config; got {dict(config)!r}")


class LinkMetricAccumulator:
    """What the default paths get for a link metric: a refusal on the first batch."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def update(self, target: Any, prediction: Any) -> None:
        raise LinkBatchError("link metrics are computed over every candidate by "
                             "LinkTask.eval_step() only; the default evaluation path sees "
                             "batches, not the whole candidate set")

    def result(self) -> float:
        return math.nan


def _registration(mode: str) -> MetricRegistration:
    # "labels": an input the model's default adapter can serve, so the declaration passes
    # core's input check; the values never come from it.
    return MetricRegistration(factory=LinkMetricAccumulator, input="labels", mode=mode,
                              check_config=_no_config)


LINK_AUROC = _registration("max")
LINK_AP = _registration("max")
LINK_BCE = _registration("min")
