"""Input checks for in-memory datasets: row tensors and class labels."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nnx._foundation.hashing import plain

__all__ = ["ClassLabel", "as_rows", "check_classes", "is_index_dtype"]

#: A class label as it appears in the data: a name, or a number/boolean code.
ClassLabel = str | int | float | bool


def as_rows(field: str, value: Any) -> Tensor:
    """Return ``value`` (a tensor or NumPy array, first axis = rows) as a tensor.

    NumPy arrays are shared when writable and contiguous, copied otherwise;
    dtypes are kept.
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{field} must hold numbers; got a NumPy array of {value.dtype}")
        array = np.ascontiguousarray(value)
        if not array.flags.writeable:
            array = array.copy()
        rows = torch.from_numpy(array)
    elif isinstance(value, Tensor):
        rows = value
    else:
        raise TypeError(
            f"{field} must be a torch.Tensor or numpy.ndarray; got {type(value).__name__}"
        )
    if rows.ndim == 0:
        raise ValueError(f"{field} must have a row axis; got a 0-d (scalar) value")
    return rows


def is_index_dtype(dtype: torch.dtype) -> bool:
    """True for integer dtypes that can hold class indices (not bool)."""
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def check_classes(owner: str, classes: Any, targets: Tensor) -> tuple[ClassLabel, ...] | None:
    """Validate optional class labels against integer targets in ``[0, len(classes))``."""
    if classes is None:
        return None
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Iterable):
        raise ValueError(f"{owner}.classes must be a sequence of class labels; got {classes!r}")
    labels = tuple(_label(f"{owner}.classes[{i}]", c) for i, c in enumerate(classes))
    if not labels:
        raise ValueError(f"{owner}.classes must name at least one class; got an empty sequence")
    if len(set(labels)) != len(labels):
        raise ValueError(f"{owner}.classes must be unique; got {list(labels)!r}")
    if not is_index_dtype(targets.dtype):
        raise ValueError(
            f"{owner}.classes needs integer class-index targets; Y has dtype {targets.dtype}"
        )
    low, high = int(targets.min()), int(targets.max())
    if low < 0 or high >= len(labels):
        raise ValueError(
            f"{owner}: Y holds class indices in [{low}, {high}] but classes names "
            f"{len(labels)} classes (indices must be in [0, {len(labels) - 1}])"
        )
    return labels


def _label(field: str, value: Any) -> ClassLabel:
    try:
        label = plain(value, field)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} must be a str, int, float or bool label: {exc}") from None
    if not isinstance(label, (str, int, float)):
        raise ValueError(f"{field} must be a str, int, float or bool label; got {value!r}")
    return label
