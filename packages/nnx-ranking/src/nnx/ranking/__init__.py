"""nnx-ranking: query-grouped ranking (spec §24).

``RankingTask`` is a Task-protocol object: ``NNModel(net_params=..., task=RankingTask(...))``
trains a scorer on the pairwise logistic loss within each query (``task.objective()``) and
validates it per query (``task.eval_step()``): MRR@k, Recall@k and NDCG@k over the whole
buffered validation stream. ``ranking_metrics`` computes the same metrics on arrays, and
``task.metric_specs()`` declares them so ``MonitorSpec("ndcg_at_10")`` selects BEST.
"""

from nnx.ranking.errors import RankingBatchError, RankingEvaluationError
from nnx.ranking.metrics import ranking_metrics
from nnx.ranking.registrations import RANKING_MRR, RANKING_NDCG, RANKING_RECALL
from nnx.ranking.task import RankingObjective, RankingTask

__nnx_skeleton__ = {"kind": "training"}

__all__ = [
    "RANKING_MRR",
    "RANKING_NDCG",
    "RANKING_RECALL",
    "RankingBatchError",
    "RankingEvaluationError",
    "RankingObjective",
    "RankingTask",
    "ranking_metrics",
]
