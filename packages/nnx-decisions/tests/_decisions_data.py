"""Shared synthetic data for nnx-decisions' tests: seeded, tiny, NumPy only."""

from __future__ import annotations

from typing import Any

import numpy as np

LABELS = ("cat", "dog", "fox")
SPLITS = {"split_id": "cal", "train_split_id": "train", "test_split_id": "test"}


def overconfident(n: int, seed: int, *, scale: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """An over-confident 3-class classifier: informative logits blown up by ``scale``."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 3, size=n)
    logits = rng.normal(size=(n, 3))
    logits[np.arange(n), targets] += 1.0
    return logits * scale, targets


class Untouchable:
    """Stands in for logits / probabilities; any read of its values fails the test.

    ``np.asarray`` and a tensor's ``detach`` both end here, so a refusal that is raised
    before any value is read passes, and one raised after a read shows this error.
    """

    reads = 0

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        Untouchable.reads += 1
        raise AssertionError("the values were read before the refusal")

    def detach(self) -> Any:
        Untouchable.reads += 1
        raise AssertionError("the values were read before the refusal")
