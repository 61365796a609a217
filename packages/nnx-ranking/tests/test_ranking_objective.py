"""The pairwise logistic objective of spec §24: the worked loss, ties and skipped queries,
the two weightings, and the bounded blocks (exact against the dense n × n formula)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nnx.ranking.pairwise import BLOCK_ROWS, pair_count, pairwise_loss, pairwise_sum


def test_relevance_1_0_scores_2_0_give_0_126928() -> None:
    numerator, denominator = pairwise_loss(torch.tensor([2.0, 0.0]), torch.tensor([1, 0]),
                                           [[0, 1]], weighting="query")
    assert denominator == 1.0
    assert float(numerator) == pytest.approx(math.log1p(math.exp(-2)), abs=1e-7)
    assert round(float(numerator), 6) == 0.126928


def test_ties_add_nothing_and_a_query_without_an_unequal_pair_is_skipped() -> None:
    scores, grades = torch.tensor([2.0, 0.0, 5.0, 1.0]), torch.tensor([1, 0, 1, 1])
    numerator, denominator = pairwise_loss(scores, grades, [[0, 1], [2, 3]], weighting="query")
    assert denominator == 1.0  # the all-tied query 2 is skipped, not scored 0
    assert float(numerator) == pytest.approx(math.log1p(math.exp(-2)), abs=1e-7)
    none, zero = pairwise_loss(scores, grades, [[2, 3]], weighting="pair")
    assert (float(none), zero) == (0.0, 0.0)


def test_query_and_pair_weighting() -> None:
    # Query A: grades [2, 1, 0] (3 pairs); query B: [1, 0] (1 pair).
    scores = torch.tensor([0.5, 0.2, -0.1, 1.0, 3.0])
    grades = torch.tensor([2, 1, 0, 1, 0])
    groups = [[0, 1, 2], [3, 4]]
    sp = lambda d: math.log1p(math.exp(-d))  # noqa: E731
    a = sp(0.3) + sp(0.6) + sp(0.3)
    b = sp(-2.0)
    by_query = pairwise_loss(scores, grades, groups, weighting="query")
    by_pair = pairwise_loss(scores, grades, groups, weighting="pair")
    assert float(by_query[0]) / by_query[1] == pytest.approx((a / 3 + b) / 2, abs=1e-6)
    assert float(by_pair[0]) / by_pair[1] == pytest.approx((a + b) / 4, abs=1e-6)


def dense(scores: torch.Tensor, grades: torch.Tensor) -> torch.Tensor:
    above = grades[:, None] > grades[None, :]
    return F.softplus(-(scores[:, None] - scores[None, :]))[above].sum()


def test_blocks_equal_the_dense_formula_with_their_gradient() -> None:
    n = 2 * BLOCK_ROWS + 37  # three blocks, the last one short
    g = torch.Generator().manual_seed(0)
    grades = torch.randint(0, 4, (n,), generator=g)
    base = torch.randn(n, generator=g, dtype=torch.float64)
    blocked, full = base.clone().requires_grad_(), base.clone().requires_grad_()
    value, expected = pairwise_sum(blocked, grades), dense(full, grades)
    value.backward()
    expected.backward()
    assert torch.allclose(value, expected, rtol=1e-12, atol=0)
    assert torch.allclose(blocked.grad, full.grad, rtol=1e-12, atol=1e-15)
    assert pair_count(grades) == int((grades[:, None] > grades[None, :]).sum())
