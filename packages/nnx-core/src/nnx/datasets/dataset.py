"""NNDataset: in-memory (X, Y) data split into train / val / test loaders."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from nnx._foundation.hashing import canonical_bytes, plain, sha256_hex
from nnx.datasets._split import SplitConfig, SplitIndices, check_split_config, random_split_indices
from nnx.datasets._tensors import ClassLabel, as_rows, check_classes, is_index_dtype
from nnx.preprocessing.views import SplitView, Transform, check_transform, describe_transform

__all__ = ["NNDataset"]

Loader = DataLoader[tuple[Tensor, ...]]


class NNDataset:
    """Rows of ``X`` with targets ``Y``, randomly split and served as DataLoaders.

    ``val_proportion`` / ``test_proportion`` rows (rounded down) go to
    validation / test and train takes the rest, chosen by ``random_split``
    with ``seed`` (else the global torch RNG). ``batch_sizes`` is
    ``(train, val, test)``: counts >= 1, or ``None`` for the whole split as one
    batch. An empty validation or test split publishes a ``None`` loader. The
    train loader shuffles (``shuffle=True``) with its own generator derived
    from ``seed``; validation and test never shuffle.

    ``train_transform`` / ``eval_transform`` (spec §13.4) wrap the training /
    the validation and test splits in a :class:`~nnx.preprocessing.SplitView`
    whose transform applies to each sample's input only; the base rows,
    targets and order are never modified.
    """

    def __init__(
        self,
        X: Any,
        Y: Any,
        *,
        val_proportion: float = 0.2,
        test_proportion: float = 0.0,
        batch_sizes: tuple[int | None, int | None, int | None] = (32, None, None),
        seed: int | None = None,
        shuffle: bool = True,
        classes: Any = None,
        train_transform: Transform | None = None,
        eval_transform: Transform | None = None,
    ) -> None:
        owner = type(self).__name__
        config = check_split_config(
            owner,
            val_proportion=val_proportion,
            test_proportion=test_proportion,
            batch_sizes=batch_sizes,
            seed=seed,
        )
        if not isinstance(shuffle, bool):
            raise ValueError(f"{owner}.shuffle must be a bool; got {shuffle!r}")
        self._transforms = (check_transform(f"{owner}.train_transform", train_transform),
                            check_transform(f"{owner}.eval_transform", eval_transform))
        inputs, targets = as_rows(f"{owner}.X", X), as_rows(f"{owner}.Y", Y)
        if len(inputs) != len(targets):
            raise ValueError(
                f"{owner}: X has {len(inputs)} rows but Y has {len(targets)}; they must match"
            )
        if len(inputs) == 0:
            raise ValueError(f"{owner} needs at least 1 row; X and Y are empty")
        self._classes = check_classes(owner, classes, targets)
        self._config, self._shuffle = config, shuffle
        self._inputs, self._targets = inputs, targets
        self._n_classes = _count_classes(targets, self._classes)
        self._indices = self._split_rows(len(inputs))
        inputs = self._prepare_inputs(inputs, self._indices)
        self._inputs = inputs
        base = _Rows(inputs, targets, classes=self.classes)
        train_bs, val_bs, test_bs = config.batch_sizes
        val_rows, test_rows = self._indices.val, self._indices.test
        train_tf, eval_tf = self._transforms
        # random_split_indices never leaves train empty; val / test may be.
        self._train = self._loader(base, self._indices.train, train_bs, train_tf, shuffle=shuffle)
        self._val = (self._loader(base, val_rows, val_bs, eval_tf, shuffle=False)
                     if val_rows else None)
        self._test = (self._loader(base, test_rows, test_bs, eval_tf, shuffle=False)
                      if test_rows else None)

    def _prepare_inputs(self, inputs: Tensor, indices: SplitIndices) -> Tensor:
        """The features the loaders serve, once the split is known (a subclass hook:
        NNTabularDataset standardizes on the training rows here)."""
        return inputs

    @property
    def train_loader(self) -> Loader:
        return self._train

    @property
    def val_loader(self) -> Loader | None:
        """``None`` when the validation split is empty."""
        return self._val

    @property
    def test_loader(self) -> Loader | None:
        """``None`` when the test split is empty."""
        return self._test

    @property
    def split_indices(self) -> SplitIndices:
        """Row positions (sorted) of the train / val / test splits."""
        return self._indices

    @property
    def classes(self) -> list[ClassLabel] | None:
        """Class labels in class-index order, when known."""
        return None if self._classes is None else list(self._classes)

    @property
    def n_classes(self) -> int | None:
        """Number of classes for integer class-index targets; ``None`` otherwise."""
        return self._n_classes

    @property
    def input_dim(self) -> int:
        """Features per row (the product of X's non-row axes; 1 for 1-D X)."""
        return math.prod(self._inputs.shape[1:])

    def state(self) -> dict[str, Any]:
        """JSON-like description of the split settings; never the data."""
        config: SplitConfig = self._config
        transforms = {name: describe_transform(t) for name, t in
                      zip(("train_transform", "eval_transform"), self._transforms, strict=True)
                      if t is not None}
        return dict(
            plain(
                {
                    **transforms,
                    "n_rows": len(self._inputs),
                    "val_proportion": config.val_proportion,
                    "test_proportion": config.test_proportion,
                    "batch_sizes": config.batch_sizes,
                    "seed": config.seed,
                    "shuffle": self._shuffle,
                }
            )
        )

    def _split_rows(self, n: int) -> SplitIndices:
        """Which rows train / validate / test: random_split unless a subclass plans them."""
        config = self._config
        return random_split_indices(n, (config.val_proportion, config.test_proportion),
                                    config.seed)

    def _loader(
        self,
        base: TensorDataset,
        rows: tuple[int, ...],
        batch_size: int | None,
        transform: Transform | None,
        *,
        shuffle: bool,
    ) -> Loader:
        subset: Dataset[Any]
        if any(t is not None for t in self._transforms):
            subset = SplitView(base, rows, transform)
        else:  # no split transforms: exactly the loaders NNDataset always built
            subset = Subset(base, list(rows))
        size = len(rows) if batch_size is None else batch_size
        if not shuffle:
            return DataLoader(subset, batch_size=size, shuffle=False)
        seed = self._config.seed
        generator = None if seed is None else torch.Generator().manual_seed(_shuffle_seed(seed))
        return DataLoader(subset, batch_size=size, shuffle=True, generator=generator)


class _Rows(TensorDataset):
    """The base rows, carrying the class names a SplitView forwards as ``view.classes``."""

    def __init__(self, *tensors: Tensor, classes: list[ClassLabel] | None) -> None:
        super().__init__(*tensors)
        self.classes = classes


def _count_classes(targets: Tensor, classes: tuple[ClassLabel, ...] | None) -> int | None:
    if classes is not None:
        return len(classes)
    if not is_index_dtype(targets.dtype) or int(targets.min()) < 0:
        return None
    return int(targets.max()) + 1


def _shuffle_seed(seed: int) -> int:
    """The train loader's seed: derived from ``seed``, distinct from the split's stream."""
    return int(sha256_hex(canonical_bytes(["nnx.datasets/train-shuffle", seed]))[:16], 16)
