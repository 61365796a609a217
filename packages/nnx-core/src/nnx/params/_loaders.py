"""What a ``train_loader`` / ``val_loader`` must be: batches of (X, y), refused early.

Two first-day mistakes otherwise surface deep inside the first epoch, after the
run is reserved: a tensor (iterating it yields single rows, which the net reads
as rows of one feature) and a dataset object such as NNDataset (not iterable at
all). Anything else that cannot be iterated (an int, a path) is refused
here too, so every loader check happens once, when the params are built (and
again for a copy from ``with_train_loader`` / ``with_val_loader``). An empty
training loader would train nothing, and a one-cycle or warm-up schedule over
it plans zero steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_loader", "refuse_dataset"]


def _shape(value: Any) -> str:
    return str(tuple(int(d) for d in value.shape))


def check_loader(field: str, value: Any, *, training: bool) -> None:
    """Raise TypeError for a tensor, array, dataset object or non-iterable given as a
    loader, and ValueError for an empty training loader (one with ``len() == 0``)."""
    if value is None:
        return
    # Imported here: params are also built from a saved run.yaml (no loaders), which
    # ``nnx runs show`` renders without torch.
    import torch

    if isinstance(value, (torch.Tensor, np.ndarray)):
        name = "torch.Tensor" if isinstance(value, torch.Tensor) else "numpy.ndarray"
        raise TypeError(
            f"{field} got a {name} of shape {_shape(value)}, not a loader: a loader yields "
            f"(X, y) batches. Use NNDataset(X, y).train_loader, or "
            f"DataLoader(TensorDataset(X, y), batch_size=...) from torch.utils.data")
    refuse_dataset(field, value, "train_loader" if training else "val_loader")
    if not _iterable(value):
        raise TypeError(f"{field} must be an iterable of batches (a DataLoader or a list); "
                        f"got {type(value).__name__}")
    if training:
        try:
            size = len(value)
        except (TypeError, NotImplementedError):  # no length: its batches are not known
            return
        if size == 0:
            raise ValueError(
                f"{field} is empty (len 0): training needs at least one batch per epoch, and "
                "a one-cycle or warm-up schedule over it would plan 0 steps")


def _iterable(value: Any) -> bool:
    """Whether ``value`` can be iterated (iter() would accept it), without iterating it:
    looked up on the class, so no property of the loader object is run."""
    kind = type(value)
    return callable(getattr(kind, "__iter__", None)) or callable(getattr(kind, "__getitem__",
                                                                         None))


def refuse_dataset(field: str, value: Any, split: str) -> None:
    """TypeError for a dataset object (NNDataset and the like) where its loaders go."""
    kind = type(value)
    # Looked up on the class, so no property of an arbitrary loader object is run.
    if all(getattr(kind, attr, None) is not None for attr in ("train_loader", "val_loader")):
        raise TypeError(
            f"{field} got the dataset {kind.__name__}, not a loader: pass one of its "
            f"loaders, here data.{split} (a dataset holds .train_loader, .val_loader and "
            f".test_loader)")
