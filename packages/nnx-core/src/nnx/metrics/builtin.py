"""The built-in metrics at version 1, announced by nnx-core's own ``nnx.metrics`` entry points.

Core's pyproject names each registration below (``"accuracy@v1" =
"nnx.metrics.builtin:ACCURACY_V1"``), so a built-in resolves through the same
entry-point path an add-on's metric does, and that path runs in every test.

Every accumulator keeps running sums (or counts) over all samples it is fed,
so a short last batch weighs exactly its samples. Inputs, as the task
adapters deliver them (valid targets only):

* labels — ``target`` and ``prediction`` are 1-D arrays of labels;
* probabilities — ``target`` is 1-D; ``prediction`` is ``(n, C)`` class
  probabilities (categorical) or 1-D Bernoulli probabilities (multilabel);
* continuous — ``target`` and ``prediction`` are arrays of equal size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from nnx._foundation.validation import check_choice
from nnx.metrics.registry import MetricRegistration, MetricSource, register_metric
from nnx.metrics.terms import METRIC_EPSILON, brier_terms, nll_terms

__all__ = ["F1_AVERAGES", "register_builtin_metrics"]

F1_AVERAGES = ("macro", "binary")


def _flat(value: Any, dtype: Any = None) -> npt.NDArray[Any]:
    return np.asarray(value, dtype=dtype).reshape(-1)


def _pair(target: Any, prediction: Any, dtype: Any = None) -> tuple[npt.NDArray[Any], ...]:
    t, p = _flat(target, dtype), _flat(prediction, dtype)
    if t.shape != p.shape:
        raise ValueError(
            f"metric update needs as many targets as predictions; got {t.size} and {p.size}"
        )
    return t, p


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


class _Mean:
    """Running sum / count of a per-sample quantity."""

    def __init__(self) -> None:
        self.total = 0.0
        self.n = 0

    def add(self, values: npt.NDArray[np.float64]) -> None:
        self.total += float(values.sum())
        self.n += int(values.size)

    def result(self) -> float:
        return _ratio(self.total, self.n)

    def merge(self, other: _Mean) -> None:
        self.total += other.total
        self.n += other.n


class Accuracy:
    """Fraction of labels predicted exactly."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._mean = _Mean()

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _pair(target, prediction)
        self._mean.add((t == p).astype(np.float64))

    def result(self) -> float:
        return self._mean.result()

    def merge(self, other: Any) -> None:
        """Add ``other``'s sums (spec §21: bounded, order-free)."""
        self._mean.merge(other._mean)


class F1:
    """F1 over every label seen: macro over labels present in targets or predictions
    (scikit-learn's ``average="macro"``), or the F1 of the positive label 1 pooled
    over every sample (``average="binary"``). An undefined F1 counts as 0."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.average = config.get("average", "macro")
        self.tp: dict[Any, int] = {}
        self.n_true: dict[Any, int] = {}
        self.n_pred: dict[Any, int] = {}

    @staticmethod
    def _add(into: dict[Any, int], labels: npt.NDArray[Any]) -> None:
        values, counts = np.unique(labels, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            into[v] = into.get(v, 0) + int(c)

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _pair(target, prediction)
        self._add(self.n_true, t)
        self._add(self.n_pred, p)
        self._add(self.tp, t[t == p])

    def _f1(self, label: Any) -> float:
        tp = self.tp.get(label, 0)
        den = self.n_true.get(label, 0) + self.n_pred.get(label, 0)
        return 2.0 * tp / den if den else 0.0

    def result(self) -> float:
        if self.average == "binary":
            if not self.n_true:
                return math.nan
            return self._f1(1)
        labels = set(self.n_true) | set(self.n_pred)
        if not labels:
            return math.nan
        # Sorted, as scikit-learn orders its labels, so the mean sums in the same order.
        return float(np.mean([self._f1(label) for label in sorted(labels)]))

    def merge(self, other: F1) -> None:
        """Add ``other``'s confusion counts (spec §21); its dicts are never shared."""
        for mine, theirs in ((self.tp, other.tp), (self.n_true, other.n_true),
                             (self.n_pred, other.n_pred)):
            for label, count in theirs.items():
                mine[label] = mine.get(label, 0) + count


def _probability_pair(
    target: Any, prediction: Any
) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64]]:
    p = np.asarray(prediction, dtype=np.float64)
    if p.ndim == 2:  # categorical: (n, C) probabilities against class indices
        t = _flat(target)
        if t.shape[0] != p.shape[0]:
            raise ValueError(
                f"metric update needs one class index per probability row; got {t.size} "
                f"targets and {p.shape[0]} rows"
            )
        return t.astype(np.int64), p
    t2, p2 = _pair(target, p, np.float64)
    return t2, p2


class NLL:
    """Mean negative log-likelihood: of the true class (categorical), or the
    Bernoulli NLL of each output (multilabel). A probability is floored at
    METRIC_EPSILON (1e-12, spec §18): the true class's, or in the Bernoulli case both
    p and 1 - p (a clip to [eps, 1 - eps])."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._mean = _Mean()

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _probability_pair(target, prediction)
        if p.ndim == 2:
            losses = nll_terms(p, t, epsilon=METRIC_EPSILON)
        else:
            p = np.clip(p, METRIC_EPSILON, 1.0 - METRIC_EPSILON)
            y = t.astype(np.float64)
            losses = -(y * np.log(p) + (1.0 - y) * np.log1p(-p))
        self._mean.add(losses)

    def result(self) -> float:
        return self._mean.result()

    def merge(self, other: Any) -> None:
        """Add ``other``'s sums (spec §21: bounded, order-free)."""
        self._mean.merge(other._mean)


class Brier:
    """Mean Brier score: squared error summed over classes (categorical), or per
    output (multilabel)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._mean = _Mean()

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _probability_pair(target, prediction)
        scores = brier_terms(p, t) if p.ndim == 2 else (p - t.astype(np.float64)) ** 2
        self._mean.add(scores)

    def result(self) -> float:
        return self._mean.result()

    def merge(self, other: Any) -> None:
        """Add ``other``'s sums (spec §21: bounded, order-free)."""
        self._mean.merge(other._mean)


class MSE:
    """Mean squared error over every valid output."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._mean = _Mean()

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _pair(target, prediction, np.float64)
        self._mean.add((p - t) ** 2)

    def result(self) -> float:
        return self._mean.result()

    def merge(self, other: Any) -> None:
        """Add ``other``'s sums (spec §21: bounded, order-free)."""
        self._mean.merge(other._mean)


class MAE:
    """Mean absolute error over every valid output."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._mean = _Mean()

    def update(self, target: Any, prediction: Any) -> None:
        t, p = _pair(target, prediction, np.float64)
        self._mean.add(np.abs(p - t))

    def result(self) -> float:
        return self._mean.result()

    def merge(self, other: Any) -> None:
        """Add ``other``'s sums (spec §21: bounded, order-free)."""
        self._mean.merge(other._mean)


def _no_config(metric: str) -> Any:
    def check(config: Mapping[str, Any]) -> None:
        if config:
            raise ValueError(
                f"metric {metric!r} takes no config; got key(s) {sorted(config)}"
            )

    return check


def _check_f1_config(config: Mapping[str, Any]) -> None:
    unknown = sorted(set(config) - {"average"})
    if unknown:
        raise ValueError(f"metric 'f1' config takes only 'average'; got key(s) {unknown}")
    average = config.get("average", "macro")
    try:
        check_choice("metric 'f1' config['average']", average, F1_AVERAGES)
    except ValueError as exc:
        raise ValueError(
            f"{exc}. Per-label and weighted averaging are not available: use 'macro' "
            f"(categorical: macro over classes) or 'binary' (multilabel: the "
            f"positive-decision F1 pooled over every output)"
        ) from None


def _check_f1_task(config: Mapping[str, Any], source: MetricSource) -> None:
    average = config.get("average", "macro")
    if source.metric_kind == "multilabel" and average != "binary":
        raise ValueError(
            "metric 'f1' on a multilabel model needs config={'average': 'binary'} (the "
            "positive-decision F1 pooled over every output); per-label averaging is not "
            "available"
        )
    if (source.metric_kind == "categorical" and average == "binary"
            and source.num_outputs not in (None, 2)):
        raise ValueError(
            f"metric 'f1' with average='binary' needs two classes; this model has "
            f"{source.num_outputs}: use config={{'average': 'macro'}}"
        )


# The entry-point targets (nnx-core's pyproject, group nnx.metrics): id@v1 -> registration.
ACCURACY_V1 = MetricRegistration(Accuracy, input="labels", mode="max",
                                 check_config=_no_config("accuracy"))
F1_V1 = MetricRegistration(F1, input="labels", mode="max",
                           check_config=_check_f1_config, check_task=_check_f1_task)
NLL_V1 = MetricRegistration(NLL, input="probabilities", mode="min",
                            check_config=_no_config("nll"))
BRIER_V1 = MetricRegistration(Brier, input="probabilities", mode="min",
                              check_config=_no_config("brier"))
MSE_V1 = MetricRegistration(MSE, input="continuous", mode="min",
                            check_config=_no_config("mse"))
MAE_V1 = MetricRegistration(MAE, input="continuous", mode="min",
                            check_config=_no_config("mae"))

_BUILTINS: dict[str, MetricRegistration] = {
    "accuracy": ACCURACY_V1, "f1": F1_V1, "nll": NLL_V1, "brier": BRIER_V1,
    "mse": MSE_V1, "mae": MAE_V1,
}


def register_builtin_metrics() -> None:
    """(Re-)register the built-in metrics at version 1 explicitly.

    Not needed for them to resolve (nnx-core's entry points announce them); it puts
    back a built-in that ``unregister_metric`` removed or a registration replaced.
    """
    for id, entry in _BUILTINS.items():
        register_metric(id, 1, entry.factory, input=entry.input, mode=entry.mode,
                        check_config=entry.check_config, check_task=entry.check_task)
