"""The registered ranking metrics ``ranking.mrr`` / ``ranking.recall`` / ``ranking.ndcg``
(spec §24 "Named selection"), each taking ``config={"k": k}``.

They are registered so a run can declare them (``RankingTask.metric_specs()``) and a
``MonitorSpec("ndcg_at_10")`` can select BEST, stop early or step a plateau schedule on
them. Only ``RankingTask.eval_step()`` computes them, from the whole buffered stream: a
per-row accumulator cannot see a query's other candidates, so they declare core's
``TASK_METRIC_INPUT``: core serves them only on a run whose task lists them
(``RankingTask.metric_specs()``) and refuses them on the row-by-row paths before any
batch. The accumulator is the registration's required factory; should anything still feed
it a batch it refuses, and it reports nothing (NaN) where a path only reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnx.extend import TASK_METRIC_INPUT, MetricRegistration
from nnx.ranking.errors import RankingEvaluationError

__all__ = ["RANKING_MRR", "RANKING_NDCG", "RANKING_RECALL", "RankingMetricAccumulator"]


def _check_k(config: Mapping[str, Any]) -> None:
    k = config.get("k")
    if set(config) != {"k"} or isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"a ranking metric takes config={{'k': <positive int>}}; got "
                         f"{dict(config)!r}")


class RankingMetricAccumulator:
    """What the default paths get for a ranking metric: a refusal on the first batch."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.k = config.get("k")

    def update(self, target: Any, prediction: Any) -> None:
        raise RankingEvaluationError(
            "ranking metrics are computed per query by RankingTask.eval_step() only; the "
            "default evaluation path sees rows, not queries")

    def result(self) -> float:
        return math.nan


def _registration() -> MetricRegistration:
    # TASK_METRIC_INPUT: served only where the run's task lists the spec in its
    # metric_specs(), whatever the model's loss; the default paths refuse it up front.
    return MetricRegistration(factory=RankingMetricAccumulator, input=TASK_METRIC_INPUT,
                              mode="max", check_config=_check_k)


RANKING_MRR = _registration()
RANKING_RECALL = _registration()
RANKING_NDCG = _registration()
