"""``LinkLoader``: one role's candidates in batches over the fixed message graph (spec §26).

Every batch is a torch-geometric ``Data`` holding the whole node feature matrix ``x``,
``edge_index`` = ``split.message_edge_index()`` (the only message graph, for every role),
and a slice of the role's candidates: ``edge_label_index``, ``edge_label``,
``candidate_id``; ``link_role`` binds it to its role.

Validation and test passes list their fixed candidates in id order. A training pass takes
the training positives plus ``negatives`` re-drawn negatives per positive, and shuffles
them, both from ``(seed, epoch)`` alone: ``set_epoch(epoch)`` (which NNModel.train and
Trainer.train call before each epoch, spec §4.2) picks the pass, so a stateful resume draws
what the uninterrupted run drew, and iterating the loader again (a callback scoring it)
draws the same batches and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch_geometric.data import Data

from nnx.extend import check_count, check_seed
from nnx.link_tasks.negatives import epoch_generator, sample_negatives
from nnx.link_tasks.split import ROLES, LinkSplit

__all__ = ["LinkLoader", "training_candidates"]


def training_candidates(split: LinkSplit, seed: int, epoch: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Epoch ``epoch``'s training candidates, shuffled: pairs (2, K), targets, ids."""
    positives = split.positives["train"]
    count = positives.shape[1]
    pairs = [positives]
    targets = [split.labels["train"] if split.labels is not None
               else torch.ones(count, dtype=torch.long)]
    ids = [split.candidate_ids("train")]
    if split.negatives:
        excluded = torch.cat([split.positive_keys(), split.fixed_negative_keys()])
        drawn = sample_negatives(split.negatives * count, n=split.n, directed=split.directed,
                                 self_loops=split.self_loops, excluded=excluded,
                                 generator=epoch_generator(seed, epoch, "negatives"),
                                 what="the training negatives")
        pairs.append(drawn)
        targets.append(torch.zeros(drawn.shape[1], dtype=torch.long))
        ids.append(split.fixed_count + torch.arange(drawn.shape[1]))
    order = torch.randperm(sum(p.shape[1] for p in pairs),
                           generator=epoch_generator(seed, epoch, "shuffle"))
    return torch.cat(pairs, dim=1)[:, order], torch.cat(targets)[order], torch.cat(ids)[order]


class LinkLoader:
    """A re-iterable loader of ``role``'s link batches of ``batch_size`` candidates."""

    def __init__(self, split: LinkSplit, role: str, x: torch.Tensor, batch_size: int, *,
                 seed: int) -> None:
        if role not in ROLES:
            raise ValueError(f"a link loader's role is one of {ROLES}; got {role!r}")
        if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] != split.n:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must hold the split's {split.n} nodes' features (n, F); "
                             f"got {shape}")
        self.split = split
        self.role = role
        self.x = x
        self.batch_size = check_count("LinkLoader.batch_size", batch_size)
        self.seed = check_seed("LinkLoader.seed", seed)
        self.epoch = 0
        self.message_edge_index = split.message_edge_index()

    def set_epoch(self, epoch: int) -> None:
        """Select the training pass of ``epoch`` (validation / test passes never change)."""
        self.epoch = check_count("LinkLoader.set_epoch epoch", epoch, minimum=0)

    def candidates(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This pass's candidates, in batch order: pairs (2, K), targets (K,), ids (K,)."""
        if self.role == "train":
            return training_candidates(self.split, self.seed, self.epoch)
        pairs, targets, _ = self.split.candidates()
        ids = self.split.candidate_ids(self.role)
        return pairs[:, ids], targets[ids], ids

    def __len__(self) -> int:
        count = self.split.positives[self.role].shape[1]
        if self.role == "train":
            count *= 1 + self.split.negatives
        else:
            count += self.split.fixed_negatives.get(self.role, torch.empty(2, 0)).shape[1]
        return -(-count // self.batch_size)

    def __iter__(self) -> Iterator[Data]:
        pairs, targets, ids = self.candidates()
        for start in range(0, ids.numel(), self.batch_size):
            stop = start + self.batch_size
            yield Data(x=self.x, edge_index=self.message_edge_index,
                       edge_label_index=pairs[:, start:stop], edge_label=targets[start:stop],
                       candidate_id=ids[start:stop], link_role=self.role)

    def __repr__(self) -> str:
        return (f"LinkLoader(role={self.role!r}, batch_size={self.batch_size}, "
                f"seed={self.seed}, epoch={self.epoch})")


