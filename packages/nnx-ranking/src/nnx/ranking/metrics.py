"""Per-query ranking metrics (spec §24): MRR@k, Recall@k and NDCG@k over a whole stream.

Every query's candidates are ranked by score, ties broken by ascending candidate id, so
the ranking never depends on the order rows arrived in. A candidate is relevant at or above
the relevance threshold. NDCG uses gain 2^rel − 1 and discount log2(rank + 1) (rank 1 on
top), its ideal ranking the same gains sorted. A query without a relevant candidate is
excluded and counted, never scored 0; a metric is the mean over the scored queries.

The computation is vectorised over the whole stream (one lexicographic sort, then
per-query sums by ``bincount``), so it costs a few passes over the rows however many
queries there are, never a Python loop per query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnx.ranking.errors import RankingBatchError, RankingEvaluationError

__all__ = ["ranking_metrics"]


def _codes(ids: Sequence[Any], what: str, *, dense: bool) -> np.ndarray:
    """Integer codes in the ids' own sort order (so a code order is the id order): the
    integers themselves where only the order matters, else 0..distinct-1 (``dense``)."""
    kinds = {type(v) for v in ids}
    if kinds - {int, str} or len(kinds) > 1:
        raise RankingBatchError(f"{what} must all be integers or all strings; got "
                                f"{sorted(k.__name__ for k in kinds)}")
    if kinds == {int}:
        integers: np.ndarray = np.asarray(ids, dtype=np.int64)
        if not dense:
            return integers
        if bool((integers[1:] >= integers[:-1]).all()):
            # Rows already grouped in id order (as a loader usually yields them): the codes
            # are the running count of id changes, without a sort.
            return np.concatenate(([0], np.cumsum(integers[1:] != integers[:-1])))
        return np.unique(integers, return_inverse=True)[1].reshape(-1)
    return np.unique(np.asarray(ids, dtype=np.str_), return_inverse=True)[1].reshape(-1)


def _cutoffs(ks: Sequence[int]) -> tuple[int, ...]:
    out = tuple(ks)
    if not out or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0
                      for k in out):
        raise RankingEvaluationError(f"ranking cutoffs k must be positive integers; got {out!r}")
    return tuple(int(k) for k in out)


def _orders(q: np.ndarray, c: np.ndarray, score: np.ndarray, rel: np.ndarray,
            counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows ranked (by query, then score down, then candidate id) and ideally ranked
    (by query, then grade down). Rows grouped by query with one candidate count, as a
    loader of fixed-size queries yields them, are sorted per query as a (queries, count)
    matrix: the same orders, each sort over a query's candidates rather than every row."""
    size = int(counts[0])
    if bool((counts == size).all()) and bool((q[1:] >= q[:-1]).all()):
        shape, base = (counts.size, size), np.arange(counts.size)[:, None] * size
        ranked = np.lexsort((c.reshape(shape), -score.reshape(shape)), axis=1) + base
        ideal = np.argsort(-rel.reshape(shape), axis=1, kind="stable") + base
        return ranked.reshape(-1), ideal.reshape(-1)
    return np.lexsort((c, -score, q)), np.lexsort((-rel, q))


def ranking_metrics(query_ids: Sequence[Any], candidate_ids: Sequence[Any],
                    relevance: Any, scores: Any, *, ks: Sequence[int] = (10,),
                    relevance_threshold: int = 1) -> dict[str, float]:
    """MRR@k, Recall@k and NDCG@k averaged over the queries with a relevant candidate.

    ``query_ids`` / ``candidate_ids`` are host values (all integers or all strings),
    ``relevance`` integer grades, ``scores`` one finite score per row. Returns
    ``mrr_at_<k>``, ``recall_at_<k>``, ``ndcg_at_<k>`` (absent when every query is
    excluded), ``queries``, ``excluded_queries``, ``candidates`` and
    ``candidates_per_query``. Refuses a candidate listed twice for one query
    (:class:`RankingBatchError`), a k above a query's candidate count and non-finite scores
    (:class:`RankingEvaluationError`).
    """
    cutoffs = _cutoffs(ks)
    if relevance_threshold < 1:
        raise RankingEvaluationError("relevance_threshold must be at least 1 (a grade-0 "
                                     f"candidate is never relevant); got {relevance_threshold}")
    rel = np.asarray(relevance, dtype=np.int64).reshape(-1)
    score = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = len(query_ids)
    if not len(candidate_ids) == rel.size == score.size == n:
        raise RankingBatchError(f"ranking rows disagree in length: {n} query ids, "
                                f"{len(candidate_ids)} candidate ids, {rel.size} grades, "
                                f"{score.size} scores")
    if not np.isfinite(score).all():
        raise RankingEvaluationError("ranking scores must be finite to rank candidates")
    if n == 0:
        return {"queries": 0.0, "excluded_queries": 0.0, "candidates": 0.0,
                "candidates_per_query": 0.0}
    q = _codes(query_ids, "query ids", dense=True)
    c = _codes(candidate_ids, "candidate ids", dense=False)
    by_id = np.lexsort((c, q))
    twice = (q[by_id][1:] == q[by_id][:-1]) & (c[by_id][1:] == c[by_id][:-1])
    if twice.any():
        at = by_id[1:][twice][0]
        raise RankingBatchError(f"candidate {candidate_ids[at]!r} is listed twice for query "
                                f"{query_ids[at]!r}")
    counts = np.bincount(q)
    n_queries = counts.size
    if max(cutoffs) > counts.min():
        raise RankingEvaluationError(
            f"cutoff k={max(cutoffs)} is above a query's candidate count ({counts.min()}): "
            "declare ks no larger than the smallest candidate set")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    relevant = rel >= relevance_threshold
    n_relevant = np.bincount(q, weights=relevant, minlength=n_queries)
    scored = n_relevant > 0
    n_scored = int(scored.sum())
    out = {"queries": float(n_queries), "excluded_queries": float(n_queries - n_scored),
           "candidates": float(n), "candidates_per_query": n / n_queries}
    if n_scored == 0:
        return out
    gain = np.exp2(rel.astype(np.float64)) - 1.0
    ranked, ideal = _orders(q, c, score, rel, counts)
    q_ranked = q[ranked]
    position = np.arange(n) - starts[q_ranked]          # 0 on top
    discount = 1.0 / np.log2(position + 2.0)            # log2(rank + 1), rank = position + 1
    hit_ranked, gain_ranked, gain_ideal = relevant[ranked], gain[ranked], gain[ideal]
    for k in cutoffs:
        top = position < k
        hit = top & hit_ranked
        first_q, first_at = np.unique(q_ranked[hit], return_index=True)
        reciprocal = np.zeros(n_queries)
        reciprocal[first_q] = 1.0 / (position[hit][first_at] + 1.0)
        recall = np.bincount(q_ranked, weights=hit, minlength=n_queries)[scored] \
            / n_relevant[scored]
        dcg = np.bincount(q_ranked, weights=gain_ranked * discount * top, minlength=n_queries)
        idcg = np.bincount(q[ideal], weights=gain_ideal * discount * top, minlength=n_queries)
        out[f"mrr_at_{k}"] = float(reciprocal[scored].mean())
        out[f"recall_at_{k}"] = float(recall.mean())
        out[f"ndcg_at_{k}"] = float((dcg[scored] / idcg[scored]).mean())
    return out
