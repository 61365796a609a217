"""The categorical probability terms, NumPy only: one copy for every reader.

The named ``nll`` and ``brier`` metrics (spec §6.4) compute their per-row terms
here, and add-ons that report the same quantities outside a training loop
(``nnx.calibration``, spec §18) reach them through ``nnx.extend``, so a
calibration report's NLL is the named metric's NLL on the same probabilities,
never a second formula that could drift.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["METRIC_EPSILON", "brier_terms", "nll_terms", "softmax64"]

#: The named ``nll`` metric's floor on a probability (spec §18: ``epsilon=1e-12``), so a
#: zero probability scores -log(1e-12) ≈ 27.6 instead of +inf.
METRIC_EPSILON = 1e-12


def softmax64(logits: Any) -> npt.NDArray[np.float64]:
    """Row-wise softmax of ``(N, C)`` logits in float64, on a copy.

    The maximum of each row is subtracted first, so no finite logit overflows.
    """
    z = np.array(logits, dtype=np.float64, copy=True)
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def _true_class(probabilities: npt.NDArray[np.float64],
                targets: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    return probabilities[np.arange(targets.shape[0]), targets]


def nll_terms(probabilities: npt.NDArray[np.float64], targets: npt.NDArray[np.int64], *,
              epsilon: float | None = METRIC_EPSILON) -> npt.NDArray[np.float64]:
    """Per-row ``-log p[target]`` of ``(N, C)`` probabilities against class indices.

    With ``epsilon`` the true-class probability is floored at ``epsilon`` first (the
    named metric's rule; a certain right answer still scores exactly 0); ``None`` is
    exact, so a zero true-class probability gives ``+inf``.
    """
    p = _true_class(probabilities, targets)
    if epsilon is not None:
        p = np.maximum(p, epsilon)
    with np.errstate(divide="ignore"):  # log(0) = -inf is the exact answer asked for
        return -np.log(p)


def brier_terms(probabilities: npt.NDArray[np.float64],
                targets: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per-row squared error against the one-hot target, summed over classes ([0, 2])."""
    onehot = np.zeros_like(probabilities)
    onehot[np.arange(targets.shape[0]), targets] = 1.0
    terms: npt.NDArray[np.float64] = ((probabilities - onehot) ** 2).sum(axis=1)
    return terms
