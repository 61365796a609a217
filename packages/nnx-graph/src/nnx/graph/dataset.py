"""``NNGraphDataset``: one graph, its node masks, and full-batch loaders (spec §4.2, §13.3).

Plans split samples, never edges (§13.3): the dataset keeps the graph whole and selects
the scored nodes with boolean masks. ``sampler="full"`` gives each split as the
one-element full-batch list ``[(GraphInputs, y_seed)]`` that training, resume,
``evaluate()`` and ``predict()`` accept like any re-iterable list of batches (§4.2): the
net passes messages over every node and is scored on the split's seed rows only.
``sampler="neighbor"`` gives each split one seeded :class:`NeighborLoader` (the
training split's shuffles), built once and kept, so its generator continues across
``train()`` calls (§13).
"""

from __future__ import annotations

from typing import Any

import torch

from nnx.extend import MAX_SEED, check_choice, check_count, check_seed
from nnx.graph.inputs import GraphInputs, refuse_graph_level
from nnx.graph.sampling import NeighborLoader

__all__ = ["SAMPLERS", "NNGraphDataset"]

#: The samplers NNGraphDataset builds loaders with.
SAMPLERS = ("full", "neighbor")
_SPLITS = ("train", "val", "test")
#: A split's batches: the full-batch list, or a sampled loader.
Batches = list[tuple[GraphInputs, torch.Tensor]] | NeighborLoader


class NNGraphDataset:
    """Node features ``x`` (N, F), ``edge_index`` (2, E), integer labels ``y`` (N,) and
    one boolean mask (N,) per split; every argument is checked before anything is kept.

    ``from_data(data)`` reads a torch-geometric ``Data`` with ``train_mask`` /
    ``val_mask`` / ``test_mask`` attributes (Planetoid's layout). ``num_neighbors`` (one
    fan-out per hop), ``batch_size`` (seeds per batch) and ``seed`` configure
    ``sampler="neighbor"``.
    """

    def __init__(self, x: torch.Tensor, edge_index: torch.Tensor, y: torch.Tensor, *,
                 train_mask: torch.Tensor, val_mask: torch.Tensor | None = None,
                 test_mask: torch.Tensor | None = None, sampler: str = "full",
                 num_neighbors: tuple[int, ...] = (10, 10), batch_size: int = 512,
                 seed: int = 0) -> None:
        refuse_graph_level("NNGraphDataset", x)
        self.sampler = check_choice("NNGraphDataset.sampler", sampler, SAMPLERS)
        self.num_neighbors = tuple(
            check_count(f"NNGraphDataset.num_neighbors[{i}]", k)
            for i, k in enumerate(num_neighbors))
        if not self.num_neighbors:
            raise ValueError("NNGraphDataset.num_neighbors must give one fan-out per hop")
        self.batch_size = check_count("NNGraphDataset.batch_size", batch_size)
        self.seed = check_seed("NNGraphDataset.seed", seed)
        n = _check_graph(x, edge_index, y)
        masks = {"train": train_mask, "val": val_mask, "test": test_mask}
        for split, mask in masks.items():
            if mask is not None:
                _check_mask(f"{split}_mask", mask, n)
        self.x, self.edge_index, self.y = x, edge_index, y
        self.masks = {s: m for s, m in masks.items() if m is not None}
        self._samplers: dict[str, NeighborLoader] = {}

    @classmethod
    def from_data(cls, data: Any, **options: Any) -> NNGraphDataset:
        """The dataset of a torch-geometric ``Data`` (``x``, ``edge_index``, ``y``, masks);
        ``options`` are the sampler keywords. A batch of several graphs is refused
        (:class:`GraphLevelBatchError`): NNGraphDataset holds one graph."""
        refuse_graph_level("NNGraphDataset.from_data", data)
        return cls(data.x, data.edge_index, data.y, train_mask=data.train_mask,
                   val_mask=getattr(data, "val_mask", None),
                   test_mask=getattr(data, "test_mask", None), **options)

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    def seed_ids(self, split: str) -> torch.Tensor:
        """The global node ids ``split`` scores, ascending."""
        check_choice("split", split, _SPLITS)
        if split not in self.masks:
            raise ValueError(f"NNGraphDataset has no {split}_mask")
        return self.masks[split].nonzero(as_tuple=True)[0]

    def loader(self, split: str) -> Batches:
        """``split``'s batches: with ``sampler="full"`` one batch, the whole graph; with
        ``"neighbor"`` the split's one sampled loader (the same object on every call)."""
        seed = self.seed_ids(split)
        if self.sampler == "neighbor":
            if split not in self._samplers:
                # One stream per split, each with its own stable seed (core keys a
                # loader's generator by its initial seed).
                self._samplers[split] = NeighborLoader(
                    self.x, self.edge_index, self.y, seed, num_neighbors=self.num_neighbors,
                    batch_size=self.batch_size, shuffle=split == "train",
                    seed=(self.seed + _SPLITS.index(split)) % (MAX_SEED + 1))
            return self._samplers[split]
        inputs = GraphInputs(self.x, self.edge_index, seed, torch.arange(self.num_nodes))
        return [(inputs, self.y[seed])]

    def train_loader(self) -> Batches:
        return self.loader("train")

    def val_loader(self) -> Batches:
        return self.loader("val")

    def test_loader(self) -> Batches:
        return self.loader("test")


def _check_graph(x: Any, edge_index: Any, y: Any) -> int:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise ValueError(f"NNGraphDataset.x must be a float (nodes, features) tensor; got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    n = int(x.shape[0])
    if n == 0:
        raise ValueError("NNGraphDataset.x has no nodes")
    if (not isinstance(edge_index, torch.Tensor) or edge_index.ndim != 2
            or edge_index.shape[0] != 2 or edge_index.dtype != torch.long):
        raise ValueError("NNGraphDataset.edge_index must be a (2, edges) int64 tensor")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise ValueError(f"NNGraphDataset.edge_index names a node outside 0..{n - 1}")
    if not isinstance(y, torch.Tensor) or y.shape != (n,) or y.is_floating_point():
        raise ValueError(f"NNGraphDataset.y must hold one integer label per node ({n})")
    return n


def _check_mask(name: str, mask: Any, n: int) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
        raise ValueError(f"NNGraphDataset.{name} must be a boolean tensor of one entry per "
                         f"node ({n})")
    if not bool(mask.any()):
        raise ValueError(f"NNGraphDataset.{name} selects no node")
