"""MRR@k, Recall@k and NDCG@k as spec §24 defines them (gain 2^rel − 1, discount
log2(rank + 1), ties by candidate id, queries without a relevant candidate excluded and
counted), against the spec's worked numbers and against scikit-learn / torchmetrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import ndcg_score
from torchmetrics.retrieval import RetrievalNormalizedDCG

from nnx.ranking import RankingBatchError, RankingEvaluationError, ranking_metrics

REL, SCORES = [2, 0, 1], [3.0, 2.0, 1.0]
WORKED_NDCG = 3 / (3 + 1 / math.log2(3))


def test_the_spec_worked_example() -> None:
    out = ranking_metrics([7, 7, 7], [0, 1, 2], REL, SCORES, ks=(2,))
    assert out["mrr_at_2"] == 1.0
    assert out["recall_at_2"] == 0.5
    assert out["ndcg_at_2"] == pytest.approx(WORKED_NDCG, abs=1e-12)
    assert round(out["ndcg_at_2"], 6) == 0.826235
    assert (out["queries"], out["excluded_queries"], out["candidates"]) == (1.0, 0.0, 3.0)


def test_linear_gain_libraries_agree_given_exponential_gain_labels() -> None:
    # scikit-learn and torchmetrics use gain = rel: on raw labels they give 0.760188;
    # handed 2^rel − 1 as labels they compute exactly §24's NDCG.
    raw = ndcg_score([REL], [SCORES], k=2)
    assert round(raw, 6) == 0.760188
    gains = [2.0 ** r - 1 for r in REL]
    assert ndcg_score([gains], [SCORES], k=2) == pytest.approx(WORKED_NDCG, abs=1e-12)
    tm = RetrievalNormalizedDCG(top_k=2)
    value = tm(torch.tensor(SCORES), torch.tensor(gains), indexes=torch.zeros(3, dtype=torch.long))
    assert float(value) == pytest.approx(WORKED_NDCG, abs=1e-6)


def test_many_random_queries_match_torchmetrics() -> None:
    rng = np.random.default_rng(0)
    queries, per = 40, 12
    q = np.repeat(np.arange(queries), per)
    rel = rng.integers(0, 4, size=q.size)
    scores = rng.normal(size=q.size)  # continuous: no ties, so the tie rule cannot differ
    mine = ranking_metrics(q.tolist(), list(range(q.size)), rel, scores, ks=(5,))
    gains = torch.tensor(np.exp2(rel) - 1.0)
    kept = [i for i in range(queries) if rel[q == i].max() >= 1]
    tm = RetrievalNormalizedDCG(top_k=5)(torch.tensor(scores), gains, indexes=torch.tensor(q))
    assert len(kept) == queries  # every query scored here: torchmetrics averages all of them
    assert mine["ndcg_at_5"] == pytest.approx(float(tm), abs=1e-6)


def test_ties_are_broken_by_candidate_id_whatever_the_row_order() -> None:
    # Equal scores: candidate "a" ranks above "b", so the relevant "b" is second.
    one = ranking_metrics(["q", "q"], ["b", "a"], [1, 0], [0.5, 0.5], ks=(1,))
    two = ranking_metrics(["q", "q"], ["a", "b"], [0, 1], [0.5, 0.5], ks=(1,))
    assert one == two
    assert one["mrr_at_1"] == 0.0 and one["recall_at_1"] == 0.0


def test_a_query_without_a_relevant_candidate_is_excluded_and_counted() -> None:
    out = ranking_metrics([1, 1, 2, 2], [0, 1, 0, 1], [1, 0, 0, 0], [1.0, 0.0, 1.0, 0.0],
                          ks=(1,))
    assert out["mrr_at_1"] == 1.0  # query 2 is not scored 0
    assert (out["queries"], out["excluded_queries"]) == (2.0, 1.0)
    assert out["candidates_per_query"] == 2.0


def test_every_query_excluded_reports_no_metric() -> None:
    out = ranking_metrics([1, 1], [0, 1], [0, 0], [1.0, 0.0], ks=(1,))
    assert "ndcg_at_1" not in out and out["excluded_queries"] == 1.0


def test_relevance_threshold_decides_what_is_relevant() -> None:
    out = ranking_metrics([0, 0, 0], [0, 1, 2], REL, SCORES, ks=(2,), relevance_threshold=2)
    assert out["recall_at_2"] == 1.0  # only the grade-2 candidate is relevant
    assert out["ndcg_at_2"] == pytest.approx(WORKED_NDCG, abs=1e-12)  # gains are unchanged


@pytest.mark.parametrize("ks", [(0,), (-1,), (4,)])
def test_cutoffs_are_refused(ks: tuple[int, ...]) -> None:
    with pytest.raises(RankingEvaluationError, match="k"):
        ranking_metrics([0, 0, 0], [0, 1, 2], REL, SCORES, ks=ks)


def test_a_candidate_twice_and_mixed_ids_are_refused() -> None:
    with pytest.raises(RankingBatchError, match="listed twice"):
        ranking_metrics([0, 0], [5, 5], [1, 0], [1.0, 0.0], ks=(1,))
    with pytest.raises(RankingBatchError, match="integers or all strings"):
        ranking_metrics([0, "0"], [5, 6], [1, 0], [1.0, 0.0], ks=(1,))


def test_non_finite_scores_are_refused() -> None:
    with pytest.raises(RankingEvaluationError, match="finite"):
        ranking_metrics([0, 0], [0, 1], [1, 0], [math.nan, 0.0], ks=(1,))


def test_grouped_fixed_size_queries_rank_as_shuffled_rows_do() -> None:
    # Grouped rows of one candidate count take the per-query matrix sort; shuffled rows the
    # general one. Coarse scores make many ties, so the candidate-id rule is exercised.
    rng = np.random.default_rng(1)
    q = np.repeat(np.arange(30), 8)
    c = np.tile(rng.permutation(8), 30)
    rel = rng.integers(0, 3, size=q.size)
    scores = rng.integers(0, 3, size=q.size).astype(float)
    grouped = ranking_metrics(q.tolist(), c.tolist(), rel, scores, ks=(1, 3, 8))
    perm = rng.permutation(q.size)
    shuffled = ranking_metrics(q[perm].tolist(), c[perm].tolist(), rel[perm], scores[perm],
                               ks=(1, 3, 8))
    assert grouped == shuffled
