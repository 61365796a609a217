"""n, mean and standard deviation (n - 1) of finite values, as NumPy computes them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["mean_std"]


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """(mean, std with ddof=1): both None for no value, the std None for one."""
    if not values:
        return None, None
    array = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(array))
    return mean, (float(np.std(array, ddof=1)) if array.size > 1 else None)
