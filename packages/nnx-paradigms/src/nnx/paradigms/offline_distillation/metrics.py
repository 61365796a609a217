"""The named quality metrics of offline distillation (spec §10.1 "Reports", §6.4).

``label_accuracy`` (labels, max) and ``label_nll`` (probabilities, min) are
registered metrics, announced through the ``nnx.metrics`` entry-point group, so a
run can declare ``MetricSpec("label_accuracy")`` and select or stop on it with
``MonitorSpec(metric="label_accuracy")``. ``TeacherDataset.eval_step()`` fills
them over the labelled records only; on an ordinary labelled loader the
accumulators below compute plain accuracy and NLL of the true class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnx.extend import MetricRegistration

__all__ = ["LABEL_ACCURACY", "LABEL_NLL", "LabelAccuracy", "LabelNLL"]

_EPS = 1e-15  # probabilities are clipped as scikit-learn's log_loss does


def _no_config(name: str) -> Any:
    def check(config: Mapping[str, Any]) -> None:
        if config:
            raise ValueError(f"metric {name!r} takes no config; got {dict(config)!r}")
    return check


class LabelAccuracy:
    """Fraction of labelled rows whose predicted label is the label."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.right = 0
        self.n = 0

    def update(self, target: Any, prediction: Any) -> None:
        t, p = np.asarray(target).reshape(-1), np.asarray(prediction).reshape(-1)
        self.right += int((t == p).sum())
        self.n += int(t.size)

    def result(self) -> float:
        return self.right / self.n if self.n else math.nan


class LabelNLL:
    """Mean negative log-probability of the labelled class."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.total = 0.0
        self.n = 0

    def update(self, target: Any, prediction: Any) -> None:
        p = np.asarray(prediction, dtype=np.float64)
        t = np.asarray(target).reshape(-1).astype(np.int64)
        picked = np.clip(p[np.arange(t.size), t], _EPS, 1 - _EPS)
        self.total += float(-np.log(picked).sum())
        self.n += int(t.size)

    def result(self) -> float:
        return self.total / self.n if self.n else math.nan


LABEL_ACCURACY = MetricRegistration(factory=LabelAccuracy, input="labels", mode="max",
                                    check_config=_no_config("label_accuracy"))
LABEL_NLL = MetricRegistration(factory=LabelNLL, input="probabilities", mode="min",
                               check_config=_no_config("label_nll"))
