"""``GraphCollection``: whole graphs keyed by stable ids, checked once, and their seeded
loaders (spec §25).

The collection never splits itself: ``subset(ids)`` selects graphs by id, so a split is
the caller's decision (and correlated graphs leak across splits whatever their ids).
``loader()`` batches graphs whole, each batch ``(GraphBatch, y)``. A shuffling loader
draws every order from its own ``generator``, seeded once: core checkpoints and restores
it with the other random streams, so a resumed run draws the batches the straight run
would (spec §4.2, §13), as core's seeded loaders do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from nnx.extend import check_count, check_seed
from nnx.graph_tasks.batch import GraphBatch, collate
from nnx.graph_tasks.errors import GraphCollectionError

__all__ = ["IGNORE", "GraphCollection", "GraphLoader"]

#: The target of a graph flagged unlabeled: torch's default ``ignore_index`` (-100), so
#: ``CrossEntropyLoss()`` and ``TaskSpec.categorical(n, ignore_index=IGNORE)`` skip it
#: (nnx-core declares no ignore constant of its own).
IGNORE = -100


def _graph(position: int, graph: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, edge_index)`` of a torch-geometric ``Data`` or a pair."""
    if hasattr(graph, "x") and hasattr(graph, "edge_index"):
        return graph.x, graph.edge_index
    if isinstance(graph, (tuple, list)) and len(graph) == 2:
        return graph[0], graph[1]
    raise GraphCollectionError(f"graphs[{position}] must be a torch-geometric Data or an "
                               f"(x, edge_index) pair; got {type(graph).__name__}")


def _check_graph(gid: int, x: Any, edge_index: Any, width: int | None) -> int:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise GraphCollectionError(f"graph {gid}: x must be a float (nodes, features) "
                                   f"tensor; got {getattr(x, 'shape', type(x).__name__)}")
    nodes = int(x.shape[0])
    if nodes == 0:
        raise GraphCollectionError(f"graph {gid} has no node")
    if width is not None and int(x.shape[1]) != width:
        raise GraphCollectionError(f"graph {gid} has {int(x.shape[1])} features per node; "
                                   f"the collection's graphs have {width}")
    if (not isinstance(edge_index, torch.Tensor) or edge_index.ndim != 2
            or edge_index.shape[0] != 2 or edge_index.dtype != torch.long):
        raise GraphCollectionError(f"graph {gid}: edge_index must be a (2, edges) int64 "
                                   "tensor")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= nodes):
        raise GraphCollectionError(f"graph {gid}: an edge names a node outside 0..{nodes - 1}")
    return int(x.shape[1])


def _check_ids(ids: Any, count: int) -> list[int]:
    found = list(ids)
    if len(found) != count:
        raise GraphCollectionError(f"{count} graphs but {len(found)} ids: one id per graph")
    for gid in found:
        if isinstance(gid, bool) or not isinstance(gid, int) or gid < 0:
            raise GraphCollectionError(f"graph ids must be non-negative integers; got {gid!r}")
    if len(set(found)) != count:
        raise GraphCollectionError("graph ids must be unique; repeated: "
                                   f"{sorted({g for g in found if found.count(g) > 1})}")
    return found


def _check_targets(targets: Any, ids: list[int], unlabeled: set[int]) -> list[int]:
    stray = sorted(unlabeled - set(ids))
    if stray:
        raise GraphCollectionError(f"unlabeled names graph id(s) {stray} not in the collection")
    given = [None] * len(ids) if targets is None else list(targets)
    if len(given) != len(ids):
        raise GraphCollectionError(f"{len(ids)} graphs but {len(given)} targets: one per graph "
                                   "(None for a graph flagged unlabeled)")
    found = []
    for gid, target in zip(ids, given, strict=True):
        if gid in unlabeled:
            if target is not None and target != IGNORE:
                raise GraphCollectionError(f"graph {gid} is flagged unlabeled but has target "
                                           f"{target!r}")
            found.append(IGNORE)
            continue
        if isinstance(target, torch.Tensor) and target.numel() == 1:
            target = target.item()
        if isinstance(target, bool) or not isinstance(target, int) or target < 0:
            raise GraphCollectionError(f"graph {gid} needs a non-negative integer target (or "
                                       f"the unlabeled flag); got {target!r}")
        found.append(target)
    return found


class GraphCollection:
    """Whole graphs (torch-geometric ``Data`` or ``(x, edge_index)`` pairs), their unique
    non-negative integer ``ids`` and one integer target per graph; graphs whose ids are
    in ``unlabeled`` have none (their target is :data:`IGNORE`)."""

    def __init__(self, graphs: Sequence[Any], ids: Iterable[int],
                 targets: Iterable[Any] | None = None, *,
                 unlabeled: Iterable[int] = ()) -> None:
        pairs = [_graph(i, g) for i, g in enumerate(graphs)]
        if not pairs:
            raise GraphCollectionError("a GraphCollection needs at least one graph")
        found = _check_ids(ids, len(pairs))
        width = None
        for gid, (x, edge_index) in zip(found, pairs, strict=True):
            width = _check_graph(gid, x, edge_index, width)
        flagged = set(unlabeled)
        labels = _check_targets(targets, found, flagged)
        self._init(pairs, found, labels)

    def _init(self, pairs: list[tuple[torch.Tensor, torch.Tensor]], ids: list[int],
              targets: list[int]) -> None:
        self._graphs, self._ids, self._targets = pairs, ids, targets
        self._position = {gid: i for i, gid in enumerate(ids)}

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(self._ids)

    @property
    def targets(self) -> torch.Tensor:
        """One target per graph, in id order of the collection (IGNORE: unlabeled)."""
        return torch.tensor(self._targets, dtype=torch.long)

    @property
    def num_features(self) -> int:
        return int(self._graphs[0][0].shape[1])

    @property
    def graph_level(self) -> bool:
        """A collection of whole graphs (node-level NNGraphDataset refuses it by this)."""
        return True

    def __len__(self) -> int:
        return len(self._ids)

    def graph(self, gid: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, edge_index)`` of graph ``gid``."""
        return self._graphs[self._index(gid)]

    def _index(self, gid: Any) -> int:
        if gid not in self._position:
            raise GraphCollectionError(f"graph id {gid!r} is not in the collection")
        return self._position[gid]

    def subset(self, ids: Iterable[int]) -> GraphCollection:
        """The graphs of ``ids`` (in that order), already checked: a split by graph id."""
        chosen = [self._index(gid) for gid in ids]
        if not chosen or len(set(chosen)) != len(chosen):
            raise GraphCollectionError("subset needs at least one graph id, each once")
        out = GraphCollection.__new__(GraphCollection)
        out._init([self._graphs[i] for i in chosen], [self._ids[i] for i in chosen],
                  [self._targets[i] for i in chosen])
        return out

    def batch(self, ids: Iterable[int]) -> tuple[GraphBatch, torch.Tensor]:
        """One batch ``(GraphBatch, y)`` of the graphs ``ids``, in that order."""
        chosen = [self._index(gid) for gid in ids]
        inputs = collate([self._graphs[i] for i in chosen],
                         torch.tensor([self._ids[i] for i in chosen], dtype=torch.long))
        return inputs, torch.tensor([self._targets[i] for i in chosen], dtype=torch.long)

    def loader(self, *, batch_size: int = 32, shuffle: bool = False, seed: int = 0,
               generator: torch.Generator | None = None) -> GraphLoader:
        """Batches of ``batch_size`` whole graphs; ``shuffle`` draws each pass's order
        from ``generator`` (default: a fresh one seeded with ``seed``)."""
        return GraphLoader(self, batch_size=batch_size, shuffle=shuffle, seed=seed,
                           generator=generator)


class GraphLoader:
    """A re-iterable source of ``(GraphBatch, y)`` batches over a ``GraphCollection``."""

    def __init__(self, collection: GraphCollection, *, batch_size: int, shuffle: bool,
                 seed: int, generator: torch.Generator | None) -> None:
        self.collection = collection
        self.batch_size = check_count("GraphCollection.loader batch_size", batch_size)
        self.shuffle = bool(shuffle)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator; got {generator!r}")
        self.generator = generator if generator is not None else (
            torch.Generator().manual_seed(check_seed("GraphCollection.loader seed", seed)))
        self._order = collection.ids

    def __len__(self) -> int:
        return -(-len(self.collection) // self.batch_size)

    def sample_ids(self) -> torch.Tensor:
        """The graph ids of the latest pass in the order it yielded them (before any
        pass, the collection's order): what ``predict_proba(loader)`` reports."""
        return torch.tensor(self._order, dtype=torch.long)

    def __iter__(self) -> Iterator[tuple[GraphBatch, torch.Tensor]]:
        ids = self.collection.ids
        if self.shuffle:
            order = torch.randperm(len(ids), generator=self.generator).tolist()
            ids = tuple(ids[i] for i in order)
        self._order = ids
        for start in range(0, len(ids), self.batch_size):
            yield self.collection.batch(ids[start:start + self.batch_size])
