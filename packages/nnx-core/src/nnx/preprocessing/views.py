"""SplitView: one split of a base dataset with its own input transform (spec §13.4).

A view holds the base, its row positions and a transform, and never changes
after it is built: no RNG, no cache, no attribute of the base is set. So
training and evaluation reads can alternate and DataLoader workers see the
same evaluation samples as the main process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from nnx.preprocessing._schema import PreprocessingError
from nnx.preprocessing.standardizer import Standardizer

__all__ = ["SplitView", "describe_transform"]

Transform = Callable[[Any], Any]


def describe_transform(transform: Transform | None) -> dict[str, Any] | None:
    """A transform as JSON: a Standardizer with its state (reconstructible), any other
    callable by qualified name only (``reconstructible: false``)."""
    if transform is None:
        return None
    if isinstance(transform, Standardizer):
        return {"name": "nnx.preprocessing.Standardizer", "reconstructible": True,
                "state": transform.state()}
    owner = transform if hasattr(transform, "__qualname__") else type(transform)
    name = f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', '?')}"
    return {"name": name, "reconstructible": False}


def check_transform(field: str, transform: Any) -> Transform | None:
    if transform is not None and not callable(transform):
        raise TypeError(f"{field} must be a callable applied to a sample's input, or None; "
                        f"got {type(transform).__name__}")
    checked: Transform | None = transform
    return checked


class SplitView(Dataset[Any]):
    """Rows ``indices`` of ``dataset``, with ``transform`` applied to each sample's input.

    The base dataset's own transform runs first (it is the base's ``[]``). The
    view's transform sees only the input (a tuple / list / named tuple's first
    item, or a bare sample), on a private copy, so targets and the base's
    tensors are never touched. Dict samples are refused when a transform is set.
    """

    _dataset: Any
    _indices: tuple[int, ...]
    _transform: Transform | None

    def __init__(self, dataset: Any, indices: Any, transform: Transform | None = None) -> None:
        transform = check_transform("SplitView.transform", transform)
        if not hasattr(dataset, "__getitem__"):
            raise TypeError(f"SplitView needs a map-style dataset; got {type(dataset).__name__}")
        rows = tuple(int(i) for i in indices)
        size = len(dataset) if hasattr(dataset, "__len__") else None
        if any(i < 0 or (size is not None and i >= size) for i in rows):
            raise PreprocessingError(f"SplitView indices must be positions in [0, {size}); "
                                     f"got {min(rows)}..{max(rows)}")
        self.__dict__.update(_dataset=dataset, _indices=rows, _transform=transform)

    @property
    def dataset(self) -> Any:
        """The base dataset (an alias, as for ``torch.utils.data.Subset``)."""
        return self._dataset

    @property
    def indices(self) -> tuple[int, ...]:
        """The split's sample ids: positions in the base dataset."""
        return self._indices

    @property
    def transform(self) -> Transform | None:
        return self._transform

    @property
    def classes(self) -> Any:
        """The base dataset's class names, when it has them."""
        return getattr(self._dataset, "classes", None)

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, i: int) -> Any:
        sample = self._dataset[self._indices[i]]
        return sample if self._transform is None else _apply(sample, self._transform)

    def state(self) -> dict[str, Any]:
        """The view as JSON: its row count and its transform (:func:`describe_transform`)."""
        return {"rows": len(self._indices), "transform": describe_transform(self._transform)}

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SplitView is immutable; cannot set {name!r}")

    def __repr__(self) -> str:
        return f"SplitView(rows={len(self._indices)}, transform={self.state()['transform']})"


def _apply(sample: Any, transform: Transform) -> Any:
    if isinstance(sample, Mapping):
        raise PreprocessingError("SplitView cannot transform a dict sample: which entry is the "
                                 "input is ambiguous; return a tuple (input, target, ...)")
    if isinstance(sample, (tuple, list)):
        if not sample:
            raise PreprocessingError("SplitView cannot transform an empty sample")
        items = [transform(_private(sample[0])), *sample[1:]]
        if isinstance(sample, list):
            return items
        if hasattr(sample, "_fields"):  # a named tuple keeps its type
            return type(sample)(*items)
        return tuple(items)
    return transform(_private(sample))


def _private(value: Any) -> Any:
    """A copy of a tensor / array input: the base's rows are views into its storage, and
    an in-place transform must not write into them."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value
