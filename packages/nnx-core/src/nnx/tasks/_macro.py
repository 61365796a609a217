"""Macro-averaged precision / recall / F1 from per-label counts, in NumPy's summation order.

The categorical and multilabel records' macro scores (scikit-learn's ``zero_division=0``)
are computed here, once for a whole loader (:func:`macro_scores`) or for many batches'
rows at a time (:func:`macro_rows`); both sum as NumPy's pairwise summation does
(:func:`pairwise_sum`), so every path gives the same floats bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["macro_rows", "macro_scores", "pairwise_sum"]


def macro_scores(tp: Any, n_true: Any, n_pred: Any, labels: Any) -> dict[str, float]:
    """Macro precision / recall / F1 over the selected ``labels`` (undefined values 0,
    scikit-learn's ``zero_division=0``; F1 = 2·tp / (n_true + n_pred)).

    ``tp`` / ``n_true`` / ``n_pred`` are per-label counts and ``labels`` a boolean
    selection, as NumPy arrays or lists. Up to 128 labels the scores are computed
    in Python, summed in NumPy's pairwise order, so both paths give the same floats.
    """
    if len(tp) > _PAIRWISE_BLOCK:
        return _macro_numpy(np.asarray(tp), np.asarray(n_true), np.asarray(n_pred),
                            np.asarray(labels, dtype=bool))
    if isinstance(tp, np.ndarray):
        tp, n_true, n_pred, labels = tp.tolist(), n_true.tolist(), n_pred.tolist(), (
            np.asarray(labels).tolist())
    precision, recall, f1 = [], [], []
    for t, nt, np_, keep in zip(tp, n_true, n_pred, labels, strict=True):
        if not keep:
            continue
        precision.append(t / np_ if np_ > 0 else 0.0)
        recall.append(t / nt if nt > 0 else 0.0)
        both = nt + np_
        f1.append(2 * t / both if both > 0 else 0.0)
    size = len(f1)
    if size == 0:
        return {}
    return {"precision": pairwise_sum(precision) / size, "recall": pairwise_sum(recall) / size,
            "f1": pairwise_sum(f1) / size}


#: NumPy's pairwise-summation block (PW_BLOCKSIZE).
_PAIRWISE_BLOCK = 128


def pairwise_sum(values: list[float]) -> float:
    """``float(np.add.reduce(np.array(values)))`` computed in Python, bit for bit:
    NumPy's pairwise summation (8 running sums per block of up to 128 values)."""
    return _pairwise(values, 0, len(values))


def _pairwise(a: list[float], lo: int, n: int) -> float:
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= _PAIRWISE_BLOCK:
        r0, r1, r2, r3, r4, r5, r6, r7 = a[lo:lo + 8]
        end = lo + n - n % 8
        i = lo + 8
        while i < end:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < lo + n:
            res += a[i]
            i += 1
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)


def macro_rows(tp: npt.NDArray[Any], n_true: npt.NDArray[Any],
               n_pred: npt.NDArray[Any]) -> list[dict[str, float]]:
    """``macro_scores(tp[i], n_true[i], n_pred[i], labels)`` of each row of (B, L) counts
    in which every label is present (``n_true + n_pred > 0``), the same floats.

    Each row is reduced along the contiguous last axis, which NumPy sums in the same
    pairwise order as one label list: a row with an absent label is not (its compacted
    list groups differently) and must go through :func:`macro_scores`.
    """
    rows, size = tp.shape
    if rows == 0 or size == 0:
        return [{} for _ in range(rows)]
    sums = np.add.reduce(_ratios(tp, n_true, n_pred).reshape(3 * rows, size), axis=1)
    precision, recall, f1 = sums.reshape(3, rows).tolist()
    return [{"precision": p / size, "recall": r / size, "f1": f / size}
            for p, r, f in zip(precision, recall, f1, strict=True)]


def _ratios(tp: npt.NDArray[Any], n_true: npt.NDArray[Any],
            n_pred: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Per-label precision, recall and F1 (undefined values 0) stacked on a new first
    axis: (3, *tp.shape), C-contiguous."""
    # One table of (numerators, denominators) × (precision, recall, F1) per label.
    table = np.empty((2, 3, *tp.shape))
    num, den = table[0], table[1]
    num[0] = tp
    num[1] = tp
    np.multiply(tp, 2.0, out=num[2])
    den[0] = n_pred
    den[1] = n_true
    np.add(n_true, n_pred, out=den[2])
    ratios: npt.NDArray[np.float64] = np.divide(num, den, out=np.zeros(num.shape),
                                                where=den > 0)
    return ratios


def _macro_numpy(tp: npt.NDArray[Any], n_true: npt.NDArray[Any], n_pred: npt.NDArray[Any],
                 labels: npt.NDArray[Any]) -> dict[str, float]:
    if not labels.all():
        tp, n_true, n_pred = tp[labels], n_true[labels], n_pred[labels]
    size = tp.size
    if size == 0:
        return {}
    # Each row is reduced by NumPy's pairwise sum, exactly as .mean() would.
    precision, recall, f1 = np.add.reduce(_ratios(tp, n_true, n_pred), axis=1).tolist()
    return {"precision": precision / size, "recall": recall / size, "f1": f1 / size}
