"""The named refusals of nnx.ranking (spec §24), each raised before any update."""

from __future__ import annotations

__all__ = ["RankingBatchError", "RankingEvaluationError"]


class RankingBatchError(ValueError):
    """A ranking batch (or the buffered validation stream) is refused: mismatched lengths,
    mixed id types, a candidate listed twice for one query, a grade outside the declared
    range, a bad mask, or a scorer that does not return one score per row."""


class RankingEvaluationError(ValueError):
    """A ranking evaluation is refused: a cutoff above a query's candidate count, a stream
    over ``max_buffered`` rows, non-finite scores, or a ranking metric asked of a path
    other than ``RankingTask.eval_step()``."""
