"""The model a bundle with preprocessing rebuilds (spec §13.4, §22; issue 36 item 20).

NNModel.predict takes prepared features. A bundle that ships the fitted
Standardizer the model was trained with rebuilds a :class:`PreprocessedNNModel`,
whose ``predict`` / ``predict_proba`` take raw rows (a DataFrame, an array or a
tensor) and standardize them exactly once before the net sees them. A loader, a
mapping of keyword inputs or a tuple of tensors is passed through as prepared
batches, as training and evaluation read them (a dataset built with
``standardize=`` yields prepared features), so nothing is standardized twice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nnx._surface.model import NNModel
from nnx.preprocessing import Standardizer

__all__ = ["PreprocessedNNModel"]


class PreprocessedNNModel(NNModel):
    """An NNModel whose predict applies ``preprocessing`` (a fitted Standardizer) to
    raw rows first; everything else is NNModel's."""

    #: Set by reconstruct_bundle from the bundle's preprocessing.json.
    preprocessing: Standardizer | None = None

    def _logits(self, data: Any) -> torch.Tensor:
        if self.preprocessing is not None and _raw_rows(data):
            data = self.preprocessing.transform(data)
        return super()._logits(data)


def _raw_rows(data: Any) -> bool:
    """Rows as a user holds them: a pandas DataFrame (checked by its module, so pandas
    is never imported here), an array or a tensor."""
    return (isinstance(data, (np.ndarray, torch.Tensor))
            or type(data).__module__.split(".")[0] == "pandas")
