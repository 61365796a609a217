"""link_metrics (spec §26): exact AUROC / AP as scikit-learn defines them, BCE from logits
or probabilities in float64, one-class and edge-label sets reported unavailable."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score
from torch.nn import functional as F

from nnx.link_tasks import LinkMetrics, LinkMetricsError, link_metrics


def _coarse_sets(seed: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Logits on a coarse grid (many ties, some between a positive and a negative)."""
    g = torch.Generator().manual_seed(seed)
    out: list[tuple[torch.Tensor, torch.Tensor]] = []
    while len(out) < count:
        k = int(torch.randint(2, 40, (1,), generator=g))
        logits = torch.randint(-4, 5, (k,), generator=g).to(torch.float64) * 0.75
        y = torch.randint(0, 2, (k,), generator=g)
        if 0 < int(y.sum()) < k:
            out.append((logits, y))
    return out


def test_auroc_and_ap_equal_scikit_learn_on_the_same_logits_ties_included() -> None:
    for logits, y in _coarse_sets(0, 60):
        got = link_metrics(logits, y, from_logits=True)
        assert got.auroc == pytest.approx(roc_auc_score(y.numpy(), logits.numpy()),
                                          abs=1e-12, rel=0)
        assert got.ap == pytest.approx(average_precision_score(y.numpy(), logits.numpy()),
                                       abs=1e-12, rel=0)
        want_bce = F.binary_cross_entropy_with_logits(logits, y.double()).item()
        assert got.bce == pytest.approx(want_bce, abs=1e-12, rel=0)
        assert got.unavailable == {} and got.candidates == len(y)


def test_a_large_set_with_heavy_ties_matches_scikit_learn() -> None:
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(20_000, generator=g, dtype=torch.float64) * 4).round()
    y = (torch.rand(20_000, generator=g) < torch.sigmoid(logits)).long()
    got = link_metrics(logits, y, from_logits=True)
    assert got.auroc == pytest.approx(roc_auc_score(y, logits), abs=1e-12, rel=0)
    assert got.ap == pytest.approx(average_precision_score(y, logits), abs=1e-12, rel=0)


def test_continuous_probabilities_match_scikit_learn_and_log_loss() -> None:
    g = torch.Generator().manual_seed(1)
    p = torch.rand(500, generator=g, dtype=torch.float64) * 0.98 + 0.01
    y = (torch.rand(500, generator=g) < p).long()
    got = link_metrics(p.numpy(), y.tolist())  # arrays and lists are accepted too
    assert got.auroc == pytest.approx(roc_auc_score(y, p), abs=1e-12, rel=0)
    assert got.ap == pytest.approx(average_precision_score(y, p), abs=1e-12, rel=0)
    assert got.bce == pytest.approx(log_loss(y, p), abs=1e-12, rel=0)


def test_hand_computed_tie_between_a_positive_and_a_negative() -> None:
    # Values [2, 1, 1, 0], targets [1, 0, 1, 0]: pairs (pos > neg) 3 of 4 plus one tie /2
    # -> AUROC 3.5 / 4; AP: threshold 2 -> (1/2) * 1, threshold 1 -> (1/2) * (2/3).
    got = link_metrics([2.0, 1.0, 1.0, 0.0], [1, 0, 1, 0], from_logits=True)
    assert got.auroc == 0.875
    assert got.ap == pytest.approx(0.5 + 1 / 3, abs=1e-15)
    # -0.0 and 0.0 are one value: a full tie scores one half.
    assert link_metrics([-0.0, 0.0], [1, 0], from_logits=True).auroc == 0.5


def test_confident_logits_are_ranked_and_logged_as_logits_not_rounded_probabilities() -> None:
    # Beyond a logit of about 16.6, float32 rounds sigmoid to exactly 1.0: the negative at
    # 17 and the positive at 18 tie as probabilities but not as logits.
    logits = torch.tensor([18.0, 17.0, -3.0], dtype=torch.float32)
    y = torch.tensor([1, 0, 0])
    probabilities = torch.sigmoid(logits)
    assert probabilities[0] == probabilities[1] == 1.0
    from_logits = link_metrics(logits, y, from_logits=True)
    rounded = link_metrics(probabilities, y)
    assert from_logits.auroc == 1.0 and from_logits.ap == 1.0
    assert rounded.auroc == 0.75 and rounded.ap == 0.5  # the tie the rounding made
    # The negative at 17 costs softplus(17) ~ 17 nats; its rounded probability 1.0 would
    # cost -log(0), clamped at 100 as torch's binary_cross_entropy does.
    want = (math.log1p(math.exp(-18.0)) + math.log1p(math.exp(17.0))
            + math.log1p(math.exp(-3.0))) / 3
    assert from_logits.bce == pytest.approx(want, abs=1e-12, rel=0)
    assert rounded.bce == pytest.approx(
        F.binary_cross_entropy(probabilities.double(), y.double()).item(), abs=1e-12, rel=0)
    assert rounded.bce > 33.0 > from_logits.bce


@pytest.mark.parametrize(("y", "which"), [([0, 0, 0], "negative"), ([1, 1, 1], "positive")])
def test_a_one_class_set_reports_auroc_and_ap_unavailable_with_the_reason(
        y: list[int], which: str) -> None:
    got = link_metrics([0.2, 0.5, 0.9], y)
    assert got.auroc is None and got.ap is None
    assert set(got.unavailable) == {"auroc", "ap"}
    assert f"all 3 candidates are {which}" in got.unavailable["auroc"]
    assert got.as_record() == {"bce": got.bce}  # the record omits them
    assert got.bce == pytest.approx(F.binary_cross_entropy(
        torch.tensor([0.2, 0.5, 0.9], dtype=torch.float64),
        torch.tensor(y, dtype=torch.float64)).item(), abs=1e-12, rel=0)


def test_edge_label_logits_give_the_log_softmax_nll_and_binary_only_ranking_metrics() -> None:
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(7, 3, generator=g) * 30  # confident: softmax would round
    y = torch.tensor([0, 1, 2, 2, 1, 0, 0])
    got = link_metrics(logits, y, from_logits=True)
    assert got.kind == "edge_label" and got.candidates == 7
    assert got.bce == pytest.approx(F.cross_entropy(logits.double(), y).item(),
                                    abs=1e-12, rel=0)
    assert got.auroc is None and got.ap is None
    assert "binary-only" in got.unavailable["auroc"] and "binary-only" in got.unavailable["ap"]
    assert got.as_record() == {"bce": got.bce}
    probabilities = torch.softmax(logits.double(), 1)
    assert link_metrics(probabilities, y).bce == pytest.approx(
        F.nll_loss(probabilities.log().clamp(min=-100), y).item(), abs=1e-12, rel=0)


def test_the_result_is_frozen() -> None:
    got = link_metrics([0.1, 0.8], [0, 1])
    assert isinstance(got, LinkMetrics)
    with pytest.raises(AttributeError):
        got.auroc = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        got.unavailable["auroc"] = "x"  # type: ignore[index]


@pytest.mark.parametrize(("values", "targets", "kwargs", "match"), [
    ([], [], {}, "no candidates"),
    ([0.2, 0.4], [0, 1, 1], {}, r"targets must be \(2,\)"),
    ([0.2, 0.4], [0, 2], {}, "binary targets must be 0 or 1"),
    ([0.2, 0.4], [0, 0.5], {}, "whole numbers"),
    ([0.2, 1.4], [0, 1], {}, r"probabilities must lie in \[0, 1\].*from_logits=True"),
    ([0.2, float("nan")], [0, 1], {"from_logits": True}, "must be finite"),
    ([[0.2], [0.4]], [0, 1], {}, r"categories >= 2; got shape \(2, 1\)"),
    ([[1.0, 2.0], [3.0, 4.0]], [0, 2], {"from_logits": True}, r"in \[0, 2\)"),
    (np.zeros((2, 2, 2)), [0, 1], {}, "got shape"),
])
def test_refusals_name_the_problem(values: Any, targets: Any, kwargs: dict[str, Any],
                                   match: str) -> None:
    with pytest.raises(LinkMetricsError, match=match):
        link_metrics(values, targets, **kwargs)


def test_from_logits_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="from_logits must be a bool"):
        link_metrics([0.1, 0.9], [0, 1], from_logits=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("dtype", "below", "beyond"), [(torch.float32, 16.6, 16.7),
                                                        (torch.float64, 36.7, 36.8)])
def test_a_probability_rounds_to_one_beyond_16_6_in_float32_and_36_7_in_float64(
        dtype: torch.dtype, below: float, beyond: float) -> None:
    # Spec §26 "Metrics from logits": 1 + exp(-z) rounds to 1 once exp(-z) is under half
    # the spacing above 1 (2^-24 in float32, 2^-53 in float64): z > 24 ln 2 ~ 16.64,
    # z > 53 ln 2 ~ 36.74.
    probabilities = torch.sigmoid(torch.tensor([below, beyond], dtype=dtype))
    assert probabilities[0] < 1.0 and probabilities[1] == 1.0
    assert math.isclose(24 * math.log(2), 16.6, abs_tol=0.05)
    assert math.isclose(53 * math.log(2), 36.7, abs_tol=0.05)
    # Beyond the threshold the probabilities tie; the logits still rank the candidates,
    # and the positive at `beyond + 1` outranks the negative at `beyond`.
    logits = torch.tensor([beyond + 1.0, beyond, 0.0], dtype=dtype)
    y = torch.tensor([1, 0, 0])
    assert link_metrics(logits, y, from_logits=True).auroc == 1.0
    assert link_metrics(torch.sigmoid(logits), y).auroc == 0.75
