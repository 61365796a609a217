"""``RankingTask``: query-grouped ranking as a Task-protocol object (spec §24).

``NNModel(net_params=..., task=RankingTask(ks=(10,)))`` trains a scorer (features in, one
score per row out) on the pairwise logistic loss within each query and validates it per
query. It inherits nothing from nnx-core: core composes its per-batch machinery beside the
task, and the task trains with its own ``objective()``, validates with its own
``eval_step()`` and refuses the default evaluate / predict paths (they would decode classes
row by row). Its configuration is run-id identity and component state ``"ranking.task"``,
so a resume under another configuration is refused before the first resumed update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nnx import MetricSpec
from nnx.extend import (
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    check_choice,
    check_count,
    check_optional_count,
)
from nnx.ranking.batch import RankingBatch, parse_batch, scorer_device
from nnx.ranking.errors import RankingBatchError, RankingEvaluationError
from nnx.ranking.evaluation import ranking_eval_step
from nnx.ranking.pairwise import pairwise_loss, query_groups

__all__ = ["COMPONENT", "METRICS", "RankingObjective", "RankingTask"]

COMPONENT = "ranking.task"
#: The registered metric ids, each reported as ``<name>_at_<k>``.
METRICS = (("ranking.mrr", "mrr"), ("ranking.recall", "recall"), ("ranking.ndcg", "ndcg"))
_STATE_VERSION = 1
_DEFAULTS: dict[str, Any] = {"ks": [10], "max_relevance": 1, "relevance_threshold": 1,
                             "weighting": "query", "candidates": "sampled",
                             "max_buffered": 1_000_000, "group_size": None, "version": 1}


class RankingObjective(Objective):
    """The pairwise logistic objective ``RankingTask.objective()`` returns: one term,
    ``pairwise_logistic``, over the microbatch's queries (pairs never cross batches)."""

    def __init__(self, task: RankingTask) -> None:
        self.task = task
        self.source_task = task

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        batch = self.task.parse(ctx.batch)
        self.task.check_groups(batch.query_ids, batch.rows())
        out = ctx.full_precision(ctx.forward([batch.features.to(scorer_device(ctx.model))]))
        scores = batch.scores(out)
        numerator, denominator = self.task.loss(scores, batch, batch.rows())
        return ObjectiveResult((LossTerm("pairwise_logistic", numerator, denominator),))

    def __repr__(self) -> str:
        return f"{self.task!r}.objective()"


class RankingTask:
    """Query-grouped ranking: declared cutoffs ``ks``, integer grades
    ``0..max_relevance``, the ``relevance_threshold`` a relevant candidate reaches, the
    objective's ``weighting`` (``"query"``: each query weighs the same; ``"pair"``: each
    pair does), ``candidates`` (``"sampled"`` or ``"exhaustive"``), the evaluation buffer
    limit ``max_buffered`` (rows), an optional ``group_size`` (every query has exactly that
    many valid candidates) and a ``version``."""

    def __init__(self, *, ks: Sequence[int] = (10,), max_relevance: int = 1,
                 relevance_threshold: int = 1, weighting: str = "query",
                 candidates: str = "sampled", max_buffered: int = 1_000_000,
                 group_size: int | None = None, version: int = 1) -> None:
        if isinstance(ks, str | bytes) or not isinstance(ks, Sequence) or not ks:
            raise ValueError(f"RankingTask.ks must be a non-empty sequence of cutoffs; got {ks!r}")
        self.ks = tuple(check_count("RankingTask.ks", k) for k in ks)
        if len(set(self.ks)) != len(self.ks):
            raise ValueError(f"RankingTask.ks lists a cutoff twice: {self.ks}")
        self.max_relevance = check_count("RankingTask.max_relevance", max_relevance)
        self.relevance_threshold = check_count("RankingTask.relevance_threshold",
                                               relevance_threshold,
                                               maximum=self.max_relevance)
        self.weighting = check_choice("RankingTask.weighting", weighting, ("query", "pair"))
        self.candidates = check_choice("RankingTask.candidates", candidates,
                                       ("sampled", "exhaustive"))
        self.max_buffered = check_count("RankingTask.max_buffered", max_buffered)
        self.group_size = check_optional_count("RankingTask.group_size", group_size)
        if self.group_size is not None and max(self.ks) > self.group_size:
            raise ValueError(f"RankingTask: cutoff k={max(self.ks)} is above group_size="
                             f"{self.group_size}, every query's candidate count")
        self.version = check_count("RankingTask.version", version)

    # -- configuration -----------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Every declaration as plain data."""
        return {"ks": list(self.ks), "max_relevance": self.max_relevance,
                "relevance_threshold": self.relevance_threshold, "weighting": self.weighting,
                "candidates": self.candidates, "max_buffered": self.max_buffered,
                "group_size": self.group_size, "version": self.version}

    def identity(self) -> dict[str, Any]:
        """The run id's task block: the kind, then only the declarations off their
        defaults (a declaration added later keeps old ids)."""
        return {"kind": COMPONENT, **{key: value for key, value in self.config().items()
                                      if value != _DEFAULTS[key]}}

    def __repr__(self) -> str:
        return "RankingTask(" + ", ".join(f"{k}={v!r}" for k, v in self.config().items()) + ")"

    # -- the batch ---------------------------------------------------------------------
    def parse(self, batch: Any) -> RankingBatch:
        """``batch`` checked against the declarations (:class:`RankingBatchError`)."""
        return parse_batch(batch, max_relevance=self.max_relevance)

    def check_groups(self, query_ids: Sequence[Any], rows: Sequence[int]) -> None:
        """Every query has exactly ``group_size`` valid candidates (when declared)."""
        if self.group_size is None:
            return
        for group in query_groups([query_ids[i] for i in rows]):
            if len(group) != self.group_size:
                raise RankingBatchError(
                    f"query {query_ids[rows[group[0]]]!r} has {len(group)} candidates; the task "
                    f"declares group_size={self.group_size}")

    def loss(self, scores: torch.Tensor, batch: RankingBatch,
             rows: Sequence[int]) -> tuple[torch.Tensor, float]:
        """(numerator, denominator) of the pairwise loss over ``rows`` of ``batch``."""
        index = torch.as_tensor(list(rows), dtype=torch.long, device=scores.device)
        groups = query_groups([batch.query_ids[i] for i in rows])
        return pairwise_loss(scores.index_select(0, index), batch.relevance[list(rows)],
                             groups, weighting=self.weighting)

    # -- the Task protocol -------------------------------------------------------------
    def objective(self) -> RankingObjective:
        """The pairwise logistic objective the shared update engine runs."""
        return RankingObjective(self)

    def eval_step(self) -> Any:
        """The buffered per-query evaluation run on the validation loader each epoch."""
        return ranking_eval_step(self)

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """``ranking.mrr`` / ``ranking.recall`` / ``ranking.ndcg`` at every k, reported as
        ``<metric>_at_<k>``: declare them (``NNTrainParams(metrics=task.metric_specs())``)
        to monitor one (``MonitorSpec("ndcg_at_10")``)."""
        return tuple(MetricSpec(metric_id, config={"k": k}, name=f"{name}_at_{k}")
                     for metric_id, name in METRICS for k in self.ks)

    def check_train(self, params: Any) -> None:
        """Every training and validation batch checked before anything is built, so a bad
        batch anywhere is refused before any run directory or update (the scorer's output
        is checked at its first forward, still before the first update)."""
        for loader in (params.train_loader, params.val_loader):
            for raw in loader if loader is not None else ():
                batch = self.parse(raw)
                self.check_groups(batch.query_ids, batch.rows())

    def sample_ids(self, data: Any, rows: int) -> None:
        return None

    def refuse_default(self, path: str) -> None:
        """Every default path reads rows, not queries: refused before any forward."""
        if path == "predict":
            raise RankingEvaluationError(
                "RankingTask has no default predict path (it would decode classes): call "
                "model.net(features) for the scores")
        raise RankingEvaluationError(
            f"RankingTask has no default {path} path: it trains with task.objective() and "
            "validates with task.eval_step() (per query)")

    # -- component state "ranking.task" --------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_STATE_VERSION)

    def component_state(self) -> dict[str, Any]:
        return self.config()

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        if not isinstance(state, dict):
            return [f"{COMPONENT}: the saved state is not a mapping"]
        return [f"{COMPONENT}: the checkpoint was trained with {key}={state.get(key)!r}, this "
                f"run's task has {key}={value!r}: resume with the same RankingTask"
                for key, value in self.config().items() if state.get(key) != value]

    def load_component_state(self, state: Any, *, version: int) -> None:
        # Nothing evolves: check_component_state has already proved the configuration equal.
        return None

