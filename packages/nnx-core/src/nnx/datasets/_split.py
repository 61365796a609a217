"""The split step: which rows train, which validate, which test (spec §13.3).

Datasets call :func:`random_split_indices` once, and only that function
decides membership. A later split source (a replayed manifest) returns the
same :class:`SplitIndices` and plugs in at that one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, Protocol, cast

import torch
from torch.utils.data import Dataset, random_split

from nnx._foundation.validation import UNIT_HALF_OPEN, check_batch_sizes, check_count, check_real

__all__ = ["PlannedSplit", "SplitConfig", "SplitIndices", "check_split_config",
           "random_split_indices"]

#: torch.Generator.manual_seed accepts seeds up to 2**64 - 1.
_MAX_SEED = 2**64 - 1
_SPLITS = ("train", "val", "test")


class SplitIndices(NamedTuple):
    """Row positions of each split, sorted and disjoint; train is never empty."""

    train: tuple[int, ...]
    val: tuple[int, ...]
    test: tuple[int, ...]


class PlannedSplit(Protocol):
    """What a dataset reads of a split plan (nnx.data_splits.SplitManifest, a layer above)."""

    @property
    def id_kind(self) -> str: ...

    def resolve(self, ids: Any, *, source_identity: Any = None) -> SplitIndices: ...

    def digest(self) -> str: ...


@dataclass(frozen=True, slots=True)
class SplitConfig:
    """Validated split settings shared by every dataset class."""

    val_proportion: float
    test_proportion: float
    batch_sizes: tuple[int | None, int | None, int | None]
    seed: int | None


def check_split_config(
    owner: str, *, val_proportion: Any, test_proportion: Any, batch_sizes: Any, seed: Any
) -> SplitConfig:
    """Validate a dataset's split settings, batch sizes first (spec §2.3)."""
    sizes = check_batch_sizes(f"{owner}.batch_sizes", batch_sizes)
    if len(sizes) != len(_SPLITS):
        raise ValueError(
            f"{owner}.batch_sizes must have 3 entries (train, val, test); got {len(sizes)}"
        )
    val, test = _check_proportions(owner, (val_proportion, test_proportion))
    train_bs, val_bs, test_bs = sizes
    return SplitConfig(val, test, (train_bs, val_bs, test_bs), _check_seed(owner, seed))


def random_split_indices(
    n: int, proportions: Sequence[float], seed: int | None
) -> SplitIndices:
    """Split ``range(n)`` into train / val / test with ``torch.utils.data.random_split``.

    ``proportions`` is ``(val_proportion, test_proportion)``; each split gets
    ``floor(n * proportion)`` rows (the proportion read as the decimal it is
    written as) and train takes the rest. ``seed`` seeds a private
    ``torch.Generator``; ``None`` draws from the global torch RNG. An empty
    train split raises.
    """
    rows = check_count("random_split_indices.n", n, minimum=0)
    val, test = _check_proportions("random_split_indices", proportions)
    seed = _check_seed("random_split_indices", seed)
    n_val = math.floor(rows * _exact(val))
    n_test = math.floor(rows * _exact(test))
    n_train = rows - n_val - n_test
    if n_train < 1:
        raise ValueError(
            f"the train split is empty: {rows} rows with val_proportion={val}, "
            f"test_proportion={test}; the train split needs at least one row"
        )
    generator = torch.default_generator if seed is None else torch.Generator().manual_seed(seed)
    # random_split only reads len(); the subsets' .indices are the positions.
    # Empty splits are left out of `lengths` (same permutation, same cuts):
    # torch would read lengths [1, 0, 0] as fractions and warn about them.
    positions = cast("Dataset[int]", range(rows))
    lengths = (n_train, n_val, n_test)
    parts = iter(random_split(positions, [k for k in lengths if k], generator=generator))
    train, val_rows, test_rows = (
        tuple(sorted(int(i) for i in next(parts).indices)) if k else () for k in lengths
    )
    return SplitIndices(train, val_rows, test_rows)


def _check_proportions(owner: str, proportions: Any) -> tuple[float, float]:
    if isinstance(proportions, (str, bytes)) or not isinstance(proportions, Sequence):
        raise ValueError(
            f"{owner}: proportions must be (val_proportion, test_proportion); got {proportions!r}"
        )
    if len(proportions) != 2:
        raise ValueError(
            f"{owner}: proportions must be (val_proportion, test_proportion); "
            f"got {len(proportions)} values"
        )
    val = check_real(f"{owner}.val_proportion", proportions[0], UNIT_HALF_OPEN)
    test = check_real(f"{owner}.test_proportion", proportions[1], UNIT_HALF_OPEN)
    if _exact(val) + _exact(test) >= 1:
        raise ValueError(
            f"{owner}.val_proportion + test_proportion must be < 1 (train takes the rest); "
            f"got {val!r} + {test!r}"
        )
    return val, test


def _check_seed(owner: str, seed: Any) -> int | None:
    if seed is None:
        return None
    return check_count(f"{owner}.seed", seed, minimum=0, maximum=_MAX_SEED)


def _exact(proportion: float) -> Fraction:
    """The proportion as the decimal it is spelled as: 0.29 is 29/100, not 0.28999…"""
    return Fraction(repr(proportion))
