"""The buffered ranking evaluation (spec §24 "The evaluation").

Each epoch's validation buffers the whole stream, at most ``max_buffered`` valid rows: the
scores (float64, on the host), the ids and the grades. Only then are rows grouped by query,
so a query split across batches, in any order, is joined and scores as if whole; the same
candidate arriving twice is refused. The record is ``kind="ranking"`` with ``count`` the
scored queries, or ``status="empty"`` when every query is excluded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from nnx import NNEvaluationDataPoint
from nnx.ranking.batch import RankingBatch, scorer_device
from nnx.ranking.errors import RankingEvaluationError
from nnx.ranking.metrics import ranking_metrics
from nnx.ranking.pairwise import pairwise_loss, query_groups

__all__ = ["RankingDeclarations", "ranking_eval_step", "ranking_record"]


class RankingDeclarations(Protocol):
    """What the evaluation reads of a ``RankingTask`` (which builds it: the task module
    imports this one, never the reverse)."""

    ks: tuple[int, ...]
    relevance_threshold: int
    weighting: str
    candidates: str
    max_buffered: int

    def parse(self, batch: Any) -> RankingBatch: ...

    def check_groups(self, query_ids: Sequence[Any], rows: Sequence[int]) -> None: ...


def ranking_record(task: RankingDeclarations, query_ids: list[Any], candidate_ids: list[Any],
                   grades: torch.Tensor, scores: torch.Tensor) -> NNEvaluationDataPoint:
    """The record of the whole buffered stream: the metrics, the counts, and the pairwise
    loss over the scored queries only (``loss`` is None when every query is excluded)."""
    task.check_groups(query_ids, range(len(query_ids)))
    values = ranking_metrics(query_ids, candidate_ids, grades.numpy(), scores.numpy(),
                             ks=task.ks, relevance_threshold=task.relevance_threshold)
    values["exhaustive_candidates"] = 1.0 if task.candidates == "exhaustive" else 0.0
    scored = round(values["queries"] - values["excluded_queries"])
    if scored == 0:
        return NNEvaluationDataPoint(metrics=values, kind="ranking", count=0, status="empty")
    # Queries by id, candidates by id: the loss is summed in one order whatever order the
    # rows arrived in, so a query split across batches gives the same bits as a whole one.
    by_query = sorted(query_groups(query_ids), key=lambda g: query_ids[g[0]])
    groups = [sorted(g, key=lambda i: candidate_ids[i]) for g in by_query
              if int(grades[g].max()) >= task.relevance_threshold]
    numerator, denominator = pairwise_loss(scores, grades, groups, weighting=task.weighting)
    loss = float(numerator) / denominator if denominator else None
    return NNEvaluationDataPoint(loss=loss, metrics=values, kind="ranking", count=scored,
                                 status="ok")


def ranking_eval_step(task: RankingDeclarations) -> Callable[[Any], NNEvaluationDataPoint]:
    """``eval_step_fn(ctx)`` over ``ctx.val_loader`` (core runs it in eval mode, no grad)."""

    def ranking_eval(ctx: Any) -> NNEvaluationDataPoint:
        query_ids: list[Any] = []
        candidate_ids: list[Any] = []
        grades: list[torch.Tensor] = []
        scores: list[torch.Tensor] = []
        device = scorer_device(ctx.model)
        for raw in ctx.val_loader:
            batch = task.parse(raw)
            rows = batch.rows()
            if len(query_ids) + len(rows) > task.max_buffered:
                raise RankingEvaluationError(
                    f"the validation stream holds more than max_buffered={task.max_buffered} "
                    "rows: raise RankingTask.max_buffered or validate on fewer candidates")
            out = ctx.model.forward_raw([batch.features.to(device)])
            batch_scores = batch.scores(out).detach().to("cpu", torch.float64)
            query_ids += [batch.query_ids[i] for i in rows]
            candidate_ids += [batch.candidate_ids[i] for i in rows]
            grades.append(batch.relevance[rows])
            scores.append(batch_scores[rows])
        if not query_ids:
            raise RankingEvaluationError("the validation loader gave no valid ranking rows")
        return ranking_record(task, query_ids, candidate_ids, torch.cat(grades),
                              torch.cat(scores))

    return ranking_eval
