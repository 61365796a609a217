"""The registered ranking metrics ``ranking.mrr`` / ``ranking.recall`` / ``ranking.ndcg``
(spec §24 "Named selection"), each taking ``config={"k": k}``.

They are registered so a run can declare them (``RankingTask.metric_specs()``) and a
``MonitorSpec("ndcg_at_10")`` can select BEST, stop early or step a plateau schedule on
them. Only ``RankingTask.eval_step()`` computes them, from the whole buffered stream: a
per-row accumulator cannot see a query's other candidates, so the accumulator here refuses
every batch the default evaluation path would hand it, and reports nothing (NaN) where a
path only reads it, as the whole-epoch training summary of an objective does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nnx.extend import MetricRegistration
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
    # "labels": the input the model's default (cross-entropy) adapter can serve, so the
    # declaration passes core's input check; the values never come from it.
    return MetricRegistration(factory=RankingMetricAccumulator, input="labels", mode="max",
                              check_config=_check_k)


RANKING_MRR = _registration()
RANKING_RECALL = _registration()
RANKING_NDCG = _registration()
