"""Checking what users pass to nnx.vis_utils, before anything is computed.

Class labels are what a categorical prediction's ``class_indices`` holds (spec §3.1):
1-D integers >= 0, as tensors, NumPy arrays or sequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from nnx.vis_utils.errors import LabelError

__all__ = ["class_labels", "label_names", "label_pair"]


def class_labels(owner: str, label: str, values: Any) -> np.ndarray:
    """``values`` as a 1-D int64 array of class indices (LabelError otherwise)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    array = np.asarray(values)
    if array.ndim != 1:
        raise LabelError(f"{owner}: {label} must be 1-D class indices; got shape "
                         f"{array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        # Probabilities or Bernoulli indicators are no class indices (spec §3.1).
        raise LabelError(f"{owner}: {label} must hold integer class indices; got dtype "
                         f"{array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and int(array.min()) < 0:
        raise LabelError(f"{owner}: {label} holds a negative class index "
                         f"({int(array.min())})")
    return array


def label_pair(owner: str, y_true: Any, y_pred: Any,
               labels: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """``(y_true, y_pred, classes)``: both checked and of one length; ``classes`` is
    ``labels`` when given, else every class either side holds, sorted."""
    true = class_labels(owner, "y_true", y_true)
    pred = class_labels(owner, "y_pred", y_pred)
    if true.shape != pred.shape:
        raise LabelError(f"{owner}: y_true and y_pred differ in length ({true.size} and "
                         f"{pred.size})")
    if true.size == 0:
        raise LabelError(f"{owner}: y_true and y_pred are empty")
    if labels is None:
        classes = sorted({int(v) for v in np.concatenate([true, pred])})
    else:
        classes = [int(v) for v in class_labels(owner, "labels", list(labels))]
        if len(set(classes)) != len(classes) or not classes:
            raise LabelError(f"{owner}: labels must be distinct class indices; got {classes}")
    return true, pred, classes


def label_names(owner: str, classes: list[int], names: Sequence[str] | None) -> list[str]:
    """One display name per class: ``names`` (one per class, in ``classes`` order) or the
    class indices themselves."""
    if names is None:
        return [str(c) for c in classes]
    shown = [str(n) for n in names]
    if len(shown) != len(classes):
        raise LabelError(f"{owner}: target_names has {len(shown)} names for "
                         f"{len(classes)} classes")
    return shown
