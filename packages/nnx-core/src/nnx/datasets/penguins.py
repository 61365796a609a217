"""The Palmer Penguins data set shipped with nnx-core (CC0; see data/README.md).

Read with the standard library only, so the demo runs on a bare nnx-core
install (no pandas).
"""

from __future__ import annotations

import csv
import io
from importlib import resources

import torch
from torch import Tensor

__all__ = ["PENGUIN_FEATURES", "load_penguins"]

#: The four numeric measurements, in feature-column order.
PENGUIN_FEATURES = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
_TARGET = "species"


def load_penguins() -> tuple[Tensor, Tensor, list[str], list[str]]:
    """Return ``(X, y, feature_names, class_names)`` for the 333 complete rows.

    ``X`` is a float32 ``(rows, 4)`` tensor of :data:`PENGUIN_FEATURES`;
    ``y`` is an int64 vector of species indices into ``class_names``, the
    species names sorted alphabetically.
    """
    source = resources.files("nnx.datasets").joinpath("data", "penguins.csv")
    rows = list(csv.DictReader(io.StringIO(source.read_text(encoding="utf-8"))))
    features: list[list[float]] = []
    for line, row in enumerate(rows, start=2):
        try:
            features.append([float(row[name]) for name in PENGUIN_FEATURES])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"penguins.csv line {line}: unreadable measurement ({exc})") from None
    species = [row[_TARGET] for row in rows]
    classes = sorted(set(species))
    index = {name: i for i, name in enumerate(classes)}
    X = torch.tensor(features, dtype=torch.float32)
    y = torch.tensor([index[name] for name in species], dtype=torch.int64)
    return X, y, list(PENGUIN_FEATURES), classes
