"""Exact link-prediction metrics over every candidate: AUROC, AP and BCE (spec §26).

``link_metrics(values, targets)`` scores bare probabilities; ``from_logits=True`` scores
logits, as the link evaluator does. Everything is computed in float64 over the whole
candidate set at once, never as per-batch averages:

* AUROC is the Mann-Whitney statistic with tied values sharing their mean rank (a tie
  between a positive and a negative counts one half), which is the area under the
  trapezoidal ROC curve scikit-learn's ``roc_auc_score`` integrates.
* AP is ``sum_n (R_n - R_{n-1}) P_n`` over the distinct values taken as thresholds from
  the highest down, as scikit-learn's ``average_precision_score`` defines it (a step
  function, no interpolation; tied candidates enter together).
* BCE is the mean binary cross-entropy; for edge-label candidates (``(K, categories)``
  values) it is the mean categorical cross-entropy, the NLL of the target category.

From logits, the BCE comes from the logits themselves (``softplus``; for categories the
log-softmax) and AUROC / AP rank the logits: in float32 every logit beyond about 16.6 has
the probability 1.0, so ranking or logging probabilities would tie candidates the logits
tell apart and clip their loss. From probabilities, a log is clamped at -100 as torch's
``binary_cross_entropy`` does, so a probability of exactly 0 or 1 on the wrong side gives a
finite (large) loss.

AUROC and AP are binary-only: they rank one score per candidate against a yes / no
target. Edge-label candidates report them unavailable (the reason says so), as does a
binary set with a single class, where neither is defined. One sort and a few cumulative
sums over the K candidates: O(K log K), no Python loop over candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import torch
from torch.nn import functional as F

__all__ = ["LinkMetrics", "LinkMetricsError", "link_metrics"]

# torch's binary_cross_entropy clamps each log at -100 so that a probability of exactly 0
# or 1 on the wrong side stays finite; the probability path follows the same convention.
_LOG_FLOOR = -100.0


class LinkMetricsError(ValueError):
    """``link_metrics`` refuses its input: a shape, a target outside the binary / category
    set, a non-finite value, a probability outside [0, 1] or an empty candidate set."""


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class LinkMetrics:
    """The exact metrics of one candidate set.

    ``auroc`` / ``ap`` are None exactly when ``unavailable`` names them with the reason
    (a one-class set, or edge-label candidates). ``bce`` is always present: the binary
    cross-entropy, or for ``kind == "edge_label"`` the categorical cross-entropy.
    """

    kind: Literal["binary", "edge_label"]
    candidates: int
    bce: float
    auroc: float | None = None
    ap: float | None = None
    unavailable: Mapping[str, str] = field(default_factory=_empty)

    def as_record(self) -> dict[str, float]:
        """The available values by name (``bce``, then ``auroc`` / ``ap`` when defined):
        what an evaluator records, so an unavailable metric is absent, never a number."""
        out = {"bce": self.bce}
        if self.auroc is not None:
            out["auroc"] = self.auroc
        if self.ap is not None:
            out["ap"] = self.ap
        return out


def link_metrics(values: Any, targets: Any, *, from_logits: bool = False) -> LinkMetrics:
    """AUROC, AP and BCE of ``values`` against ``targets`` (see the module docstring).

    ``values``: (K,) binary scores (probabilities, or logits with ``from_logits=True``) or
    (K, categories) edge-label scores (per-category probabilities, or logits). ``targets``:
    (K,) 0 / 1 (binary) or category indices in ``[0, categories)``. Tensors, arrays and
    sequences are accepted; nothing is changed in place.
    """
    if not isinstance(from_logits, bool):
        raise TypeError(f"link_metrics: from_logits must be a bool; got {from_logits!r}")
    scores = _float64(values, "values")
    if scores.dim() == 1:
        return _binary(scores, _binary_targets(targets, len(scores)), from_logits)
    if scores.dim() == 2 and scores.shape[1] >= 2:
        return _edge_label(scores, _category_targets(targets, scores.shape), from_logits)
    raise LinkMetricsError(f"link_metrics: values must be (K,) binary scores or (K, categories) "
                           f"edge-label scores with categories >= 2; got shape "
                           f"{tuple(scores.shape)}")


def _float64(values: Any, what: str) -> torch.Tensor:
    # A sequence of Python floats is read as float64 (torch's default would round it to
    # float32 first); an array keeps its own dtype until the float64 cast below.
    t = (values.detach() if isinstance(values, torch.Tensor)
         else torch.as_tensor(values, dtype=None if hasattr(values, "dtype") else torch.float64))
    if t.dtype == torch.bool or t.is_complex():
        raise LinkMetricsError(f"link_metrics: {what} must be real numbers; got {t.dtype}")
    # + 0.0 turns -0.0 into 0.0, so the two zeros are one tie group.
    out = t.to(device="cpu", dtype=torch.float64) + 0.0
    if out.numel() == 0:
        raise LinkMetricsError("link_metrics: no candidates (an empty set has no metrics)")
    if not bool(torch.isfinite(out).all()):
        raise LinkMetricsError(f"link_metrics: {what} must be finite; got "
                               f"{int((~torch.isfinite(out)).sum())} NaN / infinite")
    return out


def _targets(targets: Any, count: int) -> torch.Tensor:
    t = targets.detach() if isinstance(targets, torch.Tensor) else torch.as_tensor(targets)
    t = t.to("cpu")
    if t.shape != (count,):
        raise LinkMetricsError(f"link_metrics: targets must be ({count},), one per candidate; "
                               f"got shape {tuple(t.shape)}")
    if t.is_floating_point():
        if not bool((t == t.round()).all()):
            raise LinkMetricsError("link_metrics: targets must be whole numbers (0 / 1, or "
                                   "category indices)")
    elif t.is_complex():
        raise LinkMetricsError(f"link_metrics: targets must be real; got {t.dtype}")
    return t.to(torch.int64)


def _binary_targets(targets: Any, count: int) -> torch.Tensor:
    t = _targets(targets, count)
    bad = t[(t != 0) & (t != 1)]
    if len(bad):
        raise LinkMetricsError(f"link_metrics: binary targets must be 0 or 1; got values "
                               f"{sorted(set(bad.tolist()))[:5]}")
    return t


def _category_targets(targets: Any, shape: torch.Size) -> torch.Tensor:
    count, categories = shape
    t = _targets(targets, count)
    if not bool(((t >= 0) & (t < categories)).all()):
        raise LinkMetricsError(f"link_metrics: edge-label targets must be category indices "
                               f"in [0, {categories}); got min {int(t.min())}, max "
                               f"{int(t.max())}")
    return t


def _check_probabilities(scores: torch.Tensor) -> None:
    if not bool(((scores >= 0) & (scores <= 1)).all()):
        raise LinkMetricsError(
            f"link_metrics: probabilities must lie in [0, 1]; got values in "
            f"[{float(scores.min())}, {float(scores.max())}] (pass from_logits=True to score "
            "logits)")


def _binary(scores: torch.Tensor, y: torch.Tensor, from_logits: bool) -> LinkMetrics:
    positives = int(y.sum())
    yf = y.to(torch.float64)
    if from_logits:
        bce = float(F.binary_cross_entropy_with_logits(scores, yf))
    else:
        _check_probabilities(scores)
        log_p = torch.log(scores).clamp(min=_LOG_FLOOR)
        log_q = torch.log1p(-scores).clamp(min=_LOG_FLOOR)
        bce = float(-(yf * log_p + (1.0 - yf) * log_q).mean())
    count = len(y)
    if positives in (0, count):
        which = "negative" if positives == 0 else "positive"
        reason = (f"one-class set: all {count} candidates are {which}; AUROC and AP need "
                  "both positives and negatives")
        return LinkMetrics("binary", count, bce,
                           unavailable=MappingProxyType({"auroc": reason, "ap": reason}))
    auroc, ap = _ranking(scores, y, positives)
    return LinkMetrics("binary", count, bce, auroc=auroc, ap=ap)


def _ranking(scores: torch.Tensor, y: torch.Tensor, positives: int) -> tuple[float, float]:
    """(AUROC, AP) of a two-class set; tied values form one group, taken together."""
    count = len(y)
    ordered, order = torch.sort(scores)
    y_sorted = y[order]
    last = torch.ones(count, dtype=torch.bool)  # the last (ascending) candidate of a group
    last[:-1] = ordered[1:] != ordered[:-1]
    ends = torch.arange(count)[last]
    starts = torch.cat([ends.new_zeros(1), ends[:-1] + 1])
    # Positives at or below each group's end, and in each group (integers: exact).
    below = torch.cumsum(y_sorted, 0)[ends]
    group_positives = below - torch.cat([below.new_zeros(1), below[:-1]])
    # AUROC: a group's mean rank (1-based, ascending) is (start + 1 + end + 1) / 2, so the
    # positives' rank sum, doubled, is an exact integer until the one final division.
    twice_rank_sum = int((group_positives * (starts + ends + 2)).sum())
    negatives = count - positives
    auroc = (twice_rank_sum - positives * (positives + 1)) / (2 * positives * negatives)
    # AP: a group's value as the threshold keeps it and every group above it; recall rises
    # by its positives / P, at precision (positives kept) / (candidates kept).
    kept_positives = positives - (below - group_positives)
    precision = kept_positives.to(torch.float64) / (count - starts).to(torch.float64)
    ap = float((group_positives.to(torch.float64) * precision).sum()) / positives
    return float(auroc), ap


def _edge_label(scores: torch.Tensor, y: torch.Tensor, from_logits: bool) -> LinkMetrics:
    if from_logits:
        nll = float(F.cross_entropy(scores, y))
    else:
        _check_probabilities(scores)
        picked = scores.gather(1, y.unsqueeze(1)).squeeze(1)
        nll = float(-torch.log(picked).clamp(min=_LOG_FLOOR).mean())
    reason = ("binary-only: AUROC and AP rank one score per candidate against a yes / no "
              "target; edge-label candidates are scored by their categorical cross-entropy")
    return LinkMetrics("edge_label", len(y), nll,
                       unavailable=MappingProxyType({"auroc": reason, "ap": reason}))
