"""Every link batch checked against its split and role before any forward (spec §26
"Checks", "Batch roles").

A batch is a torch-geometric ``Data`` (or a mapping) with ``x``, ``edge_index`` (the
message graph it passes messages over), ``edge_label_index`` (the candidate pairs),
``edge_label`` (their targets), ``candidate_id`` and ``link_role`` ("train", "val" or
"test"). Refused, each with :class:`LinkBatchError`:

* a batch of another role than the path reading it (the objective trains on "train"
  batches only, the evaluator reads "val");
* a message edge outside the training topology (a held-out positive is named as one);
* a candidate outside its split, or with another pair, target or id than the manifest's;
* a barred self-loop;
* a training negative that is a positive of any split or a fixed validation / test
  negative.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from nnx.link_tasks.edges import canonical, keys
from nnx.link_tasks.errors import LinkBatchError
from nnx.link_tasks.split import ROLES, LinkSplit

__all__ = ["FIELDS", "BatchChecker", "LinkBatch"]

FIELDS = ("x", "edge_index", "edge_label_index", "edge_label", "candidate_id", "link_role")
_NAMES = {"train": "training", "val": "validation", "test": "test"}


@dataclass(frozen=True)
class LinkBatch:
    """A checked batch, its index tensors on the host."""

    x: torch.Tensor
    edge_index: torch.Tensor
    pairs: torch.Tensor  # (2, K)
    targets: torch.Tensor  # (K,) int64: 1 / 0, or the category index
    ids: torch.Tensor  # (K,) int64
    role: str

    def __len__(self) -> int:
        return int(self.ids.numel())


def _field(batch: Any, name: str) -> Any:
    value = batch.get(name) if isinstance(batch, Mapping) else getattr(batch, name, None)
    if value is None:
        raise LinkBatchError(f"a link batch needs {name!r} (fields: {', '.join(FIELDS)}); "
                             f"got a {type(batch).__name__} without it: build batches with "
                             "LinkTask.loader(...)")
    return value


def _index(value: Any, what: str, rows: int | None) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or \
            value.dtype == torch.bool or value.ndim != (1 if rows is None else 2) or \
            (rows is not None and value.shape[0] != rows):
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise LinkBatchError(f"the batch's {what} must be an integer tensor of shape "
                             f"{'(K,)' if rows is None else f'({rows}, K)'}; got {shape}")
    return value.detach().to("cpu", torch.long)


class BatchChecker:
    """The split's sets, built once, and the checks run on every batch."""

    def __init__(self, split: LinkSplit) -> None:
        self.split = split
        self.message_keys = keys(split.message_edge_index(), split.n)  # sorted
        self.positive_keys = split.positive_keys()
        self.negative_keys = split.fixed_negative_keys()
        self.held_out = {role: keys(split.positives[role], split.n) for role in ("val", "test")}
        self.pairs, self.targets, self.roles = split.candidates()

    def parse(self, batch: Any, role: str) -> LinkBatch:
        """``batch`` read and checked as a ``role`` batch, or :class:`LinkBatchError`."""
        found = _field(batch, "link_role")
        if found != role:
            raise LinkBatchError(f"a {found!r} link batch reached the {_NAMES[role]} path: "
                                 f"batches are bound to their role (this path reads "
                                 f"{role!r} batches)")
        x = _field(batch, "x")
        if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] != self.split.n:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise LinkBatchError(f"the batch's x must hold the {self.split.n} nodes' features "
                                 f"(n, F); got {shape}")
        out = LinkBatch(x=x, edge_index=_index(_field(batch, "edge_index"), "edge_index", 2),
                        pairs=_index(_field(batch, "edge_label_index"), "edge_label_index", 2),
                        targets=_index(_field(batch, "edge_label"), "edge_label", None),
                        ids=_index(_field(batch, "candidate_id"), "candidate_id", None),
                        role=role)
        if not out.pairs.shape[1] == out.targets.numel() == out.ids.numel():
            raise LinkBatchError("edge_label_index, edge_label and candidate_id must have one "
                                 f"entry per candidate; got {out.pairs.shape[1]}, "
                                 f"{out.targets.numel()} and {out.ids.numel()}")
        self._messages(out.edge_index)
        self._candidates(out)
        return out

    def _pair(self, key: torch.Tensor) -> str:
        return f"({int(key) // self.split.n}, {int(key) % self.split.n})"

    def _messages(self, edge_index: torch.Tensor) -> None:
        n = self.split.n
        if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
            raise LinkBatchError(f"a message edge names a node outside [0, {n})")
        key = keys(edge_index, n)
        outside = ~torch.isin(key, self.message_keys)
        if bool(outside.any()):
            bad = keys(canonical(edge_index[:, outside][:, :1], self.split.directed), n)
            for role, held in self.held_out.items():
                if bool(torch.isin(bad, held).any()):
                    raise LinkBatchError(
                        f"the message edge {self._pair(key[outside][0])} is a held-out "
                        f"{_NAMES[role]} positive: held-out edges never pass messages (use "
                        "split.message_edge_index())")
            raise LinkBatchError(f"the message edge {self._pair(key[outside][0])} is outside "
                                 "the training topology (use split.message_edge_index())")

    def _candidates(self, batch: LinkBatch) -> None:
        split, ids, pairs = self.split, batch.ids, batch.pairs
        if ids.numel() != torch.unique(ids).numel():
            raise LinkBatchError("a candidate id is listed twice in one batch")
        if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= split.n):
            raise LinkBatchError(f"a candidate names a node outside [0, {split.n})")
        if split.self_loops == "barred" and bool((pairs[0] == pairs[1]).any()):
            col = int(torch.nonzero(pairs[0] == pairs[1])[0])
            raise LinkBatchError(f"the candidate ({int(pairs[0, col])}, {int(pairs[1, col])}) "
                                 "is a self-loop, barred by the split")
        if bool((ids < 0).any()):
            raise LinkBatchError(f"candidate id {int(ids.min())} is not an id of the split")
        fixed = ids < split.fixed_count
        if bool(fixed.any()):
            index = ids[fixed]
            wrong_role = self.roles[index] != ROLES.index(batch.role)
            if bool(wrong_role.any()):
                raise LinkBatchError(f"candidate id {int(index[wrong_role][0])} is outside the "
                                     f"{_NAMES[batch.role]} split")
            wrong = (self.pairs[:, index] != pairs[:, fixed]).any(dim=0) | \
                (self.targets[index] != batch.targets[fixed])
            if bool(wrong.any()):
                i = int(index[wrong][0])
                raise LinkBatchError(
                    f"candidate id {i} is ({int(self.pairs[0, i])}, {int(self.pairs[1, i])}) "
                    f"with target {int(self.targets[i])} in the split; the batch gives "
                    f"{tuple(pairs[:, fixed][:, wrong][:, 0].tolist())} with target "
                    f"{int(batch.targets[fixed][wrong][0])}")
        drawn = ~fixed
        if bool(drawn.any()):
            self._drawn(batch, drawn)

    def _drawn(self, batch: LinkBatch, drawn: torch.Tensor) -> None:
        """Ids past the manifest's: only a training pass's re-drawn negatives."""
        split = self.split
        if batch.role != "train" or split.negatives == 0:
            raise LinkBatchError(f"candidate id {int(batch.ids[drawn][0])} is not an id of the "
                                 f"{_NAMES[batch.role]} split")
        pairs = batch.pairs[:, drawn]
        if bool((batch.targets[drawn] != 0).any()):
            raise LinkBatchError("a training negative (an id past the manifest's) must have "
                                 "target 0")
        if not split.directed and bool((pairs[0] > pairs[1]).any()):
            raise LinkBatchError("a training negative is non-canonical: an undirected split "
                                 "stores (min, max)")
        key = keys(pairs, split.n)
        for pool, what in ((self.positive_keys, "a positive of the split"),
                           (self.negative_keys, "a fixed validation / test negative")):
            hit = torch.isin(key, pool)
            if bool(hit.any()):
                raise LinkBatchError(f"the training negative {self._pair(key[hit][0])} is "
                                     f"{what}")
        if key.numel() != torch.unique(key).numel():
            raise LinkBatchError("a training negative is listed twice in one batch")
