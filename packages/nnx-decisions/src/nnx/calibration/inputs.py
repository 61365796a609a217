"""Reading what the calibration and abstention functions are given, in float64.

Arrays, tensors (duck-typed: anything with ``detach``; the add-on declares no torch
dependency of its own) and a categorical ``nnx.PredictionResult`` are accepted. Every
reader copies, so the caller's data is never modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import nnx

__all__ = ["as_labels", "as_matrix", "as_sample_ids", "as_targets", "check_distribution",
           "frozen", "prediction_labels", "reconcile_labels"]

Labels = tuple[str, ...] | tuple[int, ...]


def as_labels(labels: Any, error: type[ValueError]) -> Labels:
    """One label per class, as ProbabilitySpec checks them: >= 2, all str or all int,
    no duplicates."""
    if labels is None:
        raise error("labels= is required: one label per class, in column order")
    try:
        checked: Labels | None = nnx.ProbabilitySpec("categorical", labels=labels).labels
    except ValueError as exc:
        raise error(str(exc).replace("ProbabilitySpec.labels", "labels")) from None
    assert checked is not None  # labels was not None
    return checked


def prediction_labels(prediction: nnx.PredictionResult,
                      error: type[ValueError]) -> Labels | None:
    """A categorical prediction's own labels (None when its spec names none)."""
    spec = prediction.spec
    if spec is None or spec.kind != "categorical" or spec.class_axis != 1:
        what = "regression" if spec is None else f"{spec.kind} on axis {spec.class_axis}"
        raise error(f"a PredictionResult here must be categorical on axis 1; this one is {what}")
    return spec.labels


def reconcile_labels(prediction: nnx.PredictionResult, labels: Any,
                     error: type[ValueError]) -> Any:
    """A prediction's own labels, else ``labels=``; when both are given they must agree."""
    own = prediction_labels(prediction, error)
    if own is not None and labels is not None and tuple(labels) != own:
        raise error(f"labels={list(labels)} differ from the prediction's spec labels "
                    f"{list(own)}")
    return own if own is not None else labels


def as_matrix(value: Any, what: str, error: type[ValueError]) -> npt.NDArray[np.float64]:
    """A float64 ``(N, C)`` copy with C >= 2 and every entry finite."""
    if hasattr(value, "detach"):  # a torch tensor: to host, widened exactly to float64
        value = value.detach().cpu().double().numpy()
    try:
        matrix = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} must be a numeric (N, C) array; {exc}") from None
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise error(f"{what} must be (N, C) with C >= 2 classes; got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        rows = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
        raise error(f"{what} has non-finite entries in rows {rows[:10].tolist()} "
                    "(refused, never masked)")
    return matrix


def check_distribution(p: npt.NDArray[np.float64], error: type[ValueError]) -> None:
    """Every row of ``p`` a probability distribution: entries in [0, 1], summing to 1.

    Refused, never renormalized: a row summing to 2 is not a distribution any metric or
    policy can read honestly.
    """
    if ((p < 0) | (p > 1)).any():
        raise error("probabilities must lie in [0, 1]")
    # float32 probabilities widened to float64 sum to 1 only within float32 rounding.
    tolerance = max(1e-6, p.shape[1] * float(np.finfo(np.float32).eps))
    sums = p.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > tolerance)
    if bad.size:
        raise error(f"probability rows {bad[:10].tolist()} do not sum to 1 within "
                    f"{tolerance:.3g} (sums {sums[bad[:3]].tolist()}; refused, never "
                    "renormalized)")


def as_targets(targets: Any, rows: int, classes: int,
               error: type[ValueError]) -> npt.NDArray[np.int64]:
    """Integer class indices, one per row, each in ``[0, classes)``."""
    if hasattr(targets, "detach"):
        targets = targets.detach().cpu().numpy()
    array = np.asarray(targets)
    if array.dtype.kind not in "iu":
        raise error(f"targets must be integer class indices; got dtype {array.dtype}")
    if array.shape != (rows,):
        raise error(f"targets must be 1-D with one class index per row ({rows}); "
                    f"got shape {array.shape}")
    bad = np.flatnonzero((array < 0) | (array >= classes))
    if bad.size:
        raise error(f"targets out of range [0, {classes}) at rows {bad[:10].tolist()}")
    return array.astype(np.int64, copy=True)


def as_sample_ids(sample_ids: Sequence[int] | Any | None, rows: int,
                  error: type[ValueError]) -> npt.NDArray[np.int64]:
    """The rows' ids (default ``0..rows-1``), a read-only int64 copy; ids may repeat."""
    if sample_ids is None:
        ids = np.arange(rows, dtype=np.int64)
    else:
        if hasattr(sample_ids, "detach"):
            sample_ids = sample_ids.detach().cpu().numpy()
        array = np.asarray(sample_ids)
        if array.size == 0:
            array = array.astype(np.int64)
        if array.dtype.kind not in "iu":
            raise error(f"sample_ids must be integers; got dtype {array.dtype}")
        if array.shape != (rows,):
            raise error(f"sample_ids must be 1-D with one id per row ({rows}); "
                        f"got shape {array.shape}")
        ids = array.astype(np.int64, copy=True)
    ids.flags.writeable = False
    return ids


def frozen(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``array`` made read-only (results are frozen; so are the arrays they hold)."""
    array.flags.writeable = False
    return array
