"""Shared synthetic data for nnx-decisions' tests: seeded, tiny."""

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

    def argmax(self, *args: Any, **kwargs: Any) -> Any:  # a tensor's decoding
        Untouchable.reads += 1
        raise AssertionError("the values were read before the refusal")


def untouchable_prediction(labels: Any = LABELS, *, regression: bool = False) -> Any:
    """A real nnx.PredictionResult (categorical over ``labels``, or regression) whose
    logits and probabilities are :class:`Untouchable`: its declarations (spec, labels,
    sample ids) read normally, any read of its values fails the test."""
    import torch

    import nnx

    spec = None if regression else nnx.ProbabilitySpec("categorical", labels=labels)
    prediction = nnx.prediction_from_logits(torch.zeros(4, len(labels)), spec)
    object.__setattr__(prediction, "logits", Untouchable())
    if not regression:
        object.__setattr__(prediction, "probabilities", Untouchable())
    return prediction
