"""In-memory datasets split into train / val / test DataLoaders (spec §13.3).

``NNTabularDataset`` needs pandas (the ``tabular`` extra), imported only when
one is built; everything else needs nnx-core alone.
"""

from nnx.datasets._split import SplitIndices, random_split_indices
from nnx.datasets.dataset import NNDataset
from nnx.datasets.penguins import load_penguins
from nnx.datasets.tabular import NNTabularDataset

__all__ = [
    "NNDataset",
    "NNTabularDataset",
    "SplitIndices",
    "load_penguins",
    "random_split_indices",
]
