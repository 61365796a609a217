"""The training loader's contract (spec §26 "Loader wrappers", "Topology"; §4.2 set_epoch):
a wrapper that forwards set_epoch resumes exactly, one that counts its own passes re-draws
on resume, materialised batches replay as they are, a resumed loader with another seed is
refused before any update, and every role's batches pass messages over the one graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from _link_tiny import StopAfterTwo, a_split, model, plan, same, weights

from nnx import NNOptimParams, NNTrainerParams, Trainer
from nnx.link_tasks import LinkBatchError, LinkLoader, LinkTask
from nnx.link_tasks.loader import training_candidates


class Forwarding:
    """A loader wrapper that forwards set_epoch, as the contract asks."""

    def __init__(self, inner: LinkLoader) -> None:
        self.inner = inner

    def set_epoch(self, epoch: int) -> None:
        self.inner.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class Counting:
    """A wrapper that does not forward set_epoch: it picks the pass by its own count."""

    def __init__(self, inner: LinkLoader) -> None:
        self.inner = inner
        self.passes = 0

    def __iter__(self) -> Iterator[Any]:
        self.inner.set_epoch(self.passes)
        self.passes += 1
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def straight_and_resumed(root: Path, source: Callable[[], Any]
                         ) -> tuple[list[torch.Tensor], list[torch.Tensor], bool]:
    """The candidate sets a 3-epoch run scores, and those of a run stopped after 2 epochs
    and resumed statefully (each run gets a fresh ``source()``), and whether both end with
    the same weights."""
    split, _, x = a_split()
    task = LinkTask(split)
    straight = model(task)
    straight.train(plan(task, x, n_epochs=3).with_train_loader(source()), root=root / "a",
                   verbose=False)
    first = model(task)
    run = first.train(plan(task, x, n_epochs=3).with_train_loader(source()),
                      callbacks=[StopAfterTwo()], root=root / "b", verbose=False)
    resumed = model(task, seed=5)
    resumed.train(plan(task, x, n_epochs=3, resume_from_run_id=run.id, resume_mode="stateful",
                       resume_epochs="planned").with_train_loader(source()),
                  root=root / "b", verbose=False)
    return (straight.net.seen, first.net.seen + resumed.net.seen,
            same(weights(straight), weights(resumed)))


def alike(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(p, q) for p, q in zip(a, b, strict=True))


def test_a_wrapper_that_forwards_set_epoch_resumes_exactly(tmp_path) -> None:
    split, _, x = a_split()
    straight, joined, same_weights = straight_and_resumed(
        tmp_path, lambda: Forwarding(LinkTask(split).loader("train", x, 32)))
    per_epoch = len(straight) // 3
    assert not torch.equal(straight[0], straight[2 * per_epoch])  # epochs draw apart
    assert alike(joined, straight) and same_weights


def test_a_wrapper_that_counts_its_own_passes_redraws_them_on_resume(tmp_path) -> None:
    split, _, x = a_split()
    straight, joined, same_weights = straight_and_resumed(
        tmp_path, lambda: Counting(LinkTask(split).loader("train", x, 32)))
    per_epoch = len(straight) // 3
    assert alike(joined[:2 * per_epoch], straight[:2 * per_epoch])  # before the stop
    # The resumed wrapper counts from 0 again: its last epoch is not the one it replaces.
    assert not alike(joined[2 * per_epoch:], straight[2 * per_epoch:])
    assert not same_weights


def test_materialised_batches_replay_as_they_are(tmp_path) -> None:
    split, _, x = a_split()
    loader = LinkTask(split).loader("train", x, 32)
    loader.set_epoch(4)
    batches = list(loader)
    straight, joined, same_weights = straight_and_resumed(tmp_path, lambda: list(batches))
    listed = [b.edge_label_index for b in batches]
    assert alike(straight, listed * 3)  # every epoch the same batches, set_epoch or not
    assert alike(joined, straight) and same_weights


def test_a_resumed_loader_with_another_seed_is_refused_before_any_update(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    run = model(task).train(plan(task, x), root=tmp_path, verbose=False)
    disk = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    m = model(task, seed=1)
    before = weights(m)
    stranger = LinkTask(split, seed=7).loader("train", x, 32)
    with pytest.raises(LinkBatchError, match="negatives' seed"):
        m.train(plan(task, x, n_epochs=2, resume_from_run_id=run.id, resume_mode="stateful",
                     resume_epochs="planned").with_train_loader(stranger),
                root=tmp_path, verbose=False)
    assert same(weights(m), before)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == disk


def test_every_role_passes_messages_over_the_one_message_graph() -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    for role in ("train", "val", "test"):
        for batch in task.loader(role, x, 16):
            assert torch.equal(batch.edge_index, split.message_edge_index())
            assert batch.link_role == role


@pytest.mark.parametrize("owner", ["model", "trainer"])
def test_nnmodel_and_trainer_announce_each_epoch_to_the_training_loader(tmp_path,
                                                                         owner: str) -> None:
    # Spec §4.2 / §26 "Training negatives": epoch e's batches are training_candidates
    # (seed, e), under NNModel.train and Trainer.train alike.
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    loader = task.loader("train", x, 1_000)  # one batch per epoch
    if owner == "trainer":
        params = (NNTrainerParams.builder().n_epochs(3).train_loader(loader).seed(0)
                  .optimizer("main", NNOptimParams.builder().sgd(max_lr=0.01).build())
                  .build())
        Trainer(m).train(params=params, objective=task.objective(), root=tmp_path,
                         verbose=False)
    else:
        m.train(plan(task, x, n_epochs=3).with_train_loader(loader), root=tmp_path,
                verbose=False)
    want = [training_candidates(split, task.seed, epoch)[0] for epoch in range(3)]
    assert alike(m.net.seen, want)
